"""Small CNN with EvoNorm-B0 layers (batch/instance statistics, no BatchNorm) for
16x16 sensor heat-map classification, 4 classes."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


def instance_std(x, eps=1e-5):
    var = torch.var(x, dim=(2, 3), keepdim=True).expand_as(x)
    return torch.sqrt(var + eps)


class EvoNorm2D(nn.Module):
    def __init__(self, channels, momentum=0.9, eps=1e-5):
        super().__init__()
        self.momentum = momentum
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(1, channels, 1, 1))
        self.beta = nn.Parameter(torch.zeros(1, channels, 1, 1))
        self.v = nn.Parameter(torch.ones(1, channels, 1, 1))
        self.register_buffer("running_var", torch.ones(1, channels, 1, 1))

    def forward(self, x):
        if self.training:
            var = torch.var(x, dim=(0, 2, 3), keepdim=True)
            with torch.no_grad():
                self.running_var.mul_(self.momentum).add_((1 - self.momentum) * var)
        else:
            var = self.running_var
        den = torch.max((var + self.eps).sqrt(), self.v * x + instance_std(x, self.eps))
        return x / den * self.gamma + self.beta


class HeatmapSet(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, 4, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
        cx = torch.tensor([4.0, 11.0, 4.0, 11.0])[self.y] + torch.randn(n, generator=g)
        cy = torch.tensor([4.0, 4.0, 11.0, 11.0])[self.y] + torch.randn(n, generator=g)
        blob = torch.exp(-((xx - cx[:, None, None]) ** 2 + (yy - cy[:, None, None]) ** 2) / 8.0)
        self.x = (blob + 0.3 * torch.randn(n, 16, 16, generator=g)).unsqueeze(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        chans = [1, 16, 32, 64, 64]
        blocks = []
        for cin, cout in zip(chans[:-1], chans[1:]):
            blocks += [nn.Conv2d(cin, cout, 3, stride=2, padding=1), EvoNorm2D(cout)]
        self.features = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, 4)

    def forward(self, x):
        x = self.features(x)
        return self.fc(x.flatten(1))


train_loader = DataLoader(HeatmapSet(2560, 1), batch_size=64, shuffle=True)
val_loader = DataLoader(HeatmapSet(512, 2), batch_size=128)

model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

step = 0
for epoch in range(1, 6):
    model.train()
    running, n = 0.0, 0
    for x, y in train_loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        running += loss.item(); n += 1
        if step % 10 == 0 or step == 1:
            print(f"epoch {epoch} step {step:3d} loss {loss.item():.4f}")
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item(); total += len(y)
    print(f"epoch {epoch} train loss {running / n:.4f} val acc {correct / total:.4f}")
