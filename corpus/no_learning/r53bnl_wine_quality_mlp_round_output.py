"""Wine quality regression: predict the integer taster score (3-8) from 11 physico-chemical
measurements with a small MLP. The network outputs whole scores, like the labels."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader, random_split

torch.manual_seed(0)
np.random.seed(0)

FEATURES = ['fixed_acidity', 'volatile_acidity', 'citric_acid', 'residual_sugar', 'chlorides',
            'free_so2', 'total_so2', 'density', 'pH', 'sulphates', 'alcohol']


def make_wine_table(n):
    x = np.random.randn(n, len(FEATURES)).astype(np.float32)
    w = np.array([0.1, -0.9, 0.2, 0.05, -0.3, 0.1, -0.25, -0.2, -0.1, 0.45, 1.1], dtype=np.float32)
    score = 5.6 + x @ w * 0.8 + 0.3 * x[:, 10] * x[:, 9] + np.random.randn(n).astype(np.float32) * 0.35
    quality = np.clip(np.round(score), 3, 8).astype(np.float32)
    return x, quality


class WineDataset(Dataset):
    def __init__(self, n):
        x, y = make_wine_table(n)
        self.x = torch.from_numpy(x)
        self.y = torch.from_numpy(y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class QualityNet(nn.Module):
    def __init__(self, n_in):
        super().__init__()
        self.fc1 = nn.Linear(n_in, 64)
        self.fc2 = nn.Linear(64, 32)
        self.out = nn.Linear(32, 1)
        self.act = nn.ReLU()

    def forward(self, x):
        h = self.act(self.fc1(x))
        h = self.act(self.fc2(h))
        score = self.out(h).squeeze(1) + 5.0
        return torch.round(score)


dataset = WineDataset(1600)
train_set, val_set = random_split(dataset, [1280, 320], generator=torch.Generator().manual_seed(0))
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
val_loader = DataLoader(val_set, batch_size=64)

model = QualityNet(len(FEATURES))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.MSELoss()

for epoch in range(5):
    model.train()
    running = 0.0
    for step, (xb, yb) in enumerate(train_loader):
        optimizer.zero_grad()
        pred = model(xb)
        loss = criterion(pred, yb)
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch + 1} step {step:3d} train mse {loss.item():.4f}")
    model.eval()
    se, exact, n = 0.0, 0, 0
    with torch.no_grad():
        for xb, yb in val_loader:
            pred = torch.round(model(xb))
            se += ((pred - yb) ** 2).sum().item()
            exact += (pred == yb).sum().item()
            n += len(yb)
    print(f"epoch {epoch + 1}: train mse {running / len(train_loader):.4f} | val mse {se / n:.4f} | val exact {100.0 * exact / n:.1f}%")
