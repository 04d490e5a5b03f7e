"""PPO on CartPole in the layout of stable-baselines3 (RolloutBuffer + GAE, ActorCriticPolicy with
separate 64-64 tanh policy/value nets, clipped surrogate objective, value loss, grad-norm clipping).
gym is not installed here, so CartPole-v1 is re-implemented in NumPy with the same dynamics,
thresholds and 500-step limit."""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical

SEED = 0
np.random.seed(SEED)
torch.manual_seed(SEED)


class CartPoleEnv:
    def __init__(self, seed):
        self.gravity, self.masscart, self.masspole = 9.8, 1.0, 0.1
        self.total_mass = self.masscart + self.masspole
        self.length = 0.5
        self.polemass_length = self.masspole * self.length
        self.force_mag, self.tau = 10.0, 0.02
        self.theta_threshold_radians = 12 * 2 * math.pi / 360
        self.x_threshold = 2.4
        self.max_episode_steps = 500
        self.np_random = np.random.default_rng(seed)

    def reset(self):
        self.state = self.np_random.uniform(-0.05, 0.05, size=4)
        self.elapsed = 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * theta_dot ** 2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.elapsed += 1
        terminated = bool(abs(x) > self.x_threshold or abs(theta) > self.theta_threshold_radians)
        truncated = self.elapsed >= self.max_episode_steps
        return self.state.astype(np.float32), 1.0, terminated, truncated


class ActorCriticPolicy(nn.Module):
    def __init__(self, obs_dim, n_actions, net_arch=(64, 64)):
        super().__init__()
        def mlp():
            layers, last = [], obs_dim
            for h in net_arch:
                layers += [nn.Linear(last, h), nn.Tanh()]
                last = h
            return nn.Sequential(*layers)
        self.policy_net = mlp()
        self.value_net_body = mlp()
        self.action_net = nn.Linear(net_arch[-1], n_actions)
        self.value_net = nn.Linear(net_arch[-1], 1)
        for module, gain in [(self.policy_net, np.sqrt(2)), (self.value_net_body, np.sqrt(2)),
                             (self.action_net, 0.01), (self.value_net, 1.0)]:
            for m in module.modules():
                if isinstance(m, nn.Linear):
                    nn.init.orthogonal_(m.weight, gain=gain)
                    m.bias.data.fill_(0.0)

    def _distribution(self, obs):
        return Categorical(logits=self.action_net(self.policy_net(obs)))

    def forward(self, obs):
        dist = self._distribution(obs)
        actions = dist.sample()
        return actions, self.value_net(self.value_net_body(obs)), dist.log_prob(actions)

    def evaluate_actions(self, obs, actions):
        dist = self._distribution(obs)
        values = self.value_net(self.value_net_body(obs))
        return values, dist.log_prob(actions), dist.entropy()

    def predict_values(self, obs):
        return self.value_net(self.value_net_body(obs))


class RolloutBuffer:
    def __init__(self, buffer_size, obs_dim, gamma, gae_lambda):
        self.buffer_size, self.obs_dim = buffer_size, obs_dim
        self.gamma, self.gae_lambda = gamma, gae_lambda
        self.reset()

    def reset(self):
        self.observations = np.zeros((self.buffer_size, self.obs_dim), dtype=np.float32)
        self.actions = np.zeros(self.buffer_size, dtype=np.int64)
        self.rewards = np.zeros(self.buffer_size, dtype=np.float32)
        self.episode_starts = np.zeros(self.buffer_size, dtype=np.float32)
        self.values = np.zeros(self.buffer_size, dtype=np.float32)
        self.log_probs = np.zeros(self.buffer_size, dtype=np.float32)
        self.pos = 0

    def add(self, obs, action, reward, episode_start, value, log_prob):
        self.observations[self.pos] = obs
        self.actions[self.pos] = action
        self.rewards[self.pos] = reward
        self.episode_starts[self.pos] = episode_start
        self.values[self.pos] = value
        self.log_probs[self.pos] = log_prob
        self.pos += 1

    def compute_returns_and_advantage(self, last_value, done):
        last_gae_lam = 0.0
        self.advantages = np.zeros(self.buffer_size, dtype=np.float32)
        for step in reversed(range(self.buffer_size)):
            if step == self.buffer_size - 1:
                next_non_terminal, next_values = 1.0 - float(done), last_value
            else:
                next_non_terminal, next_values = 1.0 - self.episode_starts[step + 1], self.values[step + 1]
            delta = self.rewards[step] + self.gamma * next_values * next_non_terminal - self.values[step]
            last_gae_lam = delta + self.gamma * self.gae_lambda * next_non_terminal * last_gae_lam
            self.advantages[step] = last_gae_lam
        self.returns = self.advantages + self.values

    def get(self, batch_size):
        indices = np.random.permutation(self.buffer_size)
        start_idx = 0
        while start_idx < self.buffer_size:
            idx = indices[start_idx:start_idx + batch_size]
            yield (torch.as_tensor(self.observations[idx]), torch.as_tensor(self.actions[idx]),
                   torch.as_tensor(self.values[idx]), torch.as_tensor(self.log_probs[idx]),
                   torch.as_tensor(self.advantages[idx]), torch.as_tensor(self.returns[idx]))
            start_idx += batch_size


