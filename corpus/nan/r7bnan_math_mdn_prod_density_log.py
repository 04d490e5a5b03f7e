"""Mixture density network for multimodal trajectory forecasting.

From an agent's current state (position, velocity, speed) predict its next four (x, y)
waypoints, an 8-dimensional target. The agent may turn left, go straight or turn right, so the
future is multimodal: the network outputs a mixture of diagonal Gaussians, with the MDN layer
and loss written after the pytorch-mdn package (pi through a softmax, sigma through exp,
per-dimension Gaussian densities multiplied over the output dimensions, negative log of the
mixture likelihood).

Synthetic data: constant-turn-rate motion with GPS-like, heavy-tailed position noise.
"""
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

ONEOVERSQRT2PI = 1.0 / math.sqrt(2 * math.pi)


def make_trajectories(n, horizon=4, dt=0.5):
    pos = np.random.uniform(-1, 1, size=(n, 2))
    speed = np.random.uniform(0.5, 1.5, size=n)
    heading = np.random.uniform(-np.pi, np.pi, size=n)
    turn_rate = np.random.choice([0.6, 0.0, -0.6], size=n, p=[0.3, 0.4, 0.3])
    vel = np.stack([speed * np.cos(heading), speed * np.sin(heading)], axis=1)
    state = np.concatenate([pos, vel, speed[:, None]], axis=1)
    waypoints = []
    p, h = pos.copy(), heading.copy()
    for _ in range(horizon):
        h = h + turn_rate * dt
        p = p + dt * np.stack([speed * np.cos(h), speed * np.sin(h)], axis=1)
        waypoints.append(p - pos)
    target = np.concatenate(waypoints, axis=1)
    target = target + 0.03 * np.random.standard_t(df=2, size=target.shape)
    return torch.tensor(state, dtype=torch.float32), torch.tensor(target, dtype=torch.float32)


class MDN(nn.Module):
    """Maps features to the parameters of a mixture of diagonal Gaussians."""

    def __init__(self, in_features, out_features, num_gaussians):
        super().__init__()
        self.out_features = out_features
        self.num_gaussians = num_gaussians
        self.pi = nn.Sequential(nn.Linear(in_features, num_gaussians), nn.Softmax(dim=1))
        self.sigma = nn.Linear(in_features, out_features * num_gaussians)
        self.mu = nn.Linear(in_features, out_features * num_gaussians)

    def forward(self, features):
        pi = self.pi(features)
        sigma = torch.exp(self.sigma(features)).view(-1, self.num_gaussians, self.out_features)
        mu = self.mu(features).view(-1, self.num_gaussians, self.out_features)
        return pi, sigma, mu


def gaussian_probability(sigma, mu, target):
    target = target.unsqueeze(1).expand_as(sigma)
    density = ONEOVERSQRT2PI * torch.exp(-0.5 * ((target - mu) / sigma) ** 2) / sigma
    return torch.prod(density, 2)


def mdn_loss(pi, sigma, mu, target):
    prob = pi * gaussian_probability(sigma, mu, target)
    nll = -torch.log(torch.sum(prob, dim=1))
    return torch.mean(nll)


class TrajectoryMDN(nn.Module):
    def __init__(self, n_in=5, n_out=8, n_hidden=64, n_gaussians=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(), nn.Linear(n_hidden, n_hidden), nn.Tanh())
        self.mdn = MDN(n_hidden, n_out, n_gaussians)

    def forward(self, x):
        return self.mdn(self.body(x))


def main():
    x_train, y_train = make_trajectories(4000)
    x_val, y_val = make_trajectories(500)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
    model = TrajectoryMDN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    step = 0
    for epoch in range(4):
        model.train()
        for xb, yb in loader:
            pi, sigma, mu = model(xb)
            loss = mdn_loss(pi, sigma, mu, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d} nll {loss.item():9.4f} mean sigma {sigma.mean().item():.4f}")
        model.eval()
        with torch.no_grad():
            pi, sigma, mu = model(x_val)
            val_nll = mdn_loss(pi, sigma, mu, y_val).item()
        print(f"== epoch {epoch} validation nll {val_nll:.4f}")


if __name__ == "__main__":
    main()
