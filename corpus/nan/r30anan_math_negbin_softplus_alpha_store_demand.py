"""Probabilistic demand forecast with a feed-forward network and a negative-binomial output.

Written after gluonts' SimpleFeedForwardEstimator with NegativeBinomialOutput: an MLP reads the
last CONTEXT weeks of an item's sales and emits (mu, alpha) of a negative binomial for the next
PRED weeks; training minimises the negative log-likelihood of the observed counts.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_ITEMS = 96
N_WEEKS = 160
CONTEXT = 24
PRED = 4
BATCH_SIZE = 64
EPOCHS = 3
LR = 1e-3


def make_sales():
    t = np.arange(N_WEEKS)
    level = np.random.uniform(200, 2000, size=(N_ITEMS, 1))
    season = 1.0 + 0.3 * np.sin(2 * np.pi * (t[None, :] + np.random.randint(0, 52, (N_ITEMS, 1))) / 52)
    trend = 1.0 + np.random.uniform(-0.002, 0.004, size=(N_ITEMS, 1)) * t[None, :]
    return np.random.poisson(level * season * trend).astype(np.float32)


class WindowDataset(Dataset):
    def __init__(self, series, start, end):
        self.series = torch.from_numpy(series)
        self.index = [(i, s) for i in range(series.shape[0]) for s in range(start, end - CONTEXT - PRED + 1)]

    def __len__(self):
        return len(self.index)

    def __getitem__(self, k):
        i, s = self.index[k]
        past = self.series[i, s:s + CONTEXT]
        future = self.series[i, s + CONTEXT:s + CONTEXT + PRED]
        return past, future


class NegativeBinomialOutput(nn.Module):
    def __init__(self, in_features):
        super().__init__()
        self.proj_mu = nn.Linear(in_features, 1)
        self.proj_alpha = nn.Linear(in_features, 1)

    def forward(self, h):
        mu = F.softplus(self.proj_mu(h)).squeeze(-1)
        alpha = F.softplus(self.proj_alpha(h)).squeeze(-1)
        return mu, alpha


def negative_binomial_nll(x, mu, alpha):
    alpha_inv = 1.0 / alpha
    alpha_times_mu = alpha * mu
    ll = (x * torch.log(alpha_times_mu / (1.0 + alpha_times_mu))
          - alpha_inv * torch.log1p(alpha_times_mu)
          + torch.lgamma(x + alpha_inv)
          - torch.lgamma(x + 1.0)
          - torch.lgamma(alpha_inv))
    return -ll.mean()


class SimpleFeedForward(nn.Module):
    def __init__(self, hidden=(64, 64)):
        super().__init__()
        layers, d = [], CONTEXT
        for hdim in hidden:
            layers += [nn.Linear(d, hdim), nn.ReLU()]
            d = hdim
        layers.append(nn.Linear(d, PRED * 16))
        self.mlp = nn.Sequential(*layers)
        self.distr_output = NegativeBinomialOutput(16)

    def forward(self, past_target):
        h = self.mlp(past_target).view(-1, PRED, 16)
        return self.distr_output(h)


sales = make_sales()
train_ds = WindowDataset(sales, 0, N_WEEKS - 20)
val_ds = WindowDataset(sales, N_WEEKS - 20 - CONTEXT, N_WEEKS)
train_loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=256)

net = SimpleFeedForward()
optimizer = torch.optim.Adam(net.parameters(), lr=LR)

step = 0
for epoch in range(EPOCHS):
    net.train()
    losses = []
    for past, future in train_loader:
        mu, alpha = net(past)
        loss = negative_binomial_nll(future, mu, alpha)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        step += 1
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} nll {loss.item():.4f} mean alpha {alpha.mean().item():.3e}")
        if step >= 60 * (epoch + 1):
            break
    net.eval()
    with torch.no_grad():
        nll, mae, n = 0.0, 0.0, 0
        for past, future in val_loader:
            mu, alpha = net(past)
            nll += negative_binomial_nll(future, mu, alpha).item() * len(past)
            mae += (mu - future).abs().mean().item() * len(past)
            n += len(past)
    print(f"epoch {epoch}: train nll {np.mean(losses):.4f}  val nll {nll / n:.4f}  val MAE {mae / n:.2f}")
