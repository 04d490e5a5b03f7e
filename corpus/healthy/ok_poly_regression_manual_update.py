"""Fit a degree-4 polynomial with a single linear layer, no optimizer.

Same recipe as the pytorch/examples regression demo: random batches of x are
expanded into [x, x^2, x^3, x^4], the loss is smooth L1, and every parameter
is moved by hand against its gradient, then its gradient is zeroed by hand.
"""
from itertools import count

import torch
import torch.nn.functional as F

POLY_DEGREE = 4
LEARNING_RATE = 0.1
MAX_STEPS = 3000

torch.manual_seed(7)
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    """Stack the powers x, x^2, ..., x^POLY_DEGREE as columns."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    """The function we are trying to recover."""
    return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    terms = " ".join(f"{w:+.3f}x^{i + 1}" for i, w in enumerate(W.view(-1).tolist()))
    return f"y = {terms} {b.item():+.3f}"


def get_batch(batch_size=32):
    x = make_features(torch.randn(batch_size))
    return x, f(x)


def main():
    fc = torch.nn.Linear(POLY_DEGREE, 1)

    for batch_idx in count(1):
        batch_x, batch_y = get_batch()

        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()

        output.backward()

        # plain gradient descent, done by hand
        for param in fc.parameters():
            param.data.add_(-LEARNING_RATE * param.grad)
            param.grad.zero_()

        if batch_idx % 100 == 0 or batch_idx == 1:
            print(f"step {batch_idx:5d}  loss {loss:.6f}")

        if loss < 1e-3 or batch_idx >= MAX_STEPS:
            break

    print(f"Loss: {loss:.6f} after {batch_idx} batches")
    print("==> Learned function:\t" + poly_desc(fc.weight, fc.bias))
    print("==> Actual function:\t" + poly_desc(W_target, b_target))


if __name__ == "__main__":
    main()
