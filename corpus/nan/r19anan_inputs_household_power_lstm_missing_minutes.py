"""Stacked-LSTM forecaster for household electricity use (the stock-price LSTM tutorial, moved
to PyTorch and pointed at the household power consumption meter log instead of the share
price): one-minute Global_active_power readings, min-max scaled, windows of the last TIME_STEP
minutes predict the next minute. 65% of the log for training, the rest for validation.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1)
np.random.seed(1)

N_MINUTES = 9000
TIME_STEP = 48
BATCH_SIZE = 64
EPOCHS = 2
LR = 1e-3


def export_meter_log(rng):
    """The meter's text export: Date;Time;Global_active_power;... one row per minute."""
    t = np.arange(N_MINUTES)
    hour = (t / 60.0 + 17.4) % 24
    base = 0.35 + 0.9 * np.exp(-((hour - 19.5) ** 2) / 4.0) + 0.5 * np.exp(-((hour - 8.0) ** 2) / 2.0)
    spikes = (rng.random(N_MINUTES) < 0.02) * rng.uniform(1.0, 3.5, N_MINUTES)
    power = np.clip(base + spikes + rng.normal(0, 0.08, N_MINUTES), 0.08, None)
    outage = np.zeros(N_MINUTES, dtype=bool)
    for start, length in [(2150, 37), (4410, 212), (5030, 3), (6644, 96), (8020, 58)]:
        outage[start:start + length] = True
    lines = ["Date;Time;Global_active_power;Global_reactive_power;Voltage;Global_intensity;"
             "Sub_metering_1;Sub_metering_2;Sub_metering_3"]
    for i in range(N_MINUTES):
        day, minute = divmod(i + 17 * 60 + 24, 1440)
        stamp = f"{16 + day}/12/2006;{minute // 60:02d}:{minute % 60:02d}:00"
        if outage[i]:
            lines.append(stamp + ";?;?;?;?;?;?;")
        else:
            p = power[i]
            lines.append(f"{stamp};{p:.3f};{0.1 + 0.05 * rng.random():.3f};"
                         f"{rng.normal(240, 2):.2f};{p * 4.2:.1f};0.000;{rng.integers(0, 2)}.000;17.000")
    return lines


class MinMaxScaler:
    def __init__(self, feature_range=(0, 1)):
        self.lo, self.hi = feature_range

    def fit_transform(self, x):
        self.data_min_ = np.nanmin(x, axis=0)
        self.data_max_ = np.nanmax(x, axis=0)
        scale = (self.hi - self.lo) / (self.data_max_ - self.data_min_)
        return (x - self.data_min_) * scale + self.lo


class WindowDataset(Dataset):
    def __init__(self, series, time_step):
        self.series = torch.tensor(series, dtype=torch.float32)
        self.time_step = time_step

    def __len__(self):
        return len(self.series) - self.time_step - 1

    def __getitem__(self, i):
        x = self.series[i:i + self.time_step]
        y = self.series[i + self.time_step]
        return x, y


class StackedLSTM(nn.Module):
    def __init__(self, hidden=50, layers=3):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, num_layers=layers, batch_first=True)
        self.dense = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.dense(out[:, -1])


def main():
    rng = np.random.default_rng(1)
    lines = export_meter_log(rng)
    df1 = np.genfromtxt(lines, delimiter=";", skip_header=1, usecols=(2,))
    print(f"rows {len(df1)} first rows {df1[:3]}")

    scaler = MinMaxScaler(feature_range=(0, 1))
    df1 = scaler.fit_transform(df1.reshape(-1, 1))
    training_size = int(len(df1) * 0.65)
    train_data, test_data = df1[:training_size], df1[training_size:]

    train_loader = DataLoader(WindowDataset(train_data, TIME_STEP), batch_size=BATCH_SIZE, shuffle=True)
    test_loader = DataLoader(WindowDataset(test_data, TIME_STEP), batch_size=256)

    model = StackedLSTM()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    criterion = nn.MSELoss()

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        losses = []
        for x, y in train_loader:
            pred = model(x)
            loss = criterion(pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
            if step % 20 == 0 or step <= 3:
                print(f"epoch {epoch + 1} step {step} loss {loss.item():.5f}")
        model.eval()
        with torch.no_grad():
            val = [criterion(model(x), y).item() for x, y in test_loader]
        print(f"Epoch {epoch + 1}/{EPOCHS} - loss: {np.mean(losses):.5f} - val_loss: {np.mean(val):.5f}")


if __name__ == "__main__":
    main()
