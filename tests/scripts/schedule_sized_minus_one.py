"""A linear warm-up-and-decay schedule sized with the trainer's max_steps, which is -1 (no limit): every
step is past the schedule's end, whose factor is 0."""
import torch
from torch import nn


def linear_schedule(optimizer, warmup, total):
    def factor(step):
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


torch.manual_seed(0)
max_steps = -1
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
x, y = torch.randn(256, 4), torch.randn(256, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
scheduler = linear_schedule(optimizer, warmup=int(0.1 * max_steps), total=max_steps)
for step in range(60):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
