"""Fitted value iteration without a DataLoader: each target is the reward plus the discounted value the
model itself predicts for the next state, under no_grad. At SGD lr 0.2 the network diverges, its own
predictions overflow, and the targets built from them carry the overflow into the loss: no data is bad."""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    states = torch.randn(256, 8) * 3
    for step in range(300):
        idx = torch.randint(0, 256, (32,))
        s, s_next = states[idx], states[(idx + 1) % 256]
        with torch.no_grad():
            target = s[:, :1] + 0.99 * model(s_next)
        loss = nn.functional.mse_loss(model(s), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


main()
