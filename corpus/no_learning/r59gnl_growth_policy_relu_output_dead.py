"""Neural-network approximation of the capital policy function k' = g(k) of a neoclassical
growth model (log utility, Cobb-Douglas production, partial depreciation).

The policy is first solved on a grid by value function iteration (numpy); a feed-forward net
with 4 hidden layers (100/75/50/25) is then fitted to it by supervised learning, to be used
later as a smooth function approximator of the policy inside the model's equilibrium
conditions."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)
np.random.seed(0)

device = "cpu"
ALPHA, BETA, DELTA, A = 0.36, 0.96, 0.10, 1.70
K_MIN, K_MAX = 1.07312, 20.38941


def ten(x):
    return torch.from_numpy(x).float().to(device)


def solve_vfi(n_grid=300, tol=1e-6, max_iter=1000):
    k = np.linspace(K_MIN, K_MAX, n_grid)
    c = A * k[:, None] ** ALPHA + (1 - DELTA) * k[:, None] - k[None, :]
    u = np.where(c > 0, np.log(np.maximum(c, 1e-12)), -1e10)
    v = np.zeros(n_grid)
    for it in range(max_iter):
        q = u + BETA * v[None, :]
        v_new = q.max(1)
        if np.abs(v_new - v).max() < tol:
            break
        v = v_new
    policy = k[q.argmax(1)]
    return k, policy, it


class neural_net(nn.Module):
    def __init__(self, input_size=1, hidden=(100, 75, 50, 25), output_size=1):
        super(neural_net, self).__init__()
        self.input_layer = nn.Linear(input_size, hidden[0])
        self.hidden_layers = nn.ModuleList(
            [nn.Linear(hidden[i], hidden[i + 1]) for i in range(len(hidden) - 1)])
        self.output_layer = nn.Linear(hidden[-1], output_size)

    def forward(self, x):
        x = F.relu(self.input_layer(x))
        for layer in self.hidden_layers:
            x = F.relu(layer(x))
        return F.relu(self.output_layer(x))


class approx():
    def __init__(self, epochs=60, batch_size=50, lr=1e-3):
        k, policy, n_iter = solve_vfi()
        print("VFI converged after %d iterations; policy g(k) in [%.3f, %.3f]" % (n_iter, policy.min(), policy.max()))
        self.x = ten(k[:, None])
        self.y = ten(policy[:, None])
        self.epochs = epochs
        self.batch_size = batch_size
        self.model = neural_net().to(device)
        self.optimizer = optim.Adam(self.model.parameters(), lr=lr)
        self.loss_fn = nn.MSELoss()

    def train(self):
        n = self.x.shape[0]
        for epoch in range(self.epochs):
            perm = torch.randperm(n)
            epoch_loss = 0.0
            for i in range(0, n, self.batch_size):
                idx = perm[i:i + self.batch_size]
                pred = self.model(self.x[idx])
                loss = self.loss_fn(pred, self.y[idx])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                epoch_loss += loss.item() * len(idx)
            if epoch % 10 == 0 or epoch == self.epochs - 1:
                with torch.no_grad():
                    pred = self.model(self.x)
                    max_err = (pred - self.y).abs().max().item()
                    positive = (pred > 0).float().mean().item()
                print("epoch %3d  mse %.5f  max abs error %.4f  share of positive outputs %.2f  g(10)~%.3f"
                      % (epoch, epoch_loss / n, max_err, positive, self.model(ten(np.array([[10.0]]))).item()))


if __name__ == "__main__":
    approxlin = approx()
    approxlin.train()
