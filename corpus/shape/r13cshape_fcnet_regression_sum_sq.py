"""Fully connected network regression, ported to PyTorch from the TensorFlow book example
ch4/fcnet_regression_tf.py ("TensorFlow for Deep Learning").

Synthetic 1-D linear data y = 5 x + 2 + noise (N = 50), one hidden ReLU layer of 15 units and a
linear output, trained full-batch with Adam on the summed squared error. Pearson R^2 and the mean
squared error of the fit are printed at the end.
"""
import numpy as np
import torch
import torch.nn as nn

np.random.seed(456)
torch.manual_seed(456)


def pearson_r2_score(y, y_pred):
    """Computes Pearson R^2 (square of Pearson correlation)."""
    return np.corrcoef(y, y_pred)[0, 1] ** 2


# Generate synthetic data
d = 1
N = 50
w_true = 5
b_true = 2
noise_scale = .1
x_np = np.random.rand(N, d)
noise = np.random.normal(scale=noise_scale, size=(N, d))
y_np = np.reshape(w_true * x_np + b_true + noise, (-1))

x = torch.tensor(x_np, dtype=torch.float32)
y = torch.tensor(y_np, dtype=torch.float32)
print("x:", tuple(x.shape), " y:", tuple(y.shape), f" y mean {y.mean():.3f}  y var {y.var():.3f}")


class FCNet(nn.Module):
    def __init__(self, d, n_hidden):
        super().__init__()
        self.layer1 = nn.Linear(d, n_hidden)
        self.output = nn.Linear(n_hidden, 1)

    def forward(self, x):
        x_1 = torch.relu(self.layer1(x))
        return self.output(x_1)


n_hidden = 15
model = FCNet(d, n_hidden)
optimizer = torch.optim.Adam(model.parameters(), lr=.01)

n_steps = 300
for i in range(n_steps):
    y_pred = model(x)
    l = torch.sum((y - y_pred) ** 2)
    optimizer.zero_grad()
    l.backward()
    optimizer.step()
    if i % 25 == 0 or i == n_steps - 1:
        print("step %d, loss: %f" % (i, l.item()))

# Make Predictions
with torch.no_grad():
    y_pred_np = model(x).numpy()

y_pred_np = np.reshape(y_pred_np, -1)
r2 = pearson_r2_score(y_np, y_pred_np)
print("Pearson R^2: %f" % r2)
mse = np.mean((y_np - y_pred_np) ** 2)
print("MSE of the fit: %f   (variance of y: %f, noise variance: %f)" % (mse, y_np.var(), noise_scale ** 2))
print("predictions range: %.3f .. %.3f   targets range: %.3f .. %.3f"
      % (y_pred_np.min(), y_pred_np.max(), y_np.min(), y_np.max()))
