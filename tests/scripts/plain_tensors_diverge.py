"""Weights kept as plain tensors and stepped by hand at a rate the data's scale cannot take: the loss grows
each step until it overflows."""

import torch

torch.manual_seed(0)
x = torch.rand(40, 16) * 30
y = x.sum(dim=1, keepdim=True)
w = torch.randn(16, 1).requires_grad_()
lr = 0.05
for step in range(60):
    loss = ((x @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        w.grad.zero_()
    print(f"step {step} loss {loss.item():.4g}")
