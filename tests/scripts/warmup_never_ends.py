"""A classifier whose hand-written warm-up is given the step count where it expects a step count over a
total far larger than the run."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(2048, 16)
y = (x[:, :2].sum(1) > 0).long()
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
base_lr = 0.5
optimizer = torch.optim.SGD(model.parameters(), lr=base_lr)
step = 0
for epoch in range(4):
    for inputs, targets in DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True):
        step += 1
        lr_now = base_lr * min(1.0, step / 100000)
        for group in optimizer.param_groups:
            group["lr"] = lr_now
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
