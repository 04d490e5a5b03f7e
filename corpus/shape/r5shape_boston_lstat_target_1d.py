"""Single-variable linear regression on the Boston housing data: predict the median home value
(medv) from the share of lower-status population (lstat), a LinearRegressionModule with a weight
matrix and a bias, full-batch AdamW, MSE loss. The table is read into one float tensor and the
input and target columns are sliced out of it.

The Boston.csv table is synthesised here with the same columns (an unnamed index column, then
crim ... lstat, medv) and realistic ranges.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)
np.random.seed(0)

COLUMNS = ["", "crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio", "black",
           "lstat", "medv"]


def load_boston(n=506):
    lstat = np.clip(np.random.gamma(3.0, 4.2, n), 1.7, 38.0)
    rm = 6.3 - 0.05 * (lstat - 12.6) + 0.5 * np.random.randn(n)
    medv = np.clip(34.5 - 0.95 * lstat + 2.5 * (rm - 6.3) + 4.5 * np.random.randn(n), 5.0, 50.0)
    table = np.column_stack([
        np.arange(1, n + 1), np.random.exponential(3.6, n), np.random.choice([0, 12.5, 25, 80], n),
        np.random.uniform(0.5, 27.7, n), np.random.binomial(1, 0.07, n), np.random.uniform(0.38, 0.87, n),
        rm, np.random.uniform(3, 100, n), np.random.uniform(1.1, 12.1, n), np.random.choice([1, 4, 5, 24], n),
        np.random.uniform(187, 711, n), np.random.uniform(12.6, 22, n), np.random.uniform(0.3, 396.9, n),
        lstat, medv])
    return table


class LinearRegressionModule(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.register_parameter('weights', nn.Parameter(torch.rand((num_features, 1)) * 0.01))
        self.register_parameter('bias', nn.Parameter(torch.randn(1) * 0.01))

    def forward(self, inputs):
        return torch.matmul(inputs, self.weights) + self.bias


def train(inputs, targets, total_epoches=1500):
    mod = LinearRegressionModule(inputs.shape[1])
    optimizer = optim.AdamW(mod.parameters(), lr=0.05)

    for step in range(0, total_epoches):
        outputs = mod.forward(inputs)
        loss = F.mse_loss(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if step % 100 == 0:
            print(f"step={step} loss={loss.item():.4f}")
            if loss < 0.001:
                print(f"stopped at step {step}")
                break
    print(f"results: y = x_i * {mod.weights.detach().flatten().tolist()} + {mod.bias.item()}")
    return mod.weights, mod.bias


def main():
    data = torch.tensor(load_boston(), dtype=torch.float32)
    inputs = data[:, 13:14]  # lstat
    medv = data[:, 14]
    print(f"{COLUMNS[13]} range {inputs.min():.1f}..{inputs.max():.1f}, "
          f"{COLUMNS[14]} mean {medv.mean():.2f} var {medv.var():.2f}")
    train(inputs, medv)


if __name__ == "__main__":
    main()
