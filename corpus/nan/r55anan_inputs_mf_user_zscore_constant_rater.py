"""Biased matrix factorisation on user-normalised ratings (z-score per user, as in
mean-variance normalisation), trained with MSE and reported as RMSE in stars."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
rng = np.random.default_rng(0)

N_USERS, N_ITEMS, K = 300, 400, 8

U = rng.normal(0, 1, (N_USERS, K))
V = rng.normal(0, 1, (N_ITEMS, K))
rows = []
for u in range(N_USERS):
    n = rng.integers(15, 60)
    items = rng.choice(N_ITEMS, n, replace=False)
    if u % 25 == 0:
        r = np.full(n, 5.0)
    else:
        score = U[u] @ V[items].T / np.sqrt(K) + rng.normal(0, 0.3, n)
        r = np.clip(np.round(3 + 1.2 * score), 1, 5)
    for i, x in zip(items, r):
        rows.append((u, i, x))
ratings = np.array(rows)
rng.shuffle(ratings)
split = int(0.9 * len(ratings))
train, val = ratings[:split], ratings[split:]

user_mean = np.zeros(N_USERS)
user_std = np.ones(N_USERS)
for u in range(N_USERS):
    r = train[train[:, 0] == u, 2]
    user_mean[u] = r.mean()
    user_std[u] = r.std()


class RatingDataset(Dataset):
    def __init__(self, data):
        self.users = torch.tensor(data[:, 0], dtype=torch.long)
        self.items = torch.tensor(data[:, 1], dtype=torch.long)
        z = (data[:, 2] - user_mean[data[:, 0].astype(int)]) / user_std[data[:, 0].astype(int)]
        self.targets = torch.tensor(z, dtype=torch.float32)
        self.raw = torch.tensor(data[:, 2], dtype=torch.float32)

    def __len__(self):
        return len(self.users)

    def __getitem__(self, i):
        return self.users[i], self.items[i], self.targets[i], self.raw[i]


class MF(nn.Module):
    def __init__(self, n_users, n_items, dim=16):
        super().__init__()
        self.user_emb = nn.Embedding(n_users, dim)
        self.item_emb = nn.Embedding(n_items, dim)
        self.item_bias = nn.Embedding(n_items, 1)
        nn.init.normal_(self.user_emb.weight, std=0.1)
        nn.init.normal_(self.item_emb.weight, std=0.1)
        nn.init.zeros_(self.item_bias.weight)

    def forward(self, u, i):
        return (self.user_emb(u) * self.item_emb(i)).sum(-1) + self.item_bias(i).squeeze(-1)


train_loader = DataLoader(RatingDataset(train), batch_size=256, shuffle=True)
val_loader = DataLoader(RatingDataset(val), batch_size=1024)
mean_t = torch.tensor(user_mean, dtype=torch.float32)
std_t = torch.tensor(user_std, dtype=torch.float32)

model = MF(N_USERS, N_ITEMS)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-4)
criterion = nn.MSELoss()

step = 0
for epoch in range(1, 6):
    model.train()
    total, n = 0.0, 0
    for u, i, z, raw in train_loader:
        pred = model(u, i)
        loss = criterion(pred, z)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        total += loss.item() * len(u); n += len(u)
        if step % 25 == 0 or step == 1:
            print(f"step {step:4d} loss {loss.item():.4f}")
    model.eval()
    se, cnt = 0.0, 0
    with torch.no_grad():
        for u, i, z, raw in val_loader:
            stars = model(u, i) * std_t[u] + mean_t[u]
            se += ((stars.clamp(1, 5) - raw) ** 2).sum().item(); cnt += len(u)
    print(f"epoch {epoch} train_loss {total / n:.4f} val_rmse {np.sqrt(se / cnt):.4f} (steps {step})")
