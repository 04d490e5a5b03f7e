"""System identification of a damped pendulum with a neural ODE.

A small MLP models the vector field dx/dt = f(x); it is integrated with RK4 over a 16-step
horizon from the measured initial state and fitted to the measured trajectories (multiple
shooting over short windows). A reusable Trainer class runs the epochs, keeps the best model
on the dev set and records the loss history.
"""
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(3)
np.random.seed(3)

DT = 0.1
NSTEPS = 16


def pendulum(x, g=9.81, length=1.0, damping=0.3):
    theta, omega = x[..., 0], x[..., 1]
    return np.stack([omega, -g / length * np.sin(theta) - damping * omega], axis=-1)


def simulate(x0, nsteps, dt=DT):
    xs = [x0]
    x = x0
    for _ in range(nsteps):
        k1 = pendulum(x)
        k2 = pendulum(x + dt / 2 * k1)
        k3 = pendulum(x + dt / 2 * k2)
        k4 = pendulum(x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        xs.append(x)
    return np.stack(xs, axis=1)


class TrajectoryWindows(Dataset):
    def __init__(self, n):
        x0 = np.stack([np.random.uniform(-2.5, 2.5, n), np.random.uniform(-3, 3, n)], axis=1)
        traj = simulate(x0, NSTEPS) + 0.01 * np.random.randn(n, NSTEPS + 1, 2)
        self.traj = torch.tensor(traj, dtype=torch.float32)

    def __len__(self):
        return len(self.traj)

    def __getitem__(self, i):
        return {"xn": self.traj[i, 0], "X": self.traj[i, 1:]}


class VectorField(nn.Module):
    def __init__(self, nx=2, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(nx, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, nx))

    def forward(self, x):
        return self.net(x)


class RK4(nn.Module):
    def __init__(self, block, h=DT):
        super().__init__()
        self.block = block
        self.h = h

    def forward(self, x):
        k1 = self.block(x)
        k2 = self.block(x + self.h * k1 / 2)
        k3 = self.block(x + self.h * k2 / 2)
        k4 = self.block(x + self.h * k3)
        return x + self.h * (k1 + 2 * k2 + 2 * k3 + k4) / 6


class SystemID(nn.Module):
    def __init__(self, integrator, nsteps=NSTEPS):
        super().__init__()
        self.integrator = integrator
        self.nsteps = nsteps

    def forward(self, batch, prefix="train"):
        x = batch["xn"]
        xs = []
        for _ in range(self.nsteps):
            x = self.integrator(x)
            xs.append(x)
        xhat = torch.stack(xs, dim=1)
        reference = torch.mean((xhat - batch["X"]) ** 2)
        finite_diff = torch.mean(((xhat[:, 1:] - xhat[:, :-1]) - (batch["X"][:, 1:] - batch["X"][:, :-1])) ** 2)
        loss = reference + 0.1 * finite_diff
        return {f"{prefix}_loss": loss, "xhat": xhat}


class Trainer:
    def __init__(self, model, train_data, dev_data, optimizer, epochs=15, patience=5,
                 train_metric="train_loss", dev_metric="dev_loss", clip=10.0):
        self.model = model
        self.train_data = train_data
        self.dev_data = dev_data
        self.optimizer = optimizer
        self.epochs = epochs
        self.patience = patience
        self.train_metric = train_metric
        self.dev_metric = dev_metric
        self.clip = clip
        self.best_devloss = np.finfo(np.float32).max
        self.best_model = deepcopy(self.model.state_dict())
        self.badcount = 0
        self.loss_history = {"train": [], "dev": []}

    def train(self):
        for i in range(self.epochs):
            self.model.train()
            losses = []
            for t_batch in self.train_data:
                output = self.model(t_batch, prefix="train")
                self.optimizer.zero_grad()
                output[self.train_metric].backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
                self.optimizer.step()
                losses.append(output[self.train_metric])
            mean_loss = torch.mean(torch.stack(losses))
            self.loss_history["train"].append(mean_loss)

            self.model.eval()
            with torch.no_grad():
                dev_losses = [self.model(d_batch, prefix="dev")[self.dev_metric] for d_batch in self.dev_data]
                mean_dev_loss = torch.mean(torch.stack(dev_losses))
            self.loss_history["dev"].append(mean_dev_loss)

            if mean_dev_loss < self.best_devloss:
                self.best_model = deepcopy(self.model.state_dict())
                self.best_devloss = mean_dev_loss
                self.badcount = 0
            else:
                self.badcount += 1
            print(f"epoch: {i}  {self.train_metric}: {mean_loss}  {self.dev_metric}: {mean_dev_loss:.5f}")
            if self.badcount > self.patience:
                print("Early stopping!!!")
                break
        return self.best_model


if __name__ == "__main__":
    train_loader = DataLoader(TrajectoryWindows(320), batch_size=32, shuffle=True)
    dev_loader = DataLoader(TrajectoryWindows(64), batch_size=64)
    model = SystemID(RK4(VectorField()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    trainer = Trainer(model, train_loader, dev_loader, optimizer, epochs=10)
    best = trainer.train()
    model.load_state_dict(best)
    print(f"best dev loss: {trainer.best_devloss:.5f}")