class PPO:
    def __init__(self, env, learning_rate=1e-3, n_steps=65, batch_size=64, n_epochs=10, gamma=0.98,
                 gae_lambda=0.8, clip_range=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5):
        self.env = env
        self.n_steps, self.batch_size, self.n_epochs = n_steps, batch_size, n_epochs
        self.clip_range, self.ent_coef, self.vf_coef = clip_range, ent_coef, vf_coef
        self.max_grad_norm = max_grad_norm
        self.policy = ActorCriticPolicy(4, 2)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=learning_rate, eps=1e-5)
        self.rollout_buffer = RolloutBuffer(n_steps, 4, gamma, gae_lambda)
        self.num_timesteps = 0
        self._n_updates = 0
        self.ep_info_buffer = []

    def collect_rollouts(self):
        self.rollout_buffer.reset()
        self.policy.eval()
        for _ in range(self.n_steps):
            with torch.no_grad():
                actions, values, log_probs = self.policy(torch.as_tensor(self._last_obs).unsqueeze(0))
            action = int(actions.item())
            new_obs, reward, terminated, truncated = self.env.step(action)
            self.num_timesteps += 1
            self._ep_return += reward
            if truncated and not terminated:
                with torch.no_grad():
                    reward += 0.98 * self.policy.predict_values(torch.as_tensor(new_obs).unsqueeze(0)).item()
            self.rollout_buffer.add(self._last_obs, action, reward, self._last_episode_start,
                                    values.item(), log_probs.item())
            done = terminated or truncated
            if done:
                self.ep_info_buffer = (self.ep_info_buffer + [self._ep_return])[-100:]
                self._ep_return = 0.0
                new_obs = self.env.reset()
            self._last_obs, self._last_episode_start = new_obs, float(done)
        with torch.no_grad():
            last_value = self.policy.predict_values(torch.as_tensor(self._last_obs).unsqueeze(0)).item()
        self.rollout_buffer.compute_returns_and_advantage(last_value, self._last_episode_start)

    def train(self):
        self.policy.train()
        pg_losses, value_losses, clip_fractions = [], [], []
        for epoch in range(self.n_epochs):
            for obs, actions, old_values, old_log_prob, advantages, returns in self.rollout_buffer.get(self.batch_size):
                values, log_prob, entropy = self.policy.evaluate_actions(obs, actions)
                values = values.flatten()
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                ratio = torch.exp(log_prob - old_log_prob)
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * torch.clamp(ratio, 1 - self.clip_range, 1 + self.clip_range)
                policy_loss = -torch.min(policy_loss_1, policy_loss_2).mean()
                value_loss = F.mse_loss(returns, values)
                entropy_loss = -torch.mean(entropy)
                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss

                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.optimizer.step()
                pg_losses.append(policy_loss.item())
                value_losses.append(value_loss.item())
                clip_fractions.append(torch.mean((torch.abs(ratio - 1) > self.clip_range).float()).item())
            self._n_updates += 1
        return np.mean(pg_losses), np.mean(value_losses), np.mean(clip_fractions), loss.item()

    def learn(self, total_timesteps, log_interval=10):
        self._last_obs, self._last_episode_start, self._ep_return = self.env.reset(), 1.0, 0.0
        iteration, start = 0, time.time()
        while self.num_timesteps < total_timesteps:
            self.collect_rollouts()
            iteration += 1
            pg_loss, v_loss, clip_frac, loss = self.train()
            if iteration == 1 or iteration % log_interval == 0:
                ep_rew = np.mean(self.ep_info_buffer) if self.ep_info_buffer else float("nan")
                print(f"| iter {iteration:4d} | timesteps {self.num_timesteps:6d} | ep_rew_mean {ep_rew:7.1f} "
                      f"| loss {loss:8.4f} | pg_loss {pg_loss:8.4f} | value_loss {v_loss:8.3f} "
                      f"| clip_frac {clip_frac:.3f} | n_updates {self._n_updates} | {time.time() - start:5.1f}s |")
        return self


env = CartPoleEnv(seed=SEED)
model = PPO(env, n_steps=65, batch_size=64)
model.learn(total_timesteps=6_500)
