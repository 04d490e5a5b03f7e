"""A fine-tune whose linear warm-up, left at its default of 2,000 steps, is longer than the whole run: the rate
rises at every step and ends at 3% of the one set."""
import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR


def linear_warmup(optimizer: torch.optim.Optimizer, warmup_steps: int) -> LambdaLR:
    return LambdaLR(optimizer, lambda step: min(1.0, step / warmup_steps))


torch.manual_seed(0)
x = torch.randn(512, 16)
y = (x[:, :2].sum(1) > 0).long()
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = linear_warmup(optimizer, warmup_steps=2000)
for step in range(60):
    batch = torch.randint(0, 512, (32,))
    loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
