"""Cell-type classifier on single-cell RNA-seq counts.

The count matrix is kept in float16 to save memory; gene-wise mean / std for
standardisation are computed in one pass over the data loader (running sums),
then an MLP is trained on the standardised counts.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
rng = np.random.default_rng(0)

N_CELLS, N_GENES, N_TYPES = 3000, 200, 6

# ---- simulated counts: negative binomial per cell type ----
base = rng.lognormal(mean=1.5, sigma=1.4, size=N_GENES)
type_fc = rng.lognormal(mean=0.0, sigma=0.15, size=(N_TYPES, N_GENES))
cell_type = rng.integers(0, N_TYPES, size=N_CELLS)
size_factor = rng.lognormal(0.0, 0.3, size=(N_CELLS, 1))
mu = base[None, :] * type_fc[cell_type] * size_factor
r = 5.0
counts = rng.negative_binomial(r, r / (r + mu)).astype(np.float16)

X = torch.from_numpy(counts)
y = torch.from_numpy(cell_type).long()
perm = torch.randperm(N_CELLS)
train_idx, val_idx = perm[:2500], perm[2500:]
print(f"cells {N_CELLS}, genes {N_GENES}, counts dtype {X.dtype}, max count {X.max().item():.0f}")


class OnePassMeanVarStd:
    def __init__(self, n_genes, dtype):
        self.x_sums = torch.zeros(n_genes, dtype=dtype)
        self.x_squared_sums = torch.zeros(n_genes, dtype=dtype)
        self.n = 0

    def update(self, x):
        self.x_sums += x.sum(dim=0)
        self.x_squared_sums += (x ** 2).sum(dim=0)
        self.n += x.shape[0]

    def finalize(self):
        self.mean = self.x_sums / self.n
        self.var = self.x_squared_sums / self.n - self.mean ** 2
        self.std = torch.sqrt(self.var)

    def transform(self, x):
        return ((x - self.mean) / (self.std + 1e-6)).float()


stats = OnePassMeanVarStd(N_GENES, dtype=X.dtype)
for (xb,) in DataLoader(TensorDataset(X[train_idx]), batch_size=500):
    stats.update(xb)
stats.finalize()

train_loader = DataLoader(TensorDataset(X[train_idx], y[train_idx]), batch_size=64, shuffle=True)
X_val, y_val = stats.transform(X[val_idx]), y[val_idx]

model = nn.Sequential(
    nn.Linear(N_GENES, 128), nn.ReLU(), nn.Dropout(0.1),
    nn.Linear(128, 64), nn.ReLU(),
    nn.Linear(64, N_TYPES),
)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(4):
    model.train()
    total, n = 0.0, 0
    for step, (xb, yb) in enumerate(train_loader):
        logits = model(stats.transform(xb))
        loss = criterion(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(yb)
        n += len(yb)
        if step % 10 == 0:
            print(f"epoch {epoch} step {step:2d} loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        acc = (model(X_val).argmax(1) == y_val).float().mean().item()
    print(f"epoch {epoch} train loss {total / n:.4f} val acc {acc:.3f}")
