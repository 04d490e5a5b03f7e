"""Learning the basics: predict the last 20 values of y = x^3 + x^2 + x on [-10, 10]
from the first 80 values with a single weight matrix and a bias, trained with
hand-written SGD steps and MSELoss(reduction='sum')."""
import numpy as np
import torch

np.random.seed(0)
torch.manual_seed(0)

x = np.linspace(-10, 10, 100)
y = x**3 + x**2 + x

loss_fn = torch.nn.MSELoss(reduction="sum")


def get_trgts(i):
    return torch.tensor(y[i:]).float()


def get_weights(i, o):
    return torch.tensor(np.random.normal(0, 3, (o, i))).float().requires_grad_()


def get_bias(o):
    return torch.tensor(np.random.normal(0, 3, o)).float().requires_grad_()


def get_params(i):
    return torch.tensor(y[:i]).float()


weights = get_weights(80, 20)
trgts = get_trgts(80)
params = get_params(80)
bias = get_bias(1)
lr = 1e-6


def apply_step(weights, bias, prn=True):
    preds = weights @ params + bias
    loss = loss_fn(preds, trgts)
    loss.backward()
    with torch.no_grad():
        weights -= weights.grad * lr
        bias -= bias.grad * lr
        weights.grad.zero_()
        bias.grad.zero_()
    if prn:
        print(f"step {step:3d}  loss {loss.item():.6g}")
    return preds


for step in range(200):
    preds = apply_step(weights, bias, prn=(step < 5 or step % 10 == 0))

with torch.no_grad():
    final = weights @ params + bias
    print("final loss", loss_fn(final, trgts).item())
    print("predicted last 3:", final[-3:].tolist(), "target last 3:", trgts[-3:].tolist())
    print("weights finite:", torch.isfinite(weights).all().item())
