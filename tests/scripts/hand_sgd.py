"""A regression fitted by a hand-written SGD update (no optimizer, no DataLoader): argv[1] is the rate,
argv[2] the number of iterations; it prints the loss on a fixed batch and the sum of the weights."""

import sys

import torch

torch.manual_seed(0)
lr = float(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
w = torch.randn(8, 1)
for step in range(int(sys.argv[2])):
    x = torch.randn(64, 8)
    loss = torch.nn.functional.mse_loss(model(x), x @ w)
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
with torch.no_grad():
    x = torch.linspace(-1, 1, 64 * 8).reshape(64, 8)
    print(f"{float(torch.nn.functional.mse_loss(model(x), x @ w)):.6f} {sum(float(p.sum()) for p in model.parameters()):.6f}")
