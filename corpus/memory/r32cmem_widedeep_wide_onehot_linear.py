"""Wide & Deep click-through model on tabular data.

Categorical columns and their pairwise crosses are label-encoded into one wide vocabulary;
the wide part is a linear model over the one-hot encoded wide features, the deep part an
MLP over embeddings of the base columns. The two logits are summed.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

CARDINALITIES = [400, 300, 200, 150, 100, 50]
BATCH_SIZE = 256


def make_table(n, seed):
    g = torch.Generator().manual_seed(seed)
    cols = torch.stack([torch.randint(0, c, (n,), generator=g) for c in CARDINALITIES], 1)
    w = [torch.randn(c, generator=g) for c in CARDINALITIES]
    score = sum(w[j][cols[:, j]] for j in range(3, len(CARDINALITIES)))
    y = (score + 0.3 * torch.randn(n, generator=g) > 0).float()
    return cols, y


def wide_features(cols):
    """Base columns and all pairwise crosses, offset into one vocabulary."""
    feats, offset = [], 0
    for j, c in enumerate(CARDINALITIES):
        feats.append(cols[:, j] + offset)
        offset += c
    for a in range(len(CARDINALITIES)):
        for b in range(a + 1, len(CARDINALITIES)):
            feats.append(cols[:, a] * CARDINALITIES[b] + cols[:, b] + offset)
            offset += CARDINALITIES[a] * CARDINALITIES[b]
    return torch.stack(feats, 1), offset


class Wide(nn.Module):
    def __init__(self, wide_dim, pred_dim=1):
        super().__init__()
        self.wide_dim = wide_dim
        self.wide_linear = nn.Linear(wide_dim, pred_dim)

    def forward(self, X):
        X_oh = F.one_hot(X, self.wide_dim).sum(1).float()
        return self.wide_linear(X_oh)


class Deep(nn.Module):
    def __init__(self, emb_dim=16):
        super().__init__()
        self.embs = nn.ModuleList([nn.Embedding(c, emb_dim) for c in CARDINALITIES])
        self.mlp = nn.Sequential(nn.Linear(emb_dim * len(CARDINALITIES), 64), nn.ReLU(),
                                 nn.Linear(64, 1))

    def forward(self, cols):
        return self.mlp(torch.cat([emb(cols[:, j]) for j, emb in enumerate(self.embs)], 1))


class WideDeep(nn.Module):
    def __init__(self, wide_dim):
        super().__init__()
        self.wide = Wide(wide_dim)
        self.deep = Deep()

    def forward(self, X_wide, cols):
        return (self.wide(X_wide) + self.deep(cols)).squeeze(1)


cols, y = make_table(4096, 1)
X_wide, wide_dim = wide_features(cols)
print(f"wide_dim {wide_dim}")
train_loader = DataLoader(TensorDataset(X_wide, cols, y), batch_size=BATCH_SIZE, shuffle=True)
val_cols, val_y = make_table(1024, 2)
val_wide, _ = wide_features(val_cols)

model = WideDeep(wide_dim)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(6):
    model.train()
    total = 0.0
    for step, (xw, xc, target) in enumerate(train_loader):
        logits = model(xw, xc)
        loss = F.binary_cross_entropy_with_logits(logits, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 4 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
    model.eval()
    with torch.no_grad():
        acc = ((model(val_wide, val_cols) > 0).float() == val_y).float().mean().item()
    print(f"epoch {epoch} train loss {total / len(train_loader):.4f} val acc {acc:.3f}", flush=True)
