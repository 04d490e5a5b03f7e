"""WTTE-RNN churn model: a GRU reads each customer's daily activity and predicts, at every day,
the Weibull (alpha, beta) of the discrete time until the customer's next purchase.
Right-censored at the end of the observation window."""
import math
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

N_USERS = 640
N_DAYS = 60
HIDDEN = 32
BATCH = 32
EPOCHS = 10
LR = 1e-2
MAX_BETA = 2.5


def make_customers(n, days):
    rng = np.random.default_rng(0)
    acts = np.zeros((n, days), dtype=np.float32)
    subscribed = np.ones((n, days), dtype=np.float32)
    for i in range(n):
        p = rng.uniform(0.05, 0.5)
        churn_day = rng.integers(5, 25) if rng.random() < 0.6 else days
        acts[i, :churn_day] = rng.random(churn_day) < p
        subscribed[i, churn_day:] = 0.0
    tte = np.zeros((n, days), dtype=np.float32)
    uncensored = np.zeros((n, days), dtype=np.float32)
    for i in range(n):
        nxt = None
        for t in range(days - 1, -1, -1):
            if nxt is None:
                tte[i, t] = days - 1 - t
                uncensored[i, t] = 0.0
            else:
                tte[i, t] = nxt - t
                uncensored[i, t] = 1.0
            if acts[i, t] > 0:
                nxt = t
    since = np.zeros((n, days), dtype=np.float32)
    for i in range(n):
        last = -1
        for t in range(days):
            if acts[i, t] > 0:
                last = t
            since[i, t] = t - last
    feats = np.stack([acts, subscribed, np.log1p(since), np.arange(days)[None].repeat(n, 0) / days], -1)
    return feats.astype(np.float32), tte, uncensored


class ActivityDataset(Dataset):
    def __init__(self, x, y, u):
        self.x = torch.from_numpy(x)
        self.y = torch.from_numpy(y)
        self.u = torch.from_numpy(u)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i], self.u[i]


class WeibullGRU(nn.Module):
    def __init__(self, n_feat, hidden, init_alpha):
        super().__init__()
        self.gru = nn.GRU(n_feat, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 2)
        self.init_alpha = init_alpha

    def forward(self, x):
        h, _ = self.gru(x)
        out = self.head(h)
        a = self.init_alpha * torch.exp(out[..., 0])
        b = MAX_BETA * torch.sigmoid(out[..., 1])
        return a, b


def loglik_discrete(y, u, a, b, epsilon=1e-35):
    hazard0 = torch.pow((y + epsilon) / a, b)
    hazard1 = torch.pow((y + 1.0) / a, b)
    return u * torch.log(torch.exp(hazard1 - hazard0) - 1.0) - hazard1


x, y, u = make_customers(N_USERS, N_DAYS)
n_train = 512
train_ds = ActivityDataset(x[:n_train], y[:n_train], u[:n_train])
val_ds = ActivityDataset(x[n_train:], y[n_train:], u[n_train:])
train_dl = DataLoader(train_ds, batch_size=BATCH, shuffle=True)
val_dl = DataLoader(val_ds, batch_size=128)

tte_mean = float(y[:n_train].mean())
init_alpha = -1.0 / math.log(1.0 - 1.0 / (tte_mean + 1.0))
init_alpha = init_alpha / float(u[:n_train].mean())
print(f"mean tte {tte_mean:.2f}  censored {1 - u[:n_train].mean():.2%}  init_alpha {init_alpha:.2f}")

model = WeibullGRU(x.shape[-1], HIDDEN, init_alpha)
opt = torch.optim.Adam(model.parameters(), lr=LR)

step = 0
for epoch in range(EPOCHS):
    model.train()
    total, nb = 0.0, 0
    for xb, yb, ub in train_dl:
        a, b = model(xb)
        loss = -loglik_discrete(yb, ub, a, b).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        total += loss.item()
        nb += 1
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f} alpha max {a.max().item():.3g} beta min {b.min().item():.3g}")
    model.eval()
    with torch.no_grad():
        vl, vn = 0.0, 0
        for xb, yb, ub in val_dl:
            a, b = model(xb)
            vl += -loglik_discrete(yb, ub, a, b).mean().item() * len(xb)
            vn += len(xb)
    print(f"epoch {epoch + 1}: train loss {total / nb:.4f}  val loss {vl / vn:.4f}  median alpha {a.median().item():.2f}")
