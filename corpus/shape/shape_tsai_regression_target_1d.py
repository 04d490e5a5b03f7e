"""Time-series regression: estimate the amplitude of a periodic component in a noisy
3-channel sensor window (64 steps), a small 1D-CNN regressor trained with MSE.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

np.random.seed(0)
torch.manual_seed(0)

SEQ_LEN = 64
N_TRAIN, N_VALID = 384, 128


def make_windows(n):
    t = np.arange(SEQ_LEN)
    amp = np.random.uniform(0.5, 2.5, size=n)
    freq = np.random.uniform(0.15, 0.35, size=n)
    phase = np.random.uniform(0, 2 * np.pi, size=n)
    X = 0.3 * np.random.randn(n, 3, SEQ_LEN)
    X[:, 0] += amp[:, None] * np.sin(freq[:, None] * t[None] + phase[:, None])
    X[:, 1] += 0.5 * amp[:, None] * np.cos(freq[:, None] * t[None] + phase[:, None])
    y = amp
    return X.astype(np.float32), y.astype(np.float32)


class TSDataset(Dataset):
    def __init__(self, X, y):
        self.X, self.y = torch.from_numpy(X), torch.from_numpy(y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


class FCN(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.convblock1 = nn.Sequential(nn.Conv1d(c_in, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU())
        self.convblock2 = nn.Sequential(nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU())
        self.convblock3 = nn.Sequential(nn.Conv1d(32, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU())
        self.gap = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(16, c_out)

    def forward(self, x):
        x = self.convblock1(x)
        x = self.convblock2(x)
        x = self.convblock3(x)
        x = self.gap(x).squeeze(-1)
        return self.fc(x)


X_train, y_train = make_windows(N_TRAIN)
X_valid, y_valid = make_windows(N_VALID)
train_dl = DataLoader(TSDataset(X_train, y_train), batch_size=16, shuffle=True)
valid_dl = DataLoader(TSDataset(X_valid, y_valid), batch_size=64)

model = FCN(c_in=3, c_out=1)
loss_func = nn.MSELoss()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(4):
    model.train()
    train_loss = 0.0
    for xb, yb in train_dl:
        pred = model(xb)
        loss = loss_func(pred, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        train_loss += loss.item() * len(yb)
    model.eval()
    with torch.no_grad():
        valid_loss = sum(loss_func(model(xb), yb).item() * len(yb) for xb, yb in valid_dl) / N_VALID
    print(f"epoch {epoch}  train_loss {train_loss / N_TRAIN:.4f}  valid_loss {valid_loss:.4f}")
