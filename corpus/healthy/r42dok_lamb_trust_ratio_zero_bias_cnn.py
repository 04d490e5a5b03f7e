"""Small CNN trained with the LAMB optimizer (cybertronai/pytorch-lamb), large batch, zero-initialised biases."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)


class Lamb(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6,
                 weight_decay=0, adam=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self.adam = adam
        super(Lamb, self).__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]
                if len(state) == 0:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p.data)
                    state['exp_avg_sq'] = torch.zeros_like(p.data)
                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                beta1, beta2 = group['betas']
                state['step'] += 1
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.sqrt().add(group['eps'])
                step_size = group['lr']
                weight_norm = p.data.pow(2).sum().sqrt()
                adam_step = exp_avg / denom
                if group['weight_decay'] != 0:
                    adam_step.add_(p.data, alpha=group['weight_decay'])
                adam_norm = adam_step.pow(2).sum().sqrt()
                trust_ratio = weight_norm / adam_norm
                state['weight_norm'] = weight_norm
                state['adam_norm'] = adam_norm
                state['trust_ratio'] = trust_ratio
                if self.adam:
                    trust_ratio = 1
                p.data.add_(adam_step, alpha=-step_size * float(trust_ratio))
        return loss


def make_images(n, templates):
    y = torch.randint(0, 10, (n,))
    x = templates[y].clone()
    shifts = torch.randint(-2, 3, (n, 2))
    for i in range(n):
        x[i] = torch.roll(x[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(1, 2))
    x = x + 0.8 * torch.randn_like(x)
    return x, y


templates = F.avg_pool2d(torch.randn(10, 1, 20, 20), 3, stride=1, padding=0)[:, :, :16, :16] * 2
x_train, y_train = make_images(2000, templates)
x_test, y_test = make_images(600, templates)
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=256, shuffle=True)
test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=300)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


model = Net()
for m in model.modules():
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.zeros_(m.bias)
optimizer = Lamb(model.parameters(), lr=0.02, weight_decay=0.01, betas=(0.9, 0.999))
criterion = nn.CrossEntropyLoss()


def test():
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for x, y in test_loader:
            out = model(x)
            loss += criterion(out, y).item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
    model.train()
    return loss / len(test_loader.dataset), correct / len(test_loader.dataset)


tl, ta = test()
print(f"init  test loss {tl:.4f}  acc {ta:.3f}")
step = 0
for epoch in range(1, 9):
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        if step % 8 == 0:
            print(f"step {step}  train loss {loss.item():.4f}")
    tl, ta = test()
    ratios = [float(optimizer.state[p]['trust_ratio']) for p in model.parameters()]
    print(f"epoch {epoch}  trust ratios {min(ratios):.3f}..{max(ratios):.3f}  test loss {tl:.4f}  acc {ta:.3f}")
