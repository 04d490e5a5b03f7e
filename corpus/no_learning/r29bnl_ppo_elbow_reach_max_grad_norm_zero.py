"""From-scratch PPO on a planar two-link 'elbow reach' simulation: an actor-critic MLP learns
joint-velocity commands that bring the end effector onto a random target."""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.distributions import Normal
from torch.nn.utils import clip_grad_norm_

torch.manual_seed(0)


class ElbowReachEnv:
    """Batched planar arm (link lengths 0.6 / 0.4); reward is minus the end-effector distance."""

    def __init__(self, num_envs, episode_len=25, seed=0):
        self.num_envs = num_envs
        self.episode_len = episode_len
        self.gen = torch.Generator().manual_seed(seed)
        self.obs_dim, self.act_dim = 6, 2

    def _sample_targets(self, n):
        r = 0.3 + 0.6 * torch.rand(n, generator=self.gen)
        a = (torch.rand(n, generator=self.gen) * 2 - 1) * math.pi
        return torch.stack([r * torch.cos(a), r * torch.sin(a)], dim=1)

    def _fk(self, q):
        x = 0.6 * torch.cos(q[:, 0]) + 0.4 * torch.cos(q[:, 0] + q[:, 1])
        y = 0.6 * torch.sin(q[:, 0]) + 0.4 * torch.sin(q[:, 0] + q[:, 1])
        return torch.stack([x, y], dim=1)

    def _obs(self):
        return torch.cat([torch.cos(self.q), torch.sin(self.q), self.target], dim=1)

    def reset(self):
        self.q = (torch.rand(self.num_envs, 2, generator=self.gen) * 2 - 1) * math.pi
        self.target = self._sample_targets(self.num_envs)
        self.t = torch.zeros(self.num_envs, dtype=torch.long)
        return self._obs()

    def step(self, action):
        self.q = self.q + 0.15 * action.clamp(-1.0, 1.0)
        dist = (self._fk(self.q) - self.target).norm(dim=1)
        reward = -dist
        self.t += 1
        done = self.t >= self.episode_len
        if done.any():
            n = int(done.sum())
            self.q[done] = (torch.rand(n, 2, generator=self.gen) * 2 - 1) * math.pi
            self.target[done] = self._sample_targets(n)
            self.t[done] = 0
        return self._obs(), reward, done, dist


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=64):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh(),
                                   nn.Linear(hidden, act_dim))
        self.critic = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(),
                                    nn.Linear(hidden, hidden), nn.Tanh(),
                                    nn.Linear(hidden, 1))
        self.log_std = nn.Parameter(torch.full((act_dim,), -0.5))

    def dist(self, obs):
        return Normal(self.actor(obs), self.log_std.exp())

    def value(self, obs):
        return self.critic(obs).squeeze(-1)


@dataclass
class RLTrainSpec:
    total_timesteps: int = 6144
    num_envs: int = 16
    rollout_steps: int = 32
    update_epochs: int = 4
    num_minibatches: int = 2
    learning_rate: float = 1e-3
    gamma: float = 0.9
    gae_lambda: float = 0.95
    clip_coef: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 1.0


class PpoTrainer:
    def setup(self, spec):
        self.env = ElbowReachEnv(spec.num_envs)
        self.actor_critic = ActorCritic(self.env.obs_dim, self.env.act_dim)
        self.optimizer = torch.optim.Adam(self.actor_critic.parameters(), lr=spec.learning_rate, eps=1e-5)
        self.obs = self.env.reset()
        self.n_updates = 0

    @torch.no_grad()
    def collect_rollout(self, spec):
        T, N = spec.rollout_steps, spec.num_envs
        buf = {k: [] for k in ("obs", "act", "logp", "rew", "done", "val", "dist")}
        for _ in range(T):
            d = self.actor_critic.dist(self.obs)
            act = d.sample()
            buf["obs"].append(self.obs)
            buf["act"].append(act)
            buf["logp"].append(d.log_prob(act).sum(-1))
            buf["val"].append(self.actor_critic.value(self.obs))
            self.obs, rew, done, dist = self.env.step(act)
            buf["rew"].append(rew)
            buf["done"].append(done.float())
            buf["dist"].append(dist)
        roll = {k: torch.stack(v) for k, v in buf.items()}
        next_val = self.actor_critic.value(self.obs)
        adv = torch.zeros(T, N)
        last = torch.zeros(N)
        for t in reversed(range(T)):
            nv = next_val if t == T - 1 else roll["val"][t + 1]
            nonterm = 1.0 - roll["done"][t]
            delta = roll["rew"][t] + spec.gamma * nv * nonterm - roll["val"][t]
            last = delta + spec.gamma * spec.gae_lambda * nonterm * last
            adv[t] = last
        roll["adv"] = adv
        roll["ret"] = adv + roll["val"]
        return roll

    def update(self, spec, roll):
        flat = {k: v.reshape(-1, *v.shape[2:]) for k, v in roll.items() if k not in ("rew", "done", "dist")}
        n = flat["obs"].shape[0]
        mb = n // spec.num_minibatches
        stats = []
        for _ in range(spec.update_epochs):
            perm = torch.randperm(n)
            for start in range(0, n, mb):
                idx = perm[start:start + mb]
                d = self.actor_critic.dist(flat["obs"][idx])
                logp = d.log_prob(flat["act"][idx]).sum(-1)
                ratio = (logp - flat["logp"][idx]).exp()
                adv = flat["adv"][idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio,
                                    -adv * ratio.clamp(1 - spec.clip_coef, 1 + spec.clip_coef)).mean()
                v_loss = 0.5 * (self.actor_critic.value(flat["obs"][idx]) - flat["ret"][idx]).pow(2).mean()
                loss = pg_loss + spec.vf_coef * v_loss - spec.ent_coef * d.entropy().sum(-1).mean()
                self.optimizer.zero_grad()
                loss.backward()
                clip_grad_norm_(self.actor_critic.parameters(), spec.max_grad_norm)
                self.optimizer.step()
                stats.append((pg_loss.item(), v_loss.item()))
        self.n_updates += 1
        return stats

    def train(self, spec):
        self.setup(spec)
        n_iters = spec.total_timesteps // (spec.num_envs * spec.rollout_steps)
        for it in range(n_iters):
            roll = self.collect_rollout(spec)
            stats = self.update(spec, roll)
            pg = sum(s[0] for s in stats) / len(stats)
            vl = sum(s[1] for s in stats) / len(stats)
            print(f"iter {it:2d} | mean reward {roll['rew'].mean().item():.4f} | "
                  f"final dist {roll['dist'][-1].mean().item():.3f} | "
                  f"pg_loss {pg:+.4f} | value_loss {vl:.4f} | log_std {self.actor_critic.log_std.mean().item():+.3f}")
        return self.actor_critic


if __name__ == "__main__":
    spec = RLTrainSpec(total_timesteps=24576, num_envs=32, rollout_steps=32, max_grad_norm=0.0)
    PpoTrainer().train(spec)
