"""Advantage actor-critic agent for a toy warehouse dispatch environment.

Each step the agent sees the queue state of the warehouse (8 numbers) and picks one of
19 dispatch actions; the reward of a correct dispatch is the value of the order shipped.
An episode lasts 16 steps. Actor and critic share one MLP trunk and are trained together
on a batch of parallel episodes (policy loss + value loss - entropy bonus).
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical

torch.manual_seed(0)
np.random.seed(0)

N_ENVS = 32
OBS_DIM = 8
N_ACTIONS = 19
EP_LEN = 16
GAMMA = 0.99
LR = 1e-2
VF_COEF = 0.5
ENT_COEF = 0.01
N_ITERS = 120


class WarehouseEnv:
    def __init__(self, n_envs, seed=0):
        self.n = n_envs
        self.rng = np.random.default_rng(seed)
        self.proj = self.rng.normal(size=(OBS_DIM, N_ACTIONS))

    def reset(self):
        self.state = self.rng.normal(size=(self.n, OBS_DIM)).astype(np.float32)
        self.t = 0
        return self.state

    def step(self, actions):
        best = np.argmax(self.state @ self.proj, axis=1)
        hit = actions == best
        order_value = self.rng.lognormal(mean=0.0, sigma=2.5, size=self.n)
        reward = np.where(hit, order_value, -0.1 * np.abs(actions - best) / N_ACTIONS)
        self.state = (0.8 * self.state + 0.6 * self.rng.normal(size=self.state.shape)).astype(np.float32)
        self.t += 1
        return self.state, reward.astype(np.float32), self.t >= EP_LEN


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(OBS_DIM, 128), nn.ReLU(),
            nn.Linear(128, 128), nn.ReLU(),
        )
        self.actor = nn.Linear(128, N_ACTIONS)
        self.critic = nn.Linear(128, 1)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.actor(h), self.critic(h).squeeze(-1)


def discounted_returns(rewards):
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[1])
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + GAMMA * running
        returns[t] = running
    return returns


env = WarehouseEnv(N_ENVS)
model = ActorCritic()
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

start = time.time()
for it in range(1, N_ITERS + 1):
    obs = env.reset()
    log_probs, values, entropies, rewards = [], [], [], []
    done = False
    while not done:
        logits, value = model(torch.from_numpy(obs))
        dist = Categorical(logits=logits)
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        entropies.append(dist.entropy())
        values.append(value)
        obs, reward, done = env.step(action.numpy())
        rewards.append(torch.from_numpy(reward))

    log_probs = torch.stack(log_probs)
    values = torch.stack(values)
    entropy = torch.stack(entropies).mean()
    rewards = torch.stack(rewards)
    returns = discounted_returns(rewards)
    advantages = returns - values.detach()

    policy_loss = -(log_probs * advantages).mean()
    value_loss = F.mse_loss(values, returns)
    loss = policy_loss + VF_COEF * value_loss - ENT_COEF * entropy

    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

    if it % 10 == 0 or it == 1:
        hit_rate = (rewards > 0).float().mean().item()
        print(f"iter {it:4d} | policy loss {policy_loss.item():9.3f} | value loss {value_loss.item():11.3f} "
              f"| mean return {returns[0].mean().item():7.2f} | hit rate {hit_rate:.3f}")

print(f"done in {time.time() - start:.1f}s")
