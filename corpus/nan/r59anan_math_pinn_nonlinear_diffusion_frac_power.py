"""Physics-informed neural network for 1-D concentration-dependent diffusion
    c_t = d/dx( D(c) c_x ),   D(c) = D0 * c^1.2
on x in [0, 1], t in [0, 1], with c(0, t) = 1, c(1, t) = 0 and a sharp initial front. The linear
version (constant D) trained fine with the same code; a finite-difference solution is used to check."""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(1234)
np.random.seed(1234)

D0 = 0.1
M = 1.2


def initial_profile(x):
    return 0.5 * (1.0 - np.tanh((x - 0.2) / 0.04))


def finite_difference_reference(nx=101, t_end=1.0):
    x = np.linspace(0, 1, nx)
    dx = x[1] - x[0]
    c = initial_profile(x)
    dt = 0.2 * dx ** 2 / D0
    nt = int(np.ceil(t_end / dt))
    dt = t_end / nt
    snapshots = {0: c.copy()}
    for n in range(1, nt + 1):
        c[0], c[-1] = 1.0, 0.0
        d_face = D0 * (0.5 * (c[1:] + c[:-1])) ** M
        flux = d_face * (c[1:] - c[:-1]) / dx
        c[1:-1] += dt * (flux[1:] - flux[:-1]) / dx
        if n % (nt // 10) == 0:
            snapshots[n // (nt // 10)] = c.copy()
    return x, snapshots


def gradients(outputs, inputs):
    return torch.autograd.grad(outputs, inputs, grad_outputs=torch.ones_like(outputs), create_graph=True)


class FCN(nn.Module):
    def __init__(self, layers=(2, 32, 32, 32, 1)):
        super().__init__()
        mods = []
        for i in range(len(layers) - 2):
            mods += [nn.Linear(layers[i], layers[i + 1]), nn.Tanh()]
        mods.append(nn.Linear(layers[-2], layers[-1]))
        self.net = nn.Sequential(*mods)
        for m in self.net:
            if isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, g):
        return self.net(g)

    def loss_initial(self, x_ic, c_ic):
        return ((self.forward(x_ic) - c_ic) ** 2).mean()

    def loss_boundary(self, x_bc, c_bc):
        return ((self.forward(x_bc) - c_bc) ** 2).mean()

    def loss_internal(self, x_train):
        g = x_train.clone()
        g.requires_grad = True
        u = self.forward(g)
        u_g = gradients(u, g)[0]
        u_x, u_t = u_g[:, [0]], u_g[:, [1]]
        D = D0 * (self.forward(g)) ** M
        flux = D * u_x
        flux_x = gradients(flux, g)[0][:, [0]]
        pde = u_t - flux_x
        return pde.pow(2).mean()


def main():
    rng = np.random.default_rng(0)
    # initial condition points (t = 0)
    x0 = rng.uniform(0, 1, (200, 1))
    x_ic = torch.tensor(np.hstack([x0, np.zeros_like(x0)]), dtype=torch.float32)
    c_ic = torch.tensor(initial_profile(x0), dtype=torch.float32)
    # boundary points (x = 0 and x = 1)
    tb = rng.uniform(0, 1, (100, 1))
    x_bc = torch.tensor(np.vstack([np.hstack([np.zeros_like(tb), tb]), np.hstack([np.ones_like(tb), tb])]),
                        dtype=torch.float32)
    c_bc = torch.tensor(np.vstack([np.ones_like(tb), np.zeros_like(tb)]), dtype=torch.float32)
    # collocation points
    x_f = torch.tensor(rng.uniform(0, 1, (1000, 2)), dtype=torch.float32)

    xs, ref = finite_difference_reference()
    grid = torch.tensor([[xi, k / 10] for k in ref for xi in xs], dtype=torch.float32)
    c_ref = torch.tensor(np.concatenate([ref[k] for k in ref]), dtype=torch.float32)[:, None]

    model = FCN()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    for it in range(301):
        optimizer.zero_grad()
        loss_ic = model.loss_initial(x_ic, c_ic)
        loss_bc = model.loss_boundary(x_bc, c_bc)
        loss_pde = model.loss_internal(x_f)
        loss = 10.0 * loss_ic + 10.0 * loss_bc + loss_pde
        loss.backward()
        optimizer.step()

        if it < 5 or it % 25 == 0:
            with torch.no_grad():
                pred = model(grid)
                rel_l2 = torch.linalg.norm(pred - c_ref) / torch.linalg.norm(c_ref)
            print(f"It: {it:3d}  loss {loss.item():.4e}  ic {loss_ic.item():.3e}  bc {loss_bc.item():.3e}  "
                  f"pde {loss_pde.item():.3e}  rel L2 vs FD {rel_l2.item():.3f}")


if __name__ == "__main__":
    main()
