"""Tabular classifier trained with the Lion optimizer (lucidrains/lion-pytorch)."""
from typing import Tuple, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


def exists(val):
    return val is not None


def update_fn(p, grad, exp_avg, lr, wd, beta1, beta2):
    p.data.mul_(1. - lr * wd)
    update = exp_avg.clone().mul_(beta1).add(grad, alpha=1. - beta1).sign_()
    p.add_(update, alpha=-lr)
    exp_avg.mul_(beta2).add_(grad, alpha=1. - beta2)


class Lion(Optimizer):
    def __init__(self, params, lr: float = 1e-4, betas: Tuple[float, float] = (0.9, 0.99),
                 weight_decay: float = 0.0):
        assert lr > 0.
        assert all([0. <= beta <= 1. for beta in betas])
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.update_fn = update_fn

    @torch.no_grad()
    def step(self, closure: Callable = None):
        loss = None
        if exists(closure):
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in filter(lambda p: exists(p.grad), group['params']):
                grad, lr, wd, beta1, beta2, state = p.grad, group['lr'], group['weight_decay'], *group['betas'], self.state[p]
                if len(state) == 0:
                    state['exp_avg'] = torch.zeros_like(p)
                exp_avg = state['exp_avg']
                self.update_fn(p, grad, exp_avg, lr, wd, beta1, beta2)
        return loss


class TabularSet(Dataset):
    def __init__(self, n, w1, w2):
        self.x = torch.randn(n, 32)
        h = torch.tanh(self.x @ w1)
        self.y = (h @ w2).argmax(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 6)

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        x = F.gelu(self.fc2(x))
        return self.fc3(x)


w1 = torch.randn(32, 48)
w2 = torch.randn(48, 6)
train_loader = DataLoader(TabularSet(4000, w1, w2), batch_size=100, shuffle=True)
test_loader = DataLoader(TabularSet(1000, w1, w2), batch_size=500)

model = Net()
optimizer = Lion(model.parameters(), lr=3e-4, weight_decay=1.0)
criterion = nn.CrossEntropyLoss()


def evaluate():
    model.eval()
    correct, total, loss = 0, 0, 0.0
    with torch.no_grad():
        for x, y in test_loader:
            out = model(x)
            loss += criterion(out, y).item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return loss / total, correct / total


tl, ta = evaluate()
print(f"init  test loss {tl:.4f}  test acc {ta:.3f}")
for epoch in range(1, 6):
    running = 0.0
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.item()
    tl, ta = evaluate()
    print(f"epoch {epoch}  train loss {running / len(train_loader):.4f}  test loss {tl:.4f}  test acc {ta:.3f}")
