"""Forest cover type (7 classes) from 54 cartographic features: 10 quantitative columns,
4 wilderness-area one-hot columns and 40 soil-type one-hot columns.

Features are centred and normalised per column before training.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
torch.manual_seed(0)


def load_covertype(n=3750):
    cover = rng.integers(0, 7, n)
    quantitative = rng.normal(0, 1, (n, 10)) + 0.8 * rng.normal(0, 1, (7, 10))[cover]
    quantitative = quantitative * np.array([280, 110, 7, 210, 58, 1560, 27, 20, 38, 1320]) + \
        np.array([2750, 156, 16, 227, 51, 1714, 212, 218, 135, 1511])
    wilderness = np.eye(4)[(cover + rng.integers(0, 2, n)) % 4]
    soil_probs = rng.dirichlet(np.ones(40), 7)
    soil_probs[:, [14, 35]] = 0.0
    soil_probs /= soil_probs.sum(1, keepdims=True)
    soil = np.eye(40)[[rng.choice(40, p=soil_probs[c]) for c in cover]]
    return np.hstack([quantitative, wilderness, soil]), cover


train, labels = load_covertype()
print("train data", train.shape)

train = torch.tensor(train, dtype=torch.float32)
mean = train.mean(dim=0)
std = train.std(dim=0)
norm_train = (train - mean) / std

loader = DataLoader(TensorDataset(norm_train, torch.tensor(labels)), batch_size=64, shuffle=True)

model = nn.Sequential(nn.Linear(54, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 7))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(2):
    correct, total_loss = 0, 0.0
    for i, (xb, yb) in enumerate(loader):
        logits = model(xb)
        loss = criterion(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        correct += (logits.argmax(1) == yb).sum().item()
        if i % 15 == 0:
            print(f"epoch {epoch} iter {i:2d} loss {loss.item():.4f}")
    print(f"epoch {epoch}: loss {total_loss / len(loader):.4f} acc {correct / len(loader.dataset):.3f}")
