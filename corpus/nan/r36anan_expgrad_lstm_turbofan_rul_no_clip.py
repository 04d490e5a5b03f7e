"""Remaining-useful-life (RUL) regression on C-MAPSS-style turbofan run-to-failure data.

Each engine is a multivariate series of operating settings and sensor readings, min-max scaled
per sensor. Sliding windows of the last WINDOW cycles go through a two-layer LSTM; the last
hidden state predicts the RUL in cycles (piecewise-linear target capped at 125). MSE loss,
SGD with momentum, RMSE on held-out engines printed every epoch.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_ENGINES = 60
N_SENSORS = 14
WINDOW = 50
MAX_RUL = 125
HIDDEN = 64
BATCH_SIZE = 32
EPOCHS = 2
LR = 0.07
MOMENTUM = 0.9


def simulate_engine(rng):
    life = rng.integers(150, 320)
    t = np.arange(life)
    wear = (t / life) ** 2
    sens = rng.uniform(-1.0, 1.0, N_SENSORS)
    base = rng.uniform(0.3, 0.7, N_SENSORS)
    x = base + 0.35 * sens * wear[:, None] + 0.03 * rng.standard_normal((life, N_SENSORS))
    rul = np.minimum(life - 1 - t, MAX_RUL)
    return x.astype(np.float32), rul.astype(np.float32)


class TurbofanWindows(Dataset):
    def __init__(self, engines):
        xs, ys = [], []
        for x, rul in engines:
            for end in range(WINDOW, len(x) + 1, 3):
                xs.append(x[end - WINDOW:end])
                ys.append(rul[end - 1])
        self.x = torch.tensor(np.stack(xs))
        self.y = torch.tensor(np.array(ys)).unsqueeze(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class RULNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(N_SENSORS, HIDDEN, num_layers=2, batch_first=True)
        self.head = nn.Sequential(nn.Linear(HIDDEN, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


rng = np.random.default_rng(0)
engines = [simulate_engine(rng) for _ in range(N_ENGINES)]
train_set = TurbofanWindows(engines[:48])
valid_set = TurbofanWindows(engines[48:])
train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
valid_loader = DataLoader(valid_set, batch_size=256)
print(f"train windows {len(train_set)}, valid windows {len(valid_set)}")

model = RULNet()
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

step = 0
for epoch in range(EPOCHS):
    model.train()
    total = 0.0
    for xb, yb in train_loader:
        pred = model(xb)
        loss = criterion(pred, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 20 == 0:
            print(f"step {step:4d}  loss {loss.item():.3f}")
        step += 1
    model.eval()
    with torch.no_grad():
        se, n = 0.0, 0
        for xb, yb in valid_loader:
            se += ((model(xb) - yb) ** 2).sum().item()
            n += len(yb)
    print(f"epoch {epoch + 1}  train mse {total / len(train_loader):.3f}  valid rmse {np.sqrt(se / n):.2f} cycles")
