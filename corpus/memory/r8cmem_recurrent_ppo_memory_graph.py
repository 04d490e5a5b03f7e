"""Recurrent PPO on a vectorised, partially observable foraging task.

32 copies of a continuing task run in lockstep (there are no episode ends): each agent must keep
pressing whichever of 4 feeders is currently baited. The bait moves every so often and the cue
that tells where it went is only visible for a few steps after a move, so the policy needs its
LSTM memory to keep pressing the right feeder. Experience is collected in rollouts of 16 steps and
the policy is updated with clipped PPO on the rollout sequences.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical

torch.manual_seed(0)

NUM_ENVS = 32
OBS_DIM = 1024
NUM_FEEDERS = 4
ROLLOUT_LEN = 16
NUM_UPDATES = 56


class ForagingEnv:
    """Vectorised continuing task; observations are a noisy projection of the cue."""

    def __init__(self, num_envs, seed=0):
        self.g = torch.Generator().manual_seed(seed)
        self.num_envs = num_envs
        self.projection = torch.randn(NUM_FEEDERS + 1, OBS_DIM, generator=self.g)
        self.bait = torch.randint(0, NUM_FEEDERS, (num_envs,), generator=self.g)
        self.since_move = torch.zeros(num_envs, dtype=torch.long)

    def _observe(self):
        cue = F.one_hot(self.bait, NUM_FEEDERS).float() * (self.since_move < 3).float().unsqueeze(1)
        features = torch.cat([cue, torch.ones(self.num_envs, 1)], dim=1) @ self.projection
        return features + 0.3 * torch.randn(self.num_envs, OBS_DIM, generator=self.g)

    def reset(self):
        return self._observe()

    def step(self, action):
        reward = (action == self.bait).float() - 0.1
        move = torch.rand(self.num_envs, generator=self.g) < 0.08
        self.bait = torch.where(move, torch.randint(0, NUM_FEEDERS, (self.num_envs,), generator=self.g),
                                self.bait)
        self.since_move = torch.where(move, torch.zeros_like(self.since_move), self.since_move + 1)
        return self._observe(), reward


class RecurrentActorCritic(nn.Module):
    def __init__(self, obs_dim, hidden=128, num_actions=NUM_FEEDERS):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU())
        self.lstm = nn.LSTMCell(hidden, hidden)
        self.pi = nn.Linear(hidden, num_actions)
        self.v = nn.Linear(hidden, 1)
        self.hidden = hidden

    def initial_memory(self, batch):
        return torch.zeros(batch, self.hidden), torch.zeros(batch, self.hidden)

    def forward(self, obs, memory):
        h, c = self.lstm(self.encoder(obs), memory)
        return self.pi(h), self.v(h).squeeze(-1), (h, c)


class RolloutBuffer:
    def __init__(self):
        self.clear()

    def clear(self):
        self.obs, self.actions, self.logprobs, self.rewards, self.values = [], [], [], [], []
        self.start_memory = None

    def add(self, obs, action, logprob, reward, value):
        self.obs.append(obs)
        self.actions.append(action)
        self.logprobs.append(logprob)
        self.rewards.append(reward)
        self.values.append(value)


class PPOAgent:
    def __init__(self, policy, lr=1e-3, gamma=0.9, lam=0.95, clip=0.2, epochs=2, minibatches=1):
        self.policy = policy
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
        self.gamma, self.lam, self.clip = gamma, lam, clip
        self.epochs, self.minibatches = epochs, minibatches
        self.memory = policy.initial_memory(NUM_ENVS)

    def act(self, obs):
        logits, value, self.memory = self.policy(obs, self.memory)
        dist = Categorical(logits=logits)
        action = dist.sample()
        return action, dist.log_prob(action).detach(), value.detach()

    def bootstrap_value(self, obs):
        with torch.no_grad():
            _, value, _ = self.policy(obs, self.memory)
        return value

    def compute_gae(self, buffer, last_value):
        rewards = torch.stack(buffer.rewards)
        values = torch.stack(buffer.values)
        advantages = torch.zeros_like(rewards)
        gae = torch.zeros(NUM_ENVS)
        for t in reversed(range(len(rewards))):
            next_value = last_value if t == len(rewards) - 1 else values[t + 1]
            delta = rewards[t] + self.gamma * next_value - values[t]
            gae = delta + self.gamma * self.lam * gae
            advantages[t] = gae
        return advantages, advantages + values

    def update(self, buffer, last_value):
        advantages, returns = self.compute_gae(buffer, last_value)
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        obs = torch.stack(buffer.obs)
        actions = torch.stack(buffer.actions)
        old_logprobs = torch.stack(buffer.logprobs)
        h0, c0 = buffer.start_memory
        stats = []
        for _ in range(self.epochs):
            for envs in torch.randperm(NUM_ENVS).chunk(self.minibatches):
                memory = (h0[envs], c0[envs])
                logits_seq, values_seq = [], []
                for t in range(obs.shape[0]):
                    logits, value, memory = self.policy(obs[t, envs], memory)
                    logits_seq.append(logits)
                    values_seq.append(value)
                dist = Categorical(logits=torch.stack(logits_seq))
                logprobs = dist.log_prob(actions[:, envs])
                ratio = torch.exp(logprobs - old_logprobs[:, envs])
                adv = advantages[:, envs]
                policy_loss = -torch.min(ratio * adv,
                                         ratio.clamp(1 - self.clip, 1 + self.clip) * adv).mean()
                value_loss = F.mse_loss(torch.stack(values_seq), returns[:, envs])
                loss = policy_loss + 0.5 * value_loss - 0.01 * dist.entropy().mean()
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), 0.5)
                self.optimizer.step()
                stats.append((policy_loss.item(), value_loss.item()))
        return stats[-1]


def main():
    env = ForagingEnv(NUM_ENVS)
    policy = RecurrentActorCritic(OBS_DIM)
    agent = PPOAgent(policy)
    buffer = RolloutBuffer()
    obs = env.reset()
    start = time.time()
    for update in range(1, NUM_UPDATES + 1):
        buffer.clear()
        buffer.start_memory = tuple(m.detach().clone() for m in agent.memory)
        for _ in range(ROLLOUT_LEN):
            action, logprob, value = agent.act(obs)
            next_obs, reward = env.step(action)
            buffer.add(obs, action, logprob, reward, value)
            obs = next_obs
        last_value = agent.bootstrap_value(obs)
        policy_loss, value_loss = agent.update(buffer, last_value)
        if update % 8 == 0:
            mean_reward = torch.stack(buffer.rewards).mean().item()
            print(f"update {update:4d}  env steps {update * ROLLOUT_LEN * NUM_ENVS:6d}  "
                  f"mean reward {mean_reward:+.3f}  pi loss {policy_loss:+.4f}  "
                  f"v loss {value_loss:.4f}  ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
