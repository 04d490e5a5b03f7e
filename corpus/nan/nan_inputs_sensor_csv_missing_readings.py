"""Calibration of a low-cost NO2 sensor against a reference station (SensEURCity-style data).

The export is a CSV with one row per 10-minute reading: the raw electrochemical signals (mV),
temperature and relative humidity, and the reference NO2 concentration. The network learns
the reference value from the raw readings.
"""
import csv
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

COLUMNS = ["no2_we", "no2_ae", "o3_we", "temperature", "RH", "ref_no2"]


def export_station_csv(path, n=2000, seed=0):
    """Writes the station logger export (one reading per row)."""
    rng = np.random.default_rng(seed)
    temp = rng.uniform(2, 32, n)
    rh = rng.uniform(25, 95, n)
    ref = rng.gamma(2.0, 12.0, n)
    no2_ae = 220 + 2.0 * temp + rng.normal(0, 3, n)
    no2_we = no2_ae + 4.0 * ref - 0.4 * rh + rng.normal(0, 3, n)
    o3_we = 300 + 3.0 * rng.gamma(2.0, 15.0, n) + rng.normal(0, 8, n)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for i in range(n):
            row = [f"{no2_we[i]:.1f}", f"{no2_ae[i]:.1f}", f"{o3_we[i]:.1f}", f"{temp[i]:.2f}", f"{rh[i]:.1f}",
                   f"{ref[i]:.2f}"]
            if rng.random() < 0.02:
                row[4] = ""
            writer.writerow(row)


class SensorDataset(Dataset):
    def __init__(self, path):
        table = np.genfromtxt(path, delimiter=",", skip_header=1)
        self.readings = torch.tensor(table[:, :5], dtype=torch.float32)
        self.target = torch.tensor(table[:, 5:], dtype=torch.float32)

    def __len__(self):
        return len(self.target)

    def __getitem__(self, i):
        return {"x": self.readings[i], "y": self.target[i]}


class Calibrator(nn.Module):
    def __init__(self, n_in=5, hidden=64):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, x):
        return self.mlp(x)


def main():
    torch.manual_seed(0)
    workdir = tempfile.mkdtemp()
    csv_path = os.path.join(workdir, "senseurcity_antwerp.csv")
    export_station_csv(csv_path)

    dataset = SensorDataset(csv_path)
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    model = Calibrator()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()

    for epoch in range(2):
        running = 0.0
        for step, batch in enumerate(loader):
            pred = model(batch["x"])
            loss = criterion(pred, batch["y"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:3d} mse {loss.item():.3f}")
        print(f"epoch {epoch}: mean mse {running / len(loader):.3f}")


if __name__ == "__main__":
    main()
