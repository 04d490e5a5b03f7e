"""Omics tabular classifier: gene-expression profiles -> binary condition, MLP trained
on standardized log-expression with a held-out test split."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader

SEED = 42
torch.manual_seed(SEED)
rng = np.random.default_rng(SEED)

n_samples, n_genes = 2000, 100

# synthetic cohort: metadata sorted by condition, as exported from the LIMS
condition_binary = np.sort(rng.integers(0, 2, n_samples))
signature = rng.choice(n_genes, 20, replace=False)
log_expr = rng.normal(5.0, 1.0, size=(n_samples, n_genes))
log_expr[:, signature] += 0.9 * condition_binary[:, None] * rng.choice([-1, 1], 20)
sample_ids = np.array([f"S{i:04d}" for i in range(n_samples)])


def split_data(x, ids, test_size=0.2, seed=SEED):
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_size)
    test_idx, train_idx = order[:n_test], order[n_test:]
    return x[train_idx], x[test_idx], ids[train_idx], ids[test_idx]


x_train, x_test, ids_train, ids_test = split_data(log_expr, sample_ids)
y_train = condition_binary[: len(x_train)]
y_test = condition_binary[len(x_train):]

mu, sd = x_train.mean(0), x_train.std(0) + 1e-8
x_train = (x_train - mu) / sd
x_test = (x_test - mu) / sd

train_ds = TensorDataset(torch.tensor(x_train, dtype=torch.float32), torch.tensor(y_train, dtype=torch.long))
test_ds = TensorDataset(torch.tensor(x_test, dtype=torch.float32), torch.tensor(y_test, dtype=torch.long))
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
test_loader = DataLoader(test_ds, batch_size=64)

model = nn.Sequential(nn.Linear(n_genes, 64), nn.ReLU(), nn.Dropout(0.3),
                      nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)

for epoch in range(4):
    model.train()
    total, correct, running = 0, 0, 0.0
    for xb, yb in train_loader:
        optimizer.zero_grad()
        logits = model(xb)
        loss = criterion(logits, yb)
        loss.backward()
        optimizer.step()
        running += loss.item() * len(yb)
        correct += (logits.argmax(1) == yb).sum().item()
        total += len(yb)
    model.eval()
    t_correct, t_total = 0, 0
    with torch.no_grad():
        for xb, yb in test_loader:
            t_correct += (model(xb).argmax(1) == yb).sum().item()
            t_total += len(yb)
    print(f"epoch {epoch + 1:2d} train loss {running / total:.4f} train acc {correct / total:.3f} "
          f"test acc {t_correct / t_total:.3f}")
