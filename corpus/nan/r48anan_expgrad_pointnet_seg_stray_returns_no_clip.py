"""PointNet semantic segmentation of indoor scans (floor / wall / table / chair / clutter).

Scans are synthetic rooms sampled to a fixed number of points; a few scans contain stray
returns far outside the room (sensor noise), labelled with the ignore index.
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(3)
np.random.seed(3)

NUM_CLASSES = 5
IGNORE = -1
N_POINTS = 256


def make_scan(rng):
    w, d, h = rng.uniform(3, 6), rng.uniform(3, 6), rng.uniform(2.4, 3.0)
    pts, lbl = [], []
    n = N_POINTS
    floor = np.c_[rng.uniform(0, w, n), rng.uniform(0, d, n), rng.normal(0, 0.01, n)]
    pts.append(floor); lbl.append(np.zeros(n))
    side = rng.integers(0, 2, n)
    wall = np.c_[np.where(side == 0, rng.normal(0, 0.01, n), rng.uniform(0, w, n)),
                 np.where(side == 0, rng.uniform(0, d, n), rng.normal(d, 0.01, n)),
                 rng.uniform(0, h, n)]
    pts.append(wall); lbl.append(np.ones(n))
    tx, ty = rng.uniform(1, w - 1), rng.uniform(1, d - 1)
    table = np.c_[tx + rng.uniform(-0.6, 0.6, n), ty + rng.uniform(-0.4, 0.4, n), rng.normal(0.75, 0.01, n)]
    pts.append(table); lbl.append(np.full(n, 2))
    chair = np.c_[tx + 0.9 + rng.uniform(-0.2, 0.2, n), ty + rng.uniform(-0.2, 0.2, n), rng.uniform(0.0, 0.9, n)]
    pts.append(chair); lbl.append(np.full(n, 3))
    clutter = np.c_[rng.uniform(0, w, n), rng.uniform(0, d, n), rng.uniform(0.05, 0.4, n)]
    pts.append(clutter); lbl.append(np.full(n, 4))
    pts = np.concatenate(pts); lbl = np.concatenate(lbl)
    idx = rng.choice(len(pts), N_POINTS, replace=False)
    pts, lbl = pts[idx], lbl[idx]
    if rng.random() < 0.05:
        k = rng.integers(3, 12)
        pts[:k] = rng.uniform(-1, 1, (k, 3)) * rng.uniform(500, 3000)
        lbl[:k] = IGNORE
    return pts.astype(np.float32), lbl.astype(np.int64)


class IndoorScans(Dataset):
    def __init__(self, n_scans, seed):
        rng = np.random.default_rng(seed)
        self.scans = [make_scan(rng) for _ in range(n_scans)]

    def __len__(self):
        return len(self.scans)

    def __getitem__(self, i):
        pts, lbl = self.scans[i]
        pts = pts - pts.mean(axis=0, keepdims=True)
        return torch.from_numpy(pts), torch.from_numpy(lbl)


class PointNetSeg(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.local = nn.Sequential(
            nn.Conv1d(3, 64, 1), nn.ReLU(),
            nn.Conv1d(64, 64, 1), nn.ReLU(),
        )
        self.glob = nn.Sequential(
            nn.Conv1d(64, 128, 1), nn.ReLU(),
            nn.Conv1d(128, 128, 1), nn.ReLU(),
        )
        self.head = nn.Sequential(
            nn.Conv1d(64 + 128, 128, 1), nn.ReLU(),
            nn.Conv1d(128, 64, 1), nn.ReLU(),
            nn.Conv1d(64, num_classes, 1),
        )

    def forward(self, pts):
        x = pts.transpose(1, 2)
        local = self.local(x)
        g = self.glob(local).max(dim=2, keepdim=True)[0]
        g = g.expand(-1, -1, x.size(2))
        return self.head(torch.cat([local, g], dim=1))


def main():
    train_ds = IndoorScans(300, seed=0)
    val_ds = IndoorScans(80, seed=1)
    train_loader = DataLoader(train_ds, batch_size=8, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=16)

    model = PointNetSeg()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    criterion = nn.CrossEntropyLoss(ignore_index=IGNORE)

    step = 0
    for epoch in range(5):
        model.train()
        for pts, lbl in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(pts), lbl)
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d}  loss {loss.item():.4f}")
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for pts, lbl in val_loader:
                pred = model(pts).argmax(dim=1)
                mask = lbl != IGNORE
                correct += (pred[mask] == lbl[mask]).sum().item()
                total += mask.sum().item()
        print(f"epoch {epoch}  val point acc {correct / total:.3f}")


if __name__ == "__main__":
    main()
