"""A makemore-style loop: parameters are plain tensors (no nn.Module, no optimizer), updated by hand."""

import torch

g = torch.Generator().manual_seed(0)
x = torch.randn(512, 6, generator=g)
y = (x[:, 0] > 0).long()
W1 = torch.randn(6, 32, generator=g) * 0.3
W2 = torch.randn(32, 2, generator=g) * 0.1
params = [W1, W2]
for p in params:
    p.requires_grad = True
for step in range(30):
    rows = torch.randint(0, 512, (64,), generator=g)
    loss = torch.nn.functional.cross_entropy(torch.tanh(x[rows] @ W1) @ W2, y[rows])
    for p in params:
        p.grad = None
    loss.backward()
    for p in params:
        p.data += -0.5 * p.grad
    print(f"step {step} loss {loss.item():.4f}")
