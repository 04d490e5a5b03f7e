"""Churn prediction for an online shop from per-customer aggregates.

The customer table (orders, spend, returns, sessions, support tickets, tenure) is
aggregated from the transaction log; ratio features are derived from it the way an
automated feature-synthesis step would (every numeric column divided by the count columns),
standardized, and fed to an MLP classifier.
"""
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
rng = np.random.default_rng(0)

N_CUSTOMERS = 4000
BATCH_SIZE = 64
EPOCHS = 4
LR = 1e-3


def make_customer_table(n):
    tenure_days = rng.integers(1, 720, size=n).astype(np.float64)
    n_sessions = rng.poisson(tenure_days / 15.0).astype(np.float64)
    n_orders = rng.binomial(n_sessions.astype(np.int64), 0.25).astype(np.float64)
    total_spend = np.array([rng.gamma(2.0, 30.0, size=int(k)).sum() for k in n_orders])
    n_returns = rng.binomial(n_orders.astype(np.int64), 0.1).astype(np.float64)
    n_tickets = rng.poisson(0.5 + 0.05 * n_returns).astype(np.float64)
    logit = (1.5 - 0.08 * n_orders + 0.6 * n_tickets + 2.0 * n_returns / np.maximum(n_orders, 1)
             - 0.002 * tenure_days)
    churned = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    table = {
        "tenure_days": tenure_days,
        "n_sessions": n_sessions,
        "n_orders": n_orders,
        "total_spend": total_spend,
        "n_returns": n_returns,
        "n_tickets": n_tickets,
    }
    return table, churned


def synthesize_features(table):
    columns = dict(table)
    for num in ["total_spend", "n_returns", "n_tickets"]:
        for den in ["n_orders", "n_sessions"]:
            columns[f"{num}_per_{den.split('_')[1]}"] = table[num] / table[den]
    names = sorted(columns)
    return names, np.stack([columns[k] for k in names], axis=1)


class CustomerDataset(Dataset):
    def __init__(self, X, y):
        self.X = torch.tensor(X, dtype=torch.float32)
        self.y = torch.tensor(y, dtype=torch.float32)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


class ChurnMLP(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(n_features, 64), nn.ReLU(),
            nn.Linear(64, 32), nn.ReLU(),
            nn.Linear(32, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(-1)


with np.errstate(divide="ignore", invalid="ignore"):
    table, churned = make_customer_table(N_CUSTOMERS)
    feature_names, X = synthesize_features(table)
print(f"{len(feature_names)} features: {', '.join(feature_names)}")

n_train = int(0.8 * N_CUSTOMERS)
mean = X[:n_train].mean(axis=0)
std = X[:n_train].std(axis=0)
X = (X - mean) / std

train_loader = DataLoader(CustomerDataset(X[:n_train], churned[:n_train]), batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(CustomerDataset(X[n_train:], churned[n_train:]), batch_size=256)

model = ChurnMLP(X.shape[1])
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=LR)

start = time.time()
step = 0
for epoch in range(1, EPOCHS + 1):
    model.train()
    for xb, yb in train_loader:
        logits = model(xb)
        loss = criterion(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step == 1 or step % 25 == 0:
            print(f"epoch {epoch} step {step:4d} | train loss {loss.item():.4f}")

    model.eval()
    correct, total, val_loss = 0, 0, 0.0
    with torch.no_grad():
        for xb, yb in val_loader:
            logits = model(xb)
            val_loss += criterion(logits, yb).item() * len(yb)
            correct += ((logits > 0).float() == yb).sum().item()
            total += len(yb)
    print(f"epoch {epoch} | val loss {val_loss / total:.4f} | val acc {correct / total:.3f}")

print(f"done in {time.time() - start:.1f}s")
