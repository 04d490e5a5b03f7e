"""DeepONet learning the antiderivative operator G: u -> s(x) = int_0^x u(t) dt.

Branch net reads u at 50 sensors, trunk net reads the evaluation point x, the output is
branch @ trunk.T + bias. Input functions are random smooth functions (sums of sines/cosines).
"""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import Dataset

torch.manual_seed(0)
np.random.seed(0)


class MLP(nn.Module):
    def __init__(self, input_size, hidden_size, num_classes, depth, act):
        super(MLP, self).__init__()
        self.layers = nn.ModuleList()
        self.act = act
        self.layers.append(nn.Linear(input_size, hidden_size))
        for _ in range(depth - 2):
            self.layers.append(nn.Linear(hidden_size, hidden_size))
        self.layers.append(nn.Linear(hidden_size, num_classes))

    def forward(self, x, final_act=False):
        for i in range(len(self.layers) - 1):
            x = self.act(self.layers[i](x))
        x = self.layers[-1](x)
        if final_act == False:
            return x
        else:
            return torch.relu(x)


class DeepONet(nn.Module):
    def __init__(self, n_branch: int, width: int, depth: int, p: int, act, n_trunk: int = 1):
        super(DeepONet, self).__init__()
        self.branch_net = MLP(input_size=n_branch, hidden_size=width, num_classes=p, depth=depth, act=act)
        self.branch_net.float()
        self.trunk_net = MLP(input_size=n_trunk, hidden_size=width, num_classes=p, depth=depth, act=act)
        self.trunk_net.float()
        self.bias = nn.Parameter(torch.ones((1,)), requires_grad=True)

    def convert_np_to_tensor(self, array):
        if isinstance(array, np.ndarray):
            return torch.from_numpy(array).to(torch.float32)
        return array

    def forward(self, x_branch_, x_trunk_):
        x_branch = self.convert_np_to_tensor(x_branch_)
        x_trunk = self.convert_np_to_tensor(x_trunk_)
        branch_out = self.branch_net.forward(x_branch)
        trunk_out = self.trunk_net.forward(x_trunk, final_act=True)
        output = branch_out @ trunk_out.t() + self.bias
        return output


def convert_np_to_tensor(array):
    if isinstance(array, np.ndarray):
        return torch.from_numpy(array).to(torch.float32)
    return array


class Datahandler(Dataset):
    def __init__(self, x_branch_, x_trunk_, y_):
        self.x_batch = convert_np_to_tensor(x_branch_)
        self.x_trunk = convert_np_to_tensor(x_trunk_)
        self.y = convert_np_to_tensor(y_)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, index):
        return self.x_batch[index, :], self.x_trunk, self.y[index, :]


def make_antiderivative_data(n_funcs, n_points=50, n_modes=4, seed=0):
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, n_points)
    u = np.zeros((n_funcs, n_points))
    for k in range(1, n_modes + 1):
        a = rng.normal(0.0, 1.0 / k, size=(n_funcs, 1))
        b = rng.normal(0.0, 1.0 / k, size=(n_funcs, 1))
        u += a * np.sin(2 * np.pi * k * x) + b * np.cos(2 * np.pi * k * x)
    u += rng.normal(0.0, 0.5, size=(n_funcs, 1))
    dx = x[1] - x[0]
    s = np.concatenate([np.zeros((n_funcs, 1)), np.cumsum(0.5 * (u[:, 1:] + u[:, :-1]) * dx, axis=1)], axis=1)
    return u.astype(np.float32), x.reshape(-1, 1).astype(np.float32), s.astype(np.float32)


def relative_l2(model, x_branch, x_trunk, y):
    with torch.no_grad():
        pred = model(x_branch, x_trunk)
        y = convert_np_to_tensor(y)
        return (torch.linalg.norm(pred - y, dim=1) / torch.linalg.norm(y, dim=1)).mean().item()


def train_DON(model, x_branch, x_trunk, y_, test, lr=0.001, batch_size=32, epochs=100, log=True):
    dataset = Datahandler(x_branch, x_trunk, y_)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=lr)
    trunk = convert_np_to_tensor(x_trunk)

    for epoch in range(epochs):
        losses = []
        for branch, _, y in dataloader:
            optimizer.zero_grad()
            output = model.forward(branch, trunk)
            loss = criterion(output, y)
            loss.backward()
            losses.append(loss.item())
            optimizer.step()
        avg_loss = np.mean(losses)
        if log and (epoch % 2 == 0 or epoch == epochs - 1):
            print("=" * 30)
            print(f"loss at epoch {epoch}:{avg_loss:.6f}  test rel L2 {relative_l2(model, *test):.4f}")
            print("=" * 30)


def main():
    u_train, x, s_train = make_antiderivative_data(800, seed=1)
    u_test, _, s_test = make_antiderivative_data(200, seed=2)
    model = DeepONet(n_branch=u_train.shape[1], width=64, depth=3, p=40, act=nn.Tanh())
    print(f"test rel L2 before training: {relative_l2(model, u_test, x, s_test):.4f}")
    train_DON(model, u_train, x, s_train, test=(u_test, x, s_test), lr=1e-3, batch_size=32, epochs=8)
    print(f"final test rel L2: {relative_l2(model, u_test, x, s_test):.4f}")


if __name__ == "__main__":
    main()
