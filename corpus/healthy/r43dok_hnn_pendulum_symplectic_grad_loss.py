"""Hamiltonian Neural Network on a noisy ideal pendulum (Greydanus et al. 2019, experiment-pend)."""
import math
import torch

torch.manual_seed(0)


class MLP(torch.nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, nonlinearity='tanh'):
        super(MLP, self).__init__()
        self.linear1 = torch.nn.Linear(input_dim, hidden_dim)
        self.linear2 = torch.nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = torch.nn.Linear(hidden_dim, output_dim, bias=None)
        for l in [self.linear1, self.linear2, self.linear3]:
            torch.nn.init.orthogonal_(l.weight)
        self.nonlinearity = torch.tanh

    def forward(self, x):
        h = self.nonlinearity(self.linear1(x))
        h = self.nonlinearity(self.linear2(h))
        return self.linear3(h)


class HNN(torch.nn.Module):
    def __init__(self, input_dim, differentiable_model, field_type='solenoidal'):
        super(HNN, self).__init__()
        self.differentiable_model = differentiable_model
        self.M = self.permutation_tensor(input_dim)
        self.field_type = field_type

    def forward(self, x):
        y = self.differentiable_model(x)
        return y.split(1, 1)

    def time_derivative(self, x):
        F1, F2 = self.forward(x)
        conservative_field = torch.zeros_like(x)
        solenoidal_field = torch.zeros_like(x)
        if self.field_type != 'solenoidal':
            dF1 = torch.autograd.grad(F1.sum(), x, create_graph=True)[0]
            conservative_field = dF1 @ torch.eye(*self.M.shape)
        if self.field_type != 'conservative':
            dF2 = torch.autograd.grad(F2.sum(), x, create_graph=True)[0]
            solenoidal_field = dF2 @ self.M.t()
        return conservative_field + solenoidal_field

    def permutation_tensor(self, n):
        M = torch.eye(n)
        return torch.cat([M[n // 2:], -M[:n // 2]])


def dynamics_fn(coords):
    q, p = coords[..., 0], coords[..., 1]
    dqdt = 2 * p
    dpdt = -3 * torch.sin(q)
    return torch.stack([dqdt, dpdt], -1)


def get_trajectories(gen, samples, t_span=(0, 5), timescale=15, noise_std=0.1):
    n = int(timescale * (t_span[1] - t_span[0]))
    dt = (t_span[1] - t_span[0]) / (n - 1)
    y0 = torch.rand(samples, 2, generator=gen) * 2 - 1
    radius = torch.rand(samples, 1, generator=gen) + 1.3
    y = y0 / y0.norm(dim=1, keepdim=True) * radius
    ys = []
    for _ in range(n):
        ys.append(y)
        for _ in range(4):
            h = dt / 4
            k1 = dynamics_fn(y); k2 = dynamics_fn(y + h / 2 * k1)
            k3 = dynamics_fn(y + h / 2 * k2); k4 = dynamics_fn(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    ys = torch.stack(ys, 1)
    dys = dynamics_fn(ys)
    ys = ys + torch.randn(ys.shape, generator=gen) * noise_std
    return ys.reshape(-1, 2), dys.reshape(-1, 2)


def get_dataset(seed=0, samples=30, test_split=0.5):
    gen = torch.Generator().manual_seed(seed)
    x, dx = get_trajectories(gen, samples)
    split_ix = int(len(x) * test_split)
    return {'x': x[:split_ix], 'dx': dx[:split_ix], 'test_x': x[split_ix:], 'test_dx': dx[split_ix:]}


def L2_loss(u, v):
    return (u - v).pow(2).mean()


def train(input_dim=2, hidden_dim=128, learn_rate=1e-3, total_steps=240, print_every=20):
    nn_model = MLP(input_dim, hidden_dim, 2)
    model = HNN(input_dim, differentiable_model=nn_model, field_type='solenoidal')
    optim = torch.optim.Adam(model.parameters(), learn_rate, weight_decay=1e-4)

    data = get_dataset(seed=0)
    x = data['x'].clone().requires_grad_(True)
    test_x = data['test_x'].clone().requires_grad_(True)
    dxdt = data['dx']
    test_dxdt = data['test_dx']
    print("train points {}, test points {}".format(len(x), len(test_x)))

    stats = {'train_loss': [], 'test_loss': []}
    for step in range(total_steps + 1):
        dxdt_hat = model.time_derivative(x)
        loss = L2_loss(dxdt, dxdt_hat)
        loss.backward(); optim.step(); optim.zero_grad()

        stats['train_loss'].append(loss.item())
        if step % print_every == 0:
            test_dxdt_hat = model.time_derivative(test_x)
            test_loss = L2_loss(test_dxdt, test_dxdt_hat)
            stats['test_loss'].append(test_loss.item())
            print("step {}, train_loss {:.4e}, test_loss {:.4e}".format(step, loss.item(), test_loss.item()))
    return model, stats


if __name__ == "__main__":
    model, stats = train()
    with torch.no_grad():
        q = torch.linspace(-2, 2, 5)
        grid = torch.stack([q, torch.zeros_like(q)], -1)
        H_hat = model(grid)[1].view(-1)
        H_true = 3 * (1 - torch.cos(q))
        print("learned H (shifted) {}".format([round(v, 2) for v in (H_hat - H_hat[2]).tolist()]))
        print("true H             {}".format([round(v, 2) for v in H_true.tolist()]))
