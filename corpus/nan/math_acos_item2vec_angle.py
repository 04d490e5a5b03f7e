"""item2vec-style embeddings from browsing sessions, trained on the angle between vectors.

Items that follow each other in a session should point in the same direction (small angle),
randomly drawn items should be at least MARGIN radians apart.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

np.random.seed(3)
torch.manual_seed(3)

N_ITEMS = 400
N_CATEGORIES = 4
MARGIN = 1.2


def make_sessions(n_sessions=600, length=8):
    category = np.arange(N_ITEMS) % N_CATEGORIES
    sessions = []
    for _ in range(n_sessions):
        c = np.random.randint(N_CATEGORIES)
        pool = np.where(category == c)[0]
        sessions.append(np.random.choice(pool, size=length, replace=True))
    return np.stack(sessions), category


def session_pairs(sessions):
    centers = sessions[:, :-1].reshape(-1)
    contexts = sessions[:, 1:].reshape(-1)
    return torch.from_numpy(centers), torch.from_numpy(contexts)


class ItemTower(nn.Module):
    def __init__(self, n_items, dim=32):
        super().__init__()
        self.emb = nn.Embedding(n_items, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, dim))

    def forward(self, items):
        return self.mlp(self.emb(items))


def unit_vector(v):
    return v / v.norm(dim=-1, keepdim=True)


def angle_between(vector0, vector1):
    unit_vector0 = unit_vector(vector0)
    unit_vector1 = unit_vector(vector1)
    return (unit_vector0 * unit_vector1).sum(dim=-1).clamp(-1.0, 1.0).acos()


sessions, category = make_sessions()
centers, contexts = session_pairs(sessions)
loader = DataLoader(TensorDataset(centers, contexts), batch_size=64, shuffle=True)

model = ItemTower(N_ITEMS)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(3):
    for i, (c, ctx) in enumerate(loader):
        neg = torch.randint(0, N_ITEMS, c.shape)
        v_c, v_ctx, v_neg = model(c), model(ctx), model(neg)
        pos_angle = angle_between(v_c, v_ctx)
        neg_angle = angle_between(v_c, v_neg)
        loss = pos_angle.mean() + torch.relu(MARGIN - neg_angle).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 10 == 0:
            print(f"epoch {epoch} it {i:3d}  loss {loss.item():.4f}  "
                  f"pos angle {pos_angle.mean().item():.3f}  neg angle {neg_angle.mean().item():.3f}")

    with torch.no_grad():
        v = unit_vector(model(torch.arange(N_ITEMS)))
        same = torch.from_numpy(category[:, None] == category[None, :])
        sim = v @ v.T
        print(f"== epoch {epoch}  mean cos same-category {sim[same].mean().item():.3f}  "
              f"other-category {sim[~same].mean().item():.3f}")
