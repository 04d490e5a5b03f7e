"""A critic whose value is detached before its loss (the target should have been): its loss has no graph
back to the critic, backward runs on the target's branch only, and the critic never gets a gradient."""

import torch
import torch.nn.functional as F
from torch import nn


def main() -> None:
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    target_net = nn.Linear(4, 1)
    optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
    for step in range(40):
        state, reward = torch.randn(32, 4), torch.randn(32, 1)
        critic_value = critic(state)
        critic_value = critic_value.detach()
        critic_target = reward + 0.9 * target_net(state)
        critic_loss = F.smooth_l1_loss(critic_value, critic_target)
        optimizer.zero_grad()
        critic_loss.backward()
        optimizer.step()


main()
