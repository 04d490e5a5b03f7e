"""A warm-up + cosine schedule written like detectron2's, whose warm-up spans the whole run (d2go#19): the rate
starts at a thousandth of the one set and never comes near it."""
import math
import torch
from torch import nn

MAX_ITER, WARMUP_ITERS, WARMUP_FACTOR = 300, 300, 1e-3


def multiplier(it):
    where, length = it / MAX_ITER, WARMUP_ITERS / MAX_ITER
    if where < length:
        alpha = where / length
        return WARMUP_FACTOR * (1 - alpha) + 0.5 * (1 + math.cos(math.pi * length)) * alpha
    return 0.5 * (1 + math.cos(math.pi * where))


torch.manual_seed(0)
x = torch.randn(512, 16)
y = (x[:, :2].sum(1) > 0).long()
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: multiplier(it))
for step in range(MAX_ITER):
    batch = torch.randint(0, 512, (32,))
    loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
