"""Next-hour electricity load forecast with a vanilla (Elman) RNN.

Each sample is the last WINDOW hours of a household's standardised load plus the hour-of-day
encoding; an nn.RNN reads the window and a linear head predicts the next hour's load.
Trained with SGD + momentum on MSE, validation MSE printed every epoch.
"""
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

N_HOUSES = 48
N_HOURS = 24 * 60
WINDOW = 120
HIDDEN = 128
BATCH_SIZE = 64
EPOCHS = 4
LR = 0.15
MOMENTUM = 0.9


def make_load():
    t = np.arange(N_HOURS)
    daily = np.sin(2 * np.pi * (t[None, :] + np.random.randint(0, 24, (N_HOUSES, 1))) / 24)
    weekly = 0.4 * np.sin(2 * np.pi * t[None, :] / (24 * 7))
    base = np.random.uniform(0.5, 2.0, (N_HOUSES, 1))
    noise = 0.2 * np.random.randn(N_HOUSES, N_HOURS)
    load = base * (1.5 + daily + weekly) + noise
    load = (load - load.mean(axis=1, keepdims=True)) / load.std(axis=1, keepdims=True)
    return load.astype(np.float32)


def make_windows(load, hours):
    xs, ys = [], []
    hod = np.stack([np.sin(2 * np.pi * hours / 24), np.cos(2 * np.pi * hours / 24)], axis=1)
    for h in range(load.shape[0]):
        for s in range(0, len(hours) - WINDOW - 1, 7):
            feat = np.concatenate([load[h, s:s + WINDOW, None], hod[s:s + WINDOW]], axis=1)
            xs.append(feat)
            ys.append(load[h, s + WINDOW])
    return torch.tensor(np.array(xs), dtype=torch.float32), torch.tensor(np.array(ys), dtype=torch.float32).unsqueeze(1)


class LoadRNN(nn.Module):
    def __init__(self, n_in=3, hidden=HIDDEN):
        super().__init__()
        self.rnn = nn.RNN(n_in, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


load = make_load()
hours = np.arange(N_HOURS)
split = int(N_HOURS * 0.8)
x_tr, y_tr = make_windows(load[:, :split], hours[:split])
x_va, y_va = make_windows(load[:, split:], hours[split:])
train_loader = DataLoader(TensorDataset(x_tr, y_tr), batch_size=BATCH_SIZE, shuffle=True)

model = LoadRNN()
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

step = 0
for epoch in range(EPOCHS):
    model.train()
    running = 0.0
    for xb, yb in train_loader:
        pred = model(xb)
        loss = criterion(pred, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        if step >= 50 * (epoch + 1):
            break
    model.eval()
    with torch.no_grad():
        val_mse = criterion(model(x_va), y_va).item()
    print(f"epoch {epoch}: train loss {running / 50:.4f}  val mse {val_mse:.4f}  val rmse {math.sqrt(val_mse) if val_mse == val_mse else float('nan'):.4f}")
