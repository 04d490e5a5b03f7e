"""Biased matrix factorisation (SVD-style) of play counts: user x track counts, heavily right
skewed (most users play a track once, a few play it hundreds of times), trained with SGD."""
import torch
import torch.nn as nn
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)
n_users, n_items, n_factors = 600, 400, 50


def make_play_counts(n=60000):
    g = torch.Generator().manual_seed(1)
    u = torch.randint(0, n_users, (n,), generator=g)
    i = torch.randint(0, n_items, (n,), generator=g)
    pu = torch.randn(n_users, 4, generator=g) * 1.0
    qi = torch.randn(n_items, 4, generator=g) * 1.0
    activity = 1.2 * torch.randn(n_users, generator=g)
    popularity = 0.8 * torch.randn(n_items, generator=g)
    log_rate = activity[u] + popularity[i] + 0.5 * (pu[u] * qi[i]).sum(1) + 0.5 * torch.randn(n, generator=g) - 1.0
    plays = 1 + torch.poisson(torch.exp(log_rate) * 2.0, generator=g)
    return u, i, plays.clamp(max=660)


class SVD(nn.Module):
    def __init__(self, global_mean):
        super().__init__()
        self.bu = nn.Embedding(n_users, 1)
        self.bi = nn.Embedding(n_items, 1)
        self.pu = nn.Embedding(n_users, n_factors)
        self.qi = nn.Embedding(n_items, n_factors)
        for e in (self.bu, self.bi):
            nn.init.zeros_(e.weight)
        for e in (self.pu, self.qi):
            nn.init.normal_(e.weight, 0.0, 0.1)
        self.mu = global_mean

    def forward(self, u, i):
        return self.mu + self.bu(u).squeeze(-1) + self.bi(i).squeeze(-1) + (self.pu(u) * self.qi(i)).sum(-1)


u, i, r = make_play_counts()
q = torch.quantile(r, torch.tensor([0.25, 0.5, 0.75, 0.95]))
print(f"plays: quartiles {q[0]:.0f} {q[1]:.0f} {q[2]:.0f}, 95th pct {q[3]:.0f}, max {r.max():.0f}")
train = TensorDataset(u[:50000], i[:50000], r[:50000])
val = TensorDataset(u[50000:], i[50000:], r[50000:])
loader = DataLoader(train, batch_size=128, shuffle=True)

model = SVD(r[:50000].mean().item())
lr_all, reg_all = 0.005, 0.02
optimizer = torch.optim.SGD(model.parameters(), lr=lr_all, weight_decay=reg_all)
criterion = nn.MSELoss(reduction="sum")

for epoch in range(3):
    for step, (ub, ib, rb) in enumerate(loader):
        loss = criterion(model(ub, ib), rb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"epoch {epoch} step {step} mse {loss.item() / len(rb):.3f}")
    with torch.no_grad():
        uv, iv, rv = val[:]
        rmse = torch.sqrt(((model(uv, iv) - rv) ** 2).mean()).item()
    print(f"epoch {epoch} val_rmse {rmse:.3f} (predicting the mean: {rv.std().item():.3f})")
