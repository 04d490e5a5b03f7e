"""Regression without a DataLoader whose targets come from a table with missing readings kept as NaN:
the first minibatch that draws one makes the loss NaN. The model's own outputs stay finite."""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    features = torch.randn(256, 8)
    readings = features[:, :1] * 2 + 0.1 * torch.randn(256, 1)
    readings[[17, 140]] = float("nan")
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(300):
        idx = torch.randint(0, 256, (32,))
        loss = nn.functional.mse_loss(model(features[idx]), readings[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


main()
