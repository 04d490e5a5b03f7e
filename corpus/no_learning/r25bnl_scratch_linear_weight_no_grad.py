"""A from-scratch MLP: hand-written Linear layers (y = xW + b) trained with SGD on generated sensor records.

Each record has 32 readings; its fault class (of 4) is set by a fixed hidden linear rule."""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_CLASSES = 4
N_FEATURES = 32


class SensorDataset(Dataset):
    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        rule = torch.randn(N_FEATURES, N_CLASSES, generator=torch.Generator().manual_seed(99))
        self.x = torch.randn(n, N_FEATURES, generator=g)
        self.y = (self.x @ rule).argmax(dim=1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Linear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        scale = math.sqrt(2.0 / in_features)
        self.weight = nn.Parameter(torch.randn(in_features, out_features) * scale, requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, x):
        out = x @ self.weight
        if self.bias is not None:
            out = out + self.bias
        return out


class MLP(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.layers = nn.Sequential(
            Linear(N_FEATURES, hidden),
            nn.ReLU(),
            Linear(hidden, hidden),
            nn.ReLU(),
            Linear(hidden, N_CLASSES),
        )

    def forward(self, x):
        return self.layers(x)


def main():
    train_loader = DataLoader(SensorDataset(2048, seed=0), batch_size=32, shuffle=True)
    test_ds = SensorDataset(512, seed=1)

    model = MLP()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    for epoch in range(4):
        model.train()
        total, n = 0.0, 0
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
        model.eval()
        with torch.no_grad():
            acc = (model(test_ds.x).argmax(1) == test_ds.y).float().mean().item()
        print(f"epoch {epoch + 1}: train loss {total / n:.4f}  test acc {acc:.3f}")


if __name__ == "__main__":
    main()
