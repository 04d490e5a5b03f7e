"""Physics-informed neural network for the 1D heat equation u_t = k u_xx on x in [-1, 1],
t in [0, 1], with u(x, 0) = sin(pi x) and u(-1, t) = u(1, t) = 0, written in the style of
NeuralSolvers' PINNFramework: every part of the loss is a LossTerm (initial condition,
boundary condition, PDE residual) that owns its dataset and a norm, and the PINN sums them.
The exact solution exp(-k pi^2 t) sin(pi x) is used only to report the error.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset

torch.manual_seed(0)
np.random.seed(0)
KAPPA = 0.1


class InitialConditionDataset(Dataset):
    """Points (x, 0) on the initial line and the initial state u0(x)."""

    def __init__(self, n0):
        x = np.random.uniform(-1, 1, n0)
        self.x = torch.tensor(np.stack([x, np.zeros(n0)], axis=1), dtype=torch.float32)
        self.u = torch.tensor(np.sin(math.pi * x), dtype=torch.float32)

    def __len__(self):
        return 1

    def __getitem__(self, idx):
        return self.x, self.u


class BoundaryConditionDataset(Dataset):
    def __init__(self, nb):
        t = np.random.uniform(0, 1, nb)
        x = np.where(np.arange(nb) % 2 == 0, -1.0, 1.0)
        self.x = torch.tensor(np.stack([x, t], axis=1), dtype=torch.float32)

    def __len__(self):
        return 1

    def __getitem__(self, idx):
        return self.x


class PDEDataset(Dataset):
    def __init__(self, nf):
        self.x = torch.tensor(np.stack([np.random.uniform(-1, 1, nf), np.random.uniform(0, 1, nf)], axis=1),
                              dtype=torch.float32)

    def __len__(self):
        return 1

    def __getitem__(self, idx):
        return self.x


class LossTerm:
    def __init__(self, dataset, name, norm='L2', weight=1.):
        self.dataset = dataset
        self.name = name
        self.weight = weight
        self.norm = nn.MSELoss() if norm == 'L2' else nn.L1Loss()


class InitialCondition(LossTerm):
    def __call__(self, x, model, gt_y):
        """L_0 = norm(model(x), gt_y)"""
        prediction = model(x)
        return self.weight * self.norm(prediction, gt_y)


class DirichletBC(LossTerm):
    def __call__(self, x, model):
        prediction = model(x)
        return self.weight * self.norm(prediction, torch.zeros_like(prediction))


class PDELoss(LossTerm):
    def __init__(self, dataset, pde, name, norm='L2', weight=1.):
        super().__init__(dataset, name, norm, weight)
        self.pde = pde

    def __call__(self, x, model):
        x = x.clone().requires_grad_(True)
        u = model(x)
        residual = self.pde(x, u)
        return self.weight * self.norm(residual, torch.zeros_like(residual))


def heat_equation(x, u):
    grads = torch.autograd.grad(u, x, torch.ones_like(u), create_graph=True)[0]
    u_x, u_t = grads[:, 0:1], grads[:, 1:2]
    u_xx = torch.autograd.grad(u_x, x, torch.ones_like(u_x), create_graph=True)[0][:, 0:1]
    return u_t - KAPPA * u_xx


class MLP(nn.Module):
    def __init__(self, input_size=2, output_size=1, hidden_size=32, num_hidden=3):
        super().__init__()
        layers = [nn.Linear(input_size, hidden_size), nn.Tanh()]
        for _ in range(num_hidden - 1):
            layers += [nn.Linear(hidden_size, hidden_size), nn.Tanh()]
        layers.append(nn.Linear(hidden_size, output_size))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class PINN:
    def __init__(self, model, initial_condition, boundary_condition, pde_loss):
        self.model = model
        self.initial_condition = initial_condition
        self.boundary_condition = boundary_condition
        self.pde_loss = pde_loss

    def relative_error(self, n=101):
        x, t = torch.meshgrid(torch.linspace(-1, 1, n), torch.linspace(0, 1, n), indexing="ij")
        pts = torch.stack([x.flatten(), t.flatten()], dim=1)
        exact = torch.exp(-KAPPA * math.pi ** 2 * pts[:, 1:2]) * torch.sin(math.pi * pts[:, 0:1])
        with torch.no_grad():
            pred = self.model(pts)
        return (torch.norm(pred - exact) / torch.norm(exact)).item()

    def fit(self, epochs, lr=1e-3, log_every=50):
        optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        x0, u0 = self.initial_condition.dataset[0]
        xb = self.boundary_condition.dataset[0]
        xf = self.pde_loss.dataset[0]
        for epoch in range(epochs):
            optimizer.zero_grad()
            loss_ic = self.initial_condition(x0, self.model, u0)
            loss_bc = self.boundary_condition(xb, self.model)
            loss_pde = self.pde_loss(xf, self.model)
            loss = loss_ic + loss_bc + loss_pde
            loss.backward()
            optimizer.step()
            if epoch % log_every == 0 or epoch == epochs - 1:
                print(f"epoch {epoch:4d}  loss {loss.item():.5f}  initial {loss_ic.item():.5f}  "
                      f"boundary {loss_bc.item():.5f}  pde {loss_pde.item():.5f}  "
                      f"rel. L2 error {self.relative_error():.4f}")


def main():
    start = time.time()
    ic = InitialCondition(InitialConditionDataset(n0=200), name="Initial condition")
    bc = DirichletBC(BoundaryConditionDataset(nb=100), name="Dirichlet boundary")
    pde = PDELoss(PDEDataset(nf=2000), heat_equation, name="Heat equation")
    pinn = PINN(MLP(), ic, bc, pde)
    pinn.fit(epochs=300, lr=3e-3)
    print(f"finished in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
