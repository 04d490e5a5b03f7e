"""Next-fix prediction for taxi GPS trips.

A GRU reads a trip's past fixes (x/y offsets in km from the trip's first fix, plus the speed)
and predicts the position of the next fix at every step. Trips have different lengths and are
padded to MAX_LEN; the loss is the mean GPS distance error in km over the real steps.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_TRIPS = 640
MAX_LEN = 40
MIN_LEN = 12
BATCH_SIZE = 32
EPOCHS = 6
LR = 2e-3


def make_trips():
    trips = []
    for _ in range(N_TRIPS):
        n = np.random.randint(MIN_LEN, MAX_LEN + 1)
        heading = np.random.uniform(0, 2 * np.pi)
        speed = np.random.uniform(0.2, 0.6)
        pos = np.zeros(2)
        pts = []
        for _ in range(n):
            heading += np.random.normal(0, 0.15)
            speed = np.clip(speed + np.random.normal(0, 0.03), 0.05, 0.9)
            pos = pos + speed * np.array([np.cos(heading), np.sin(heading)])
            pts.append([pos[0], pos[1], speed])
        trips.append(np.array(pts, dtype=np.float32))
    return trips


class TripDataset(Dataset):
    def __init__(self, trips):
        self.trips = trips

    def __len__(self):
        return len(self.trips)

    def __getitem__(self, i):
        t = self.trips[i]
        n = len(t) - 1
        x = np.zeros((MAX_LEN - 1, 3), dtype=np.float32)
        y = np.zeros((MAX_LEN - 1, 2), dtype=np.float32)
        mask = np.zeros(MAX_LEN - 1, dtype=np.float32)
        x[:n] = t[:-1]
        y[:n] = t[1:, :2]
        mask[:n] = 1.0
        return torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(mask)


class NextFixGRU(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.inp = nn.Linear(3, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 2)

    def forward(self, x):
        h, _ = self.gru(torch.relu(self.inp(x)))
        return x[..., :2] + self.head(h)


def gps_distance_loss(pred, target, mask):
    lx = (pred[..., 0] - target[..., 0]) * mask
    ly = (pred[..., 1] - target[..., 1]) * mask
    dist = torch.sqrt(torch.square(lx) + torch.square(ly))
    return dist.sum() / mask.sum()


def main():
    trips = make_trips()
    train_ds = TripDataset(trips[:512])
    val_ds = TripDataset(trips[512:])
    train_loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=BATCH_SIZE)

    model = NextFixGRU()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        running = 0.0
        for x, y, mask in train_loader:
            pred = model(x)
            loss = gps_distance_loss(pred, y, mask)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
            if step % 16 == 0:
                print(f"step {step:4d}  loss {loss.item():.4f} km")

        model.eval()
        err, n = 0.0, 0.0
        with torch.no_grad():
            for x, y, mask in val_loader:
                pred = model(x)
                d = torch.linalg.norm(pred - y, dim=-1) * mask
                err += d.sum().item()
                n += mask.sum().item()
        print(f"epoch {epoch + 1}  train {running / len(train_loader):.4f} km  "
              f"val mean error {err / n:.4f} km")


if __name__ == "__main__":
    main()
