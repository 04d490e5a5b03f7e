"""Policy-gradient dispatcher: route each incoming job to one of 8 machines.

Machines that are down cannot take a job, so their logits are masked out before the softmax.
The policy is trained with REINFORCE (moving-average baseline) plus an entropy bonus."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(7)
np.random.seed(7)

N_MACHINES = 8
FEAT = 3
BATCH = 64
ENTROPY_BETA = 0.01


class DispatchEnv:
    """Each state: per-machine (queue length, speed, up flag); reward = -expected finish time."""

    def __init__(self, batch):
        self.batch = batch

    def reset(self):
        queue = torch.randint(0, 10, (self.batch, N_MACHINES)).float()
        speed = torch.rand(self.batch, N_MACHINES) * 1.5 + 0.5
        up = torch.rand(self.batch, N_MACHINES) > 0.3
        up[torch.arange(self.batch), torch.randint(0, N_MACHINES, (self.batch,))] = True
        self.finish = (queue + 1.0) / speed
        self.up = up
        obs = torch.stack([queue / 10.0, speed, up.float()], dim=-1)
        return obs, up

    def step(self, action):
        reward = -self.finish.gather(1, action.unsqueeze(1)).squeeze(1)
        best = self.finish.masked_fill(~self.up, float("inf")).min(dim=1).values
        return reward, -best


class PolicyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.machine_enc = nn.Sequential(nn.Linear(FEAT, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.ctx = nn.Linear(32, 32)
        self.score = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, obs, valid):
        h = self.machine_enc(obs)
        ctx = self.ctx(h.mean(dim=1, keepdim=True)).expand_as(h)
        logits = self.score(torch.cat([h, ctx], dim=-1)).squeeze(-1)
        logits = logits.masked_fill(~valid, float("-inf"))
        return logits


def main():
    env = DispatchEnv(BATCH)
    policy = PolicyNet()
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    baseline = None

    for it in range(1, 201):
        obs, valid = env.reset()
        logits = policy(obs, valid)
        probs = F.softmax(logits, dim=-1)
        log_probs = F.log_softmax(logits, dim=-1)
        gumbel = -torch.log(-torch.log(torch.rand_like(logits)))
        action = (logits.detach() + gumbel).argmax(dim=-1)
        reward, best_reward = env.step(action)

        baseline = reward.mean() if baseline is None else 0.9 * baseline + 0.1 * reward.mean()
        advantage = reward - baseline
        chosen_logp = log_probs.gather(1, action.unsqueeze(1)).squeeze(1)
        entropy = -(probs * log_probs).sum(dim=-1)
        loss = -(chosen_logp * advantage).mean() - ENTROPY_BETA * entropy.mean()

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if it % 20 == 0 or it == 1:
            regret = (best_reward - reward).mean().item()
            print(f"iter {it:3d}  loss {loss.item():.4f}  reward {reward.mean().item():.3f}  regret {regret:.3f}  entropy {entropy.mean().item():.3f}")


if __name__ == "__main__":
    main()
