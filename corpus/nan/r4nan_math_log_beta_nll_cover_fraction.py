"""Beta regression of canopy cover fraction (0..1) per field from 12 satellite band statistics.

The network predicts the two shape parameters of a Beta distribution and is trained with its
negative log-likelihood, so it gives an uncertainty along with the predicted cover.
Synthetic field table: cover follows a logistic function of the bands and is stored with
three decimals, as in the survey CSV.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)


def load_fields(n=6000, n_bands=12):
    bands = rng.normal(0, 1, (n, n_bands))
    w = rng.normal(0, 0.5, n_bands)
    logit = bands @ w + 0.3 * rng.normal(0, 1, n)
    cover = 1 / (1 + np.exp(-logit))
    cover = np.round(cover, 3)
    return bands.astype(np.float32), cover.astype(np.float32)


class BetaRegressor(nn.Module):
    def __init__(self, n_in, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.shape = nn.Linear(hidden, 2)

    def forward(self, x):
        params = F.softplus(self.shape(self.body(x))) + 1e-3
        return params[:, 0], params[:, 1]


def beta_nll(alpha, beta, y):
    log_norm = torch.lgamma(alpha + beta) - torch.lgamma(alpha) - torch.lgamma(beta)
    log_lik = log_norm + (alpha - 1) * torch.log(y) + (beta - 1) * torch.log(1 - y)
    return -log_lik.mean()


X, y = load_fields()
n_train = 5000
X_train, y_train = torch.from_numpy(X[:n_train]), torch.from_numpy(y[:n_train])
X_val, y_val = torch.from_numpy(X[n_train:]), torch.from_numpy(y[n_train:])

model = BetaRegressor(X.shape[1])
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
batch_size = 50


def get_batch(i, perm):
    idx = perm[i:i + batch_size]
    return X_train[idx], y_train[idx]


for epoch in range(3):
    model.train()
    perm = torch.randperm(n_train)
    for step, i in enumerate(range(0, n_train, batch_size)):
        xb, yb = get_batch(i, perm)
        alpha, beta = model(xb)
        loss = beta_nll(alpha, beta, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            mean_cover = alpha / (alpha + beta)
            mae = (mean_cover - yb).abs().mean()
            print(f"epoch {epoch} step {step:3d}  nll {loss.item():.4f}  mae {mae.item():.4f}")
    model.eval()
    with torch.no_grad():
        a, b = model(X_val)
        print(f"epoch {epoch} val mae {((a / (a + b)) - y_val).abs().mean().item():.4f}")
