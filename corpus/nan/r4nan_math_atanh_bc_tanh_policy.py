"""Behaviour cloning of a reaching policy with a tanh-squashed Gaussian head (as in SAC-style
actors), trained with accelerate.

Demonstrations come from a scripted PD expert on a 3-D point-mass arm; expert commands are
clipped to the action space [-1, 1] before they are recorded, as the robot driver does.
"""
import math

import torch
import torch.nn as nn
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

OBS_DIM, ACT_DIM = 9, 3


def collect_demos(n_episodes=60, horizon=50, dt=0.05):
    g = torch.Generator().manual_seed(0)
    observations, actions = [], []
    for _ in range(n_episodes):
        pos = torch.rand(3, generator=g) * 2 - 1
        vel = torch.zeros(3)
        goal = torch.rand(3, generator=g) * 2 - 1
        for _ in range(horizon):
            cmd = 2.0 * (goal - pos) - 0.5 * vel + 0.1 * torch.randn(3, generator=g)
            act = cmd.clamp(-1.0, 1.0)
            observations.append(torch.cat([pos, vel, goal]))
            actions.append(act)
            vel = vel + dt * 4.0 * act
            pos = pos + dt * vel
    return torch.stack(observations), torch.stack(actions)


class TanhGaussianPolicy(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=256):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(obs_dim, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
        )
        self.mu = nn.Linear(hidden, act_dim)
        self.log_std = nn.Linear(hidden, act_dim)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.mu(h), self.log_std(h).clamp(-5.0, 2.0)

    def log_prob(self, obs, actions):
        mu, log_std = self(obs)
        pre_tanh = torch.atanh(actions)
        logp = -0.5 * ((pre_tanh - mu) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
        logp = logp - torch.log(1 - actions.pow(2) + 1e-6)
        return logp.sum(-1)

    def act(self, obs):
        mu, _ = self(obs)
        return torch.tanh(mu)


def main():
    accelerator = Accelerator(cpu=True)
    obs, acts = collect_demos()
    accelerator.print(f"{len(obs)} demo transitions, obs {tuple(obs.shape)}, actions {tuple(acts.shape)}")
    loader = DataLoader(TensorDataset(obs, acts), batch_size=64, shuffle=True)

    policy = TanhGaussianPolicy(OBS_DIM, ACT_DIM)
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-4)
    policy, optimizer, loader = accelerator.prepare(policy, optimizer, loader)

    step = 0
    for epoch in range(4):
        policy.train()
        for batch_obs, batch_act in loader:
            loss = -policy.log_prob(batch_obs, batch_act).mean()
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            if step % 10 == 0:
                with torch.no_grad():
                    mse = ((policy.act(batch_obs) - batch_act) ** 2).mean()
                accelerator.print(f"epoch {epoch} step {step:3d}  bc_loss {loss.item():.4f}  action_mse {mse.item():.4f}")
            step += 1


if __name__ == "__main__":
    main()
