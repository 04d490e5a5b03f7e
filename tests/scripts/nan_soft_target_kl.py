"""Distillation-style training on soft targets with a hand-written KL divergence and batches sliced by
hand (no DataLoader). One row of the soft labels is exactly 0 somewhere: target * log(target) is 0 * -inf
there, the loss is NaN before backward, and a replay through the loop gets other batches."""

import torch
from torch import nn

torch.manual_seed(0)
n, features, classes = 2000, 8, 4
x = torch.randn(n, features)
target = torch.softmax(x[:, :classes] * 2, dim=1)
target[1234] = torch.tensor([1.0, 0.0, 0.0, 0.0])
model = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def soft_kl(logits, soft):
    log_p = torch.log_softmax(logits, dim=1)
    return (soft * (torch.log(soft) - log_p)).sum(dim=1).mean()


for epoch in range(3):
    order = torch.randperm(n)
    for i in range(0, n, 32):
        rows = order[i:i + 32]
        xb, yb = x[rows], target[rows]
        loss = soft_kl(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
