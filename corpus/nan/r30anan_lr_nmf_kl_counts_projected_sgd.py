"""Non-negative matrix factorisation of user x song play counts with the KL-divergence loss.

A PyTorch port of the LIBMF solver setup (-f 2: generalized KL divergence, non-negative
factors): P (users x k) and Q (items x k) are learned with SGD on mini-batches of observed
(user, item, count) entries and projected back onto the non-negative orthant after every step.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

N_USERS = 800
N_ITEMS = 500
K = 16
N_OBS = 24000
BATCH_SIZE = 256
EPOCHS = 2
ETA = 0.3


def make_play_counts():
    p_true = torch.rand(N_USERS, 6) ** 2
    q_true = torch.rand(N_ITEMS, 6) ** 2 * 3.0
    users = torch.randint(0, N_USERS, (N_OBS,))
    items = torch.randint(0, N_ITEMS, (N_OBS,))
    rate = (p_true[users] * q_true[items]).sum(1)
    counts = torch.poisson(rate) + 1.0
    return users, items, counts


class NMF(nn.Module):
    def __init__(self, n_users, n_items, k):
        super().__init__()
        self.P = nn.Parameter(torch.rand(n_users, k) * (1.0 / k) ** 0.5)
        self.Q = nn.Parameter(torch.rand(n_items, k) * (1.0 / k) ** 0.5)

    def forward(self, u, i):
        return (self.P[u] * self.Q[i]).sum(1)


def kl_loss(z, r):
    return (r * torch.log(r / z) - r + z).sum()


users, items, counts = make_play_counts()
perm = torch.randperm(N_OBS)
n_val = 2000
val_idx, tr_idx = perm[:n_val], perm[n_val:]
train_ds = TensorDataset(users[tr_idx], items[tr_idx], counts[tr_idx])
loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)

model = NMF(N_USERS, N_ITEMS, K)
optimizer = torch.optim.SGD(model.parameters(), lr=ETA)

step = 0
for epoch in range(EPOCHS):
    running = 0.0
    for u, i, r in loader:
        z = model(u, i)
        loss = kl_loss(z, r)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.P.clamp_(min=0.0)
            model.Q.clamp_(min=0.0)
        step += 1
        running += loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} kl loss {loss.item() / len(r):.4f}")
    with torch.no_grad():
        z_val = model(users[val_idx], items[val_idx])
        val_kl = kl_loss(z_val, counts[val_idx]).item() / n_val
        rmse = torch.sqrt(((z_val - counts[val_idx]) ** 2).mean()).item()
    print(f"epoch {epoch}: train kl {running / len(train_ds):.4f}  val kl {val_kl:.4f}  val rmse {rmse:.4f}")
