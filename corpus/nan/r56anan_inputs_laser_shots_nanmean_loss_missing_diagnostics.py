"""Surrogate model for a laser-plasma accelerator: predict the electron beam diagnostics of a shot
(peak energy, charge, divergence) from the machine settings logged for that shot. Settings and
diagnostics come from two logs that are joined on the shot number."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
rng = np.random.default_rng(0)

N_SHOTS = 1500
SETTINGS = ["laser_energy", "focus_z", "gas_pressure", "pulse_duration", "dopant_frac"]
DIAGNOSTICS = ["peak_energy", "charge", "divergence"]


def make_logs():
    settings_log = {}
    diag_log = {}
    for shot in range(1000, 1000 + N_SHOTS):
        s = rng.normal(size=len(SETTINGS))
        settings_log[shot] = s
        energy = 250 + 40 * s[0] - 25 * s[1] ** 2 + 15 * s[2] + rng.normal(0, 5)
        charge = 30 + 8 * s[2] + 6 * s[4] - 4 * s[3] + rng.normal(0, 2)
        divergence = 3 + 0.5 * np.abs(s[1]) + 0.3 * s[3] + rng.normal(0, 0.2)
        record = {"peak_energy": energy, "divergence": divergence}
        if rng.random() > 0.12:
            record["charge"] = charge
        if rng.random() > 0.03:
            diag_log[shot] = record
    return settings_log, diag_log


def join_logs(settings_log, diag_log):
    shots = sorted(settings_log)
    x = np.stack([settings_log[s] for s in shots]).astype(np.float32)
    y = np.full((len(shots), len(DIAGNOSTICS)), np.nan, dtype=np.float32)
    for i, s in enumerate(shots):
        for j, name in enumerate(DIAGNOSTICS):
            if s in diag_log and name in diag_log[s]:
                y[i, j] = diag_log[s][name]
    return x, y


class Surrogate(nn.Module):
    def __init__(self, d_in=len(SETTINGS), d_out=len(DIAGNOSTICS), hidden=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, d_out),
        )

    def forward(self, x):
        return self.net(x)


def main():
    x, y = join_logs(*make_logs())
    y_mean, y_std = np.nanmean(y, axis=0), np.nanstd(y, axis=0)
    y = (y - y_mean) / y_std
    print(f"joined {len(x)} shots, settings {x.shape[1]}, diagnostics {y.shape[1]}")

    split = 1200
    train_ds = TensorDataset(torch.from_numpy(x[:split]), torch.from_numpy(y[:split]))
    val_ds = TensorDataset(torch.from_numpy(x[split:]), torch.from_numpy(y[split:]))
    train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=100)

    model = Surrogate()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    step = 0
    for epoch in range(5):
        model.train()
        for xb, yb in train_loader:
            pred = model(xb)
            loss = torch.nanmean((pred - yb) ** 2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 25 == 0:
                print(f"step {step:4d}  train mse {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            errs = [torch.nanmean((model(xb) - yb) ** 2, dim=0) for xb, yb in val_loader]
            per_diag = torch.stack(errs).mean(0)
        print(f"epoch {epoch + 1}  val mse " + "  ".join(f"{n} {v:.4f}" for n, v in zip(DIAGNOSTICS, per_diag.tolist())))


if __name__ == "__main__":
    main()
