"""Small CNN classifier trained with the Lookahead optimizer wrapper from michaelrzhang/lookahead
(lookahead_pytorch.py): SGD with momentum makes k = 5 fast steps, then the weights are pulled back
to alpha * fast + (1 - alpha) * slow and cached as the new slow weights; the momentum buffer is pulled
back the same way ("pullback"). Evaluation runs on the slow weights, swapped in and out of the model
with _backup_and_load_cache / _clear_and_load_backup. Synthetic 4-class 12x12 blob images."""
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)


class Lookahead(Optimizer):
    def __init__(self, optimizer, la_steps=5, la_alpha=0.8, pullback_momentum="none"):
        self.optimizer = optimizer
        self._la_step = 0
        self.la_alpha = la_alpha
        self._total_la_steps = la_steps
        pullback_momentum = pullback_momentum.lower()
        assert pullback_momentum in ["reset", "pullback", "none"]
        self.pullback_momentum = pullback_momentum

        self.state = defaultdict(dict)

        for group in optimizer.param_groups:
            for p in group['params']:
                param_state = self.state[p]
                param_state['cached_params'] = torch.zeros_like(p.data)
                param_state['cached_params'].copy_(p.data)
                if self.pullback_momentum == "pullback":
                    param_state['cached_mom'] = torch.zeros_like(p.data)

    def __getstate__(self):
        return {
            'state': self.state,
            'optimizer': self.optimizer,
            'la_alpha': self.la_alpha,
            '_la_step': self._la_step,
            '_total_la_steps': self._total_la_steps,
            'pullback_momentum': self.pullback_momentum
        }

    def zero_grad(self):
        self.optimizer.zero_grad()

    def get_la_step(self):
        return self._la_step

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

    def _backup_and_load_cache(self):
        for group in self.optimizer.param_groups:
            for p in group['params']:
                param_state = self.state[p]
                param_state['backup_params'] = torch.zeros_like(p.data)
                param_state['backup_params'].copy_(p.data)
                p.data.copy_(param_state['cached_params'])

    def _clear_and_load_backup(self):
        for group in self.optimizer.param_groups:
            for p in group['params']:
                param_state = self.state[p]
                p.data.copy_(param_state['backup_params'])
                del param_state['backup_params']

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def step(self, closure=None):
        loss = self.optimizer.step(closure)
        self._la_step += 1

        if self._la_step >= self._total_la_steps:
            self._la_step = 0
            for group in self.optimizer.param_groups:
                for p in group['params']:
                    param_state = self.state[p]
                    p.data.mul_(self.la_alpha).add_(param_state['cached_params'], alpha=1.0 - self.la_alpha)
                    param_state['cached_params'].copy_(p.data)
                    if self.pullback_momentum == "pullback":
                        internal_momentum = self.optimizer.state[p]["momentum_buffer"]
                        self.optimizer.state[p]["momentum_buffer"] = internal_momentum.mul_(self.la_alpha).add_(
                            param_state["cached_mom"], alpha=1.0 - self.la_alpha)
                        param_state["cached_mom"] = self.optimizer.state[p]["momentum_buffer"]
                    elif self.pullback_momentum == "reset":
                        self.optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p.data)

        return loss


def make_blobs(n, gen):
    """Class c = position of a bright Gaussian blob (one of four quadrants), plus clutter and noise."""
    y = torch.randint(0, 4, (n,), generator=gen)
    yy, xx = torch.meshgrid(torch.arange(12.0), torch.arange(12.0), indexing='ij')
    cy = 3.0 + 6.0 * (y // 2).float() + torch.randn(n, generator=gen)
    cx = 3.0 + 6.0 * (y % 2).float() + torch.randn(n, generator=gen)
    blob = torch.exp(-((yy[None] - cy[:, None, None]) ** 2 + (xx[None] - cx[:, None, None]) ** 2) / 4.0)
    qy, qx = 12 * torch.rand(n, generator=gen), 12 * torch.rand(n, generator=gen)
    clutter = 0.7 * torch.exp(-((yy[None] - qy[:, None, None]) ** 2 + (xx[None] - qx[:, None, None]) ** 2) / 2.0)
    x = blob + clutter + 0.5 * torch.randn(n, 12, 12, generator=gen)
    return x[:, None], y


g = torch.Generator().manual_seed(1)
x_train, y_train = make_blobs(1248, g)
x_test, y_test = make_blobs(400, g)
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True)
test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=400)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 3 * 3, 64)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


model = Net()
base_optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
optimizer = Lookahead(base_optimizer, la_steps=5, la_alpha=0.5, pullback_momentum="pullback")
criterion = nn.CrossEntropyLoss()


def test(model):
    model.eval()
    with torch.no_grad():
        xb, yb = next(iter(test_loader))
        out = model(xb)
        return criterion(out, yb).item(), (out.argmax(1) == yb).float().mean().item()


loss, acc = test(model)
print(f"epoch 0 | test loss {loss:.4f} | test acc {acc:.3f}")
for epoch in range(1, 6):
    model.train()
    running, seen = 0.0, 0
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        running += loss.item() * data.size(0)
        seen += data.size(0)
        if batch_idx % 20 == 0:
            print(f"  epoch {epoch} batch {batch_idx:02d} | la_step {optimizer.get_la_step()} | loss {loss.item():.4f}")
    fast_loss, fast_acc = test(model)
    optimizer._backup_and_load_cache()
    slow_loss, slow_acc = test(model)
    optimizer._clear_and_load_backup()
    print(f"epoch {epoch} | train loss {running / seen:.4f} | fast weights: test loss {fast_loss:.4f} "
          f"acc {fast_acc:.3f} | slow weights: test loss {slow_loss:.4f} acc {slow_acc:.3f}")
