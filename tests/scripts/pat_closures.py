"""Optimizer steps that take callables: LBFGS's closure given by position and by keyword, and a wrapper
optimizer of its own signature, step(forward_closure, backward_closure), that steps an inner Adam."""

import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(32, 4)
y = x.sum(dim=1, keepdim=True)
model = nn.Linear(4, 1)


def closure() -> torch.Tensor:
    lbfgs.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


class ForwardBackwardOptimizer(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer):
        super().__init__(params, {})
        self.base_optimizer = base_optimizer

    def step(self, forward_closure, backward_closure):
        self.zero_grad()
        loss = forward_closure()
        backward_closure(loss)
        self.base_optimizer.step()
        return loss


lbfgs = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
for step in range(1, 4):
    print(f"step {step} lbfgs positional {lbfgs.step(closure).item()!r}")
for step in range(4, 7):
    print(f"step {step} lbfgs keyword {lbfgs.step(closure=closure).item()!r}")
wrapper = ForwardBackwardOptimizer(model.parameters(), torch.optim.Adam(model.parameters(), lr=0.01))
for step in range(7, 10):
    loss = wrapper.step(lambda: nn.functional.mse_loss(model(x), y), lambda loss: loss.backward())
    print(f"step {step} wrapper {loss.item()!r}")
