"""Molecular property regression with a graph convolutional net, run through a small
Train / Test experiment harness (after pinot's app/experiment.py).

Molecules are random graphs (atoms with one-hot element types, bonds as a dense adjacency);
the property is a smooth function of the composition and bond counts. Train records the
weights as it goes so that Test can report RMSE / R^2 along the training trajectory.
"""
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)

N_ELEMENTS = 8
N_ATOMS = 12
HIDDEN = 640
N_EPOCHS = 80
BATCH = 32


def make_molecules(n, g):
    x = nn.functional.one_hot(torch.randint(0, N_ELEMENTS, (n, N_ATOMS), generator=g),
                              N_ELEMENTS).float()
    a = (torch.rand(n, N_ATOMS, N_ATOMS, generator=g) < 0.15).float()
    a = ((a + a.transpose(1, 2)) > 0).float()
    w = torch.linspace(-1.0, 1.0, N_ELEMENTS)
    degree = a.sum(-1)
    y = (x @ w).sum(1) / 4 + 0.1 * (degree * (x @ w)).sum(1) / 4
    return list(zip(x.split(BATCH), a.split(BATCH), y.split(BATCH)))


class GCN(nn.Module):
    def __init__(self, n_in, hidden, depth=3):
        super().__init__()
        self.embed = nn.Linear(n_in, hidden)
        self.convs = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(depth)])
        self.readout = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x, a):
        a_hat = a + torch.eye(a.size(-1))
        a_hat = a_hat / a_hat.sum(-1, keepdim=True)
        h = torch.relu(self.embed(x))
        for conv in self.convs:
            h = torch.relu(conv(a_hat @ h)) + h
        return self.readout(h.sum(1) / N_ATOMS).squeeze(-1)

    def loss(self, x, a, y):
        return (self(x, a) - y) ** 2


def rmse(net, data):
    y_hat = torch.cat([net(x, a) for x, a, _ in data])
    y = torch.cat([y for _, _, y in data])
    return ((y_hat - y) ** 2).mean().sqrt()


def r2(net, data):
    y_hat = torch.cat([net(x, a) for x, a, _ in data])
    y = torch.cat([y for _, _, y in data])
    return 1 - ((y_hat - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Train:
    """Training experiment; records the weights once every `record_interval` epochs."""

    def __init__(self, net, data, optimizer, n_epochs=100, record_interval=1):
        self.data = data
        self.optimizer = optimizer
        self.n_epochs = n_epochs
        self.net = net
        self.record_interval = record_interval
        self.states = {}

    def train_once(self):
        total = 0.0
        for x, a, y in self.data:
            def l():
                loss = torch.sum(self.net.loss(x, a, y))
                self.optimizer.zero_grad()
                loss.backward()
                return loss

            total += self.optimizer.step(l).item()
        return total / sum(len(y) for _, _, y in self.data)

    def train(self):
        for epoch_idx in range(int(self.n_epochs)):
            mse = self.train_once()
            if epoch_idx % self.record_interval == 0:
                self.states[epoch_idx] = copy.deepcopy(self.net.state_dict())
            if epoch_idx % 10 == 0:
                print(f"epoch {epoch_idx:3d}  train mse {mse:.4f}  "
                      f"states {len(self.states)}  rss {rss_mb():.0f} MB")
        self.states["final"] = copy.deepcopy(self.net.state_dict())
        return self.net


class Test:
    def __init__(self, net, data, states, metrics=(rmse, r2)):
        self.net = net
        self.data = data
        self.metrics = metrics
        self.states = states

    def test(self):
        self.net.eval()
        results = {metric.__name__: {} for metric in self.metrics}
        with torch.no_grad():
            for state_name, state in self.states.items():
                self.net.load_state_dict(state)
                for metric in self.metrics:
                    results[metric.__name__][state_name] = metric(self.net, self.data).item()
        self.results = results
        return results


g = torch.Generator().manual_seed(0)
data_tr = make_molecules(64, g)
data_te = make_molecules(64, g)
net = GCN(N_ELEMENTS, HIDDEN)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)

train = Train(net=net, data=data_tr, optimizer=optimizer, n_epochs=N_EPOCHS)
train.train()
results = Test(net=net, data=data_te, states=train.states).test()
for name in list(train.states)[:-1:max(1, len(train.states) // 5)] + ["final"]:
    print(f"state {name!s:>5}: test rmse {results['rmse'][name]:.4f}  r2 {results['r2'][name]:.3f}")
