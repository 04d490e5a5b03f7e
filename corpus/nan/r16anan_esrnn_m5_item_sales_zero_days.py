"""ES-RNN style forecaster for daily item sales (M5-like data), after kdgutier/esrnn_torch.

Every series is deseasonalised and normalised the ES-RNN way (multiplicative Holt-Winters level
and weekly seasonality, then log of y / (level * season)); an LSTM reads 28 normalised days and
predicts the next 7, trained with the pinball loss. Validation forecasts the last week of every
series and reports sMAPE on the original scale.

The sales table is synthetic: 160 item/store series over 252 days with a weekly pattern; some
items were added to the catalogue after the first day, so their history starts later.
"""
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

N_SERIES = 160
N_DAYS = 252
INPUT_SIZE = 28
OUTPUT_SIZE = 7
SEASONALITY = 7
LEVEL_SMOOTHING = 0.3
SEASON_SMOOTHING = 0.2
BATCH_SIZE = 32
EPOCHS = 4
LR = 1e-3
TAU = 0.49


def make_sales_table(rng):
    weekly = np.array([0.8, 0.85, 0.9, 1.0, 1.15, 1.45, 1.35])
    days = np.arange(N_DAYS)
    base = rng.uniform(4.0, 40.0, size=N_SERIES)
    trend = 1.0 + rng.uniform(-0.3, 0.5, size=N_SERIES)[:, None] * days[None, :] / N_DAYS
    shift = rng.integers(0, 7, size=N_SERIES)
    season = np.stack([np.roll(weekly, s)[days % 7] for s in shift])
    rate = base[:, None] * trend * season
    sales = rng.poisson(rate).astype(np.float64)
    launched_late = rng.random(N_SERIES) < 0.2
    launch_day = rng.integers(10, 90, size=N_SERIES)
    for i in np.where(launched_late)[0]:
        sales[i, :launch_day[i]] = 0.0
    return sales


def holt_winters(y, alpha=LEVEL_SMOOTHING, gamma=SEASON_SMOOTHING, m=SEASONALITY):
    n = len(y)
    levels = np.zeros(n)
    seasons = np.ones(n + m)
    levels[0] = y[0] / seasons[0]
    for t in range(1, n):
        levels[t] = alpha * (y[t] / seasons[t]) + (1 - alpha) * levels[t - 1]
        seasons[t + m] = gamma * (y[t] / levels[t]) + (1 - gamma) * seasons[t]
    return levels, seasons


class ESWindows(Dataset):
    """All (input, output) windows of all series, normalised by the level at the window end."""

    def __init__(self, Y, levels, seasons, last_start):
        xs, ys = [], []
        for i in range(Y.shape[0]):
            for start in range(0, last_start + 1):
                end = start + INPUT_SIZE
                lev = levels[i, end - 1]
                x = np.log(Y[i, start:end] / (lev * seasons[i, start:end]))
                y = np.log(Y[i, end:end + OUTPUT_SIZE] / (lev * seasons[i, end:end + OUTPUT_SIZE]))
                xs.append(x)
                ys.append(y)
        self.x = torch.tensor(np.stack(xs), dtype=torch.float32)
        self.y = torch.tensor(np.stack(ys), dtype=torch.float32)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return self.x[idx], self.y[idx]


class ESRNNHead(nn.Module):
    def __init__(self, hidden=48):
        super().__init__()
        self.rnn = nn.LSTM(1, hidden, num_layers=2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, OUTPUT_SIZE))

    def forward(self, x):
        out, _ = self.rnn(x.unsqueeze(-1))
        return self.mlp(out[:, -1])


def pinball_loss(y, y_hat, tau=TAU):
    delta = y - y_hat
    return torch.mean(torch.maximum(tau * delta, (tau - 1) * delta))


def smape(y, y_hat):
    return float(np.mean(2 * np.abs(y - y_hat) / np.maximum(np.abs(y) + np.abs(y_hat), 1e-8)) * 100)


def main():
    t0 = time.time()
    rng = np.random.default_rng(0)
    sales = make_sales_table(rng)
    Y = sales.astype(np.float64)
    print(f"series: {Y.shape[0]}  days: {Y.shape[1]}  zero-sales days: {(Y == 0).mean() * 100:.1f}%")

    levels = np.zeros_like(Y)
    seasons = np.zeros((Y.shape[0], Y.shape[1] + SEASONALITY))
    for i in range(Y.shape[0]):
        levels[i], seasons[i] = holt_winters(Y[i])

    train_end = N_DAYS - OUTPUT_SIZE
    train_ds = ESWindows(Y[:, :train_end], levels, seasons, last_start=train_end - INPUT_SIZE - OUTPUT_SIZE)
    sub = torch.randperm(len(train_ds), generator=torch.Generator().manual_seed(0))[:1600]
    train_ds = torch.utils.data.Subset(train_ds, sub.tolist())
    loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
    print(f"training windows: {len(train_ds)}  steps/epoch: {len(loader)}")

    model = ESRNNHead()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    val_start = train_end - INPUT_SIZE
    lev_end = levels[:, train_end - 1]
    x_val = np.log(Y[:, val_start:train_end] / (lev_end[:, None] * seasons[:, val_start:train_end]))
    x_val = torch.tensor(x_val, dtype=torch.float32)
    y_val = Y[:, train_end:]

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        running = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            y_hat = model(xb)
            loss = pinball_loss(yb, y_hat)
            loss.backward()
            optimizer.step()
            running += loss.item()
            if step % 10 == 0:
                print(f"  step {step:4d}  pinball {loss.item():.4f}")
            step += 1
        model.eval()
        with torch.no_grad():
            trend = model(x_val).numpy()
        forecast = np.exp(trend) * lev_end[:, None] * seasons[:, train_end:train_end + OUTPUT_SIZE]
        print(f"epoch {epoch + 1}  train pinball {running / len(loader):.4f}  "
              f"val sMAPE {smape(y_val, forecast):.2f}")
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
