"""Q-learning without a DataLoader, the training call first and the target's call under no_grad after it: the
logged rewards have missing entries kept as NaN, and the first minibatch that draws one makes the loss NaN."""

import torch
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    states = torch.randn(256, 8)
    rewards = states[:, :1] * 0.5
    rewards[[17, 140]] = float("nan")
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(300):
        idx = torch.randint(0, 255, (32,))
        q = model(states[idx])
        with torch.no_grad():
            target = rewards[idx] + 0.9 * model(states[idx + 1])
        loss = nn.functional.mse_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


main()
