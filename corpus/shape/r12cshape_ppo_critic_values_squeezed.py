"""PPO with a shared actor-critic policy on a vectorised synthetic control task.

Each env step shows the agent a context vector; the best of 4 actions depends on the context and
every state carries a context-dependent base reward, so the critic has something to learn. A
rollout of `num_steps` x `num_envs` transitions is collected with the values predicted at
rollout time, GAE advantages and returns are computed, and the policy and value head are updated
for a few PPO epochs with clipped policy and value losses.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical

torch.manual_seed(0)

OBS_DIM, N_ACTIONS = 12, 4


class ContextEnv:
    """Vectorised env: reward = base(obs) + 1.0 if the action matches the context's best action."""

    def __init__(self, num_envs, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.g = g
        self.num_envs = num_envs
        self.W = torch.randn(OBS_DIM, N_ACTIONS, generator=g)
        self.v = torch.randn(OBS_DIM, generator=g)
        self.t = torch.zeros(num_envs, dtype=torch.long)
        self.obs = self._sample()

    def _sample(self):
        return torch.randn(self.num_envs, OBS_DIM, generator=self.g)

    def step(self, action):
        best = (self.obs @ self.W).argmax(-1)
        reward = torch.tanh(self.obs @ self.v) * 3.0 + (action == best).float()
        self.t += 1
        done = (self.t % 8 == 0).float()
        self.obs = self._sample()
        return self.obs, reward, done


class ActorCritic(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(OBS_DIM, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.action_head = nn.Linear(hidden, N_ACTIONS)
        self.value_head = nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.action_head(h), self.value_head(h)


def compute_critic_loss(values, prev_values, returns, value_clip):
    values_clipped = prev_values + (values - prev_values).clamp(-value_clip, value_clip)
    loss_unclipped = (returns - values) ** 2
    loss_clipped = (returns - values_clipped) ** 2
    return 0.5 * torch.max(loss_unclipped, loss_clipped).mean()


def compute_actor_loss(logprobs, old_logprobs, advantages, clip_ratio):
    ratio = torch.exp(logprobs - old_logprobs)
    surr1 = ratio * advantages
    surr2 = ratio.clamp(1 - clip_ratio, 1 + clip_ratio) * advantages
    return -torch.min(surr1, surr2).mean()


def main():
    num_envs, num_steps = 64, 16
    gamma, gae_lambda = 0.5, 0.95
    update_epochs, num_minibatches = 4, 4
    clip_ratio, value_clip, vf_coef, ent_coef = 0.2, 0.2, 0.5, 0.01
    num_iterations = 12

    env = ContextEnv(num_envs)
    policy = ActorCritic()
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    obs = env.obs

    for it in range(num_iterations):
        obs_buf, act_buf, logp_buf, rew_buf, done_buf, val_buf = [], [], [], [], [], []
        with torch.no_grad():
            for _ in range(num_steps):
                logits, value = policy(obs)
                dist = Categorical(logits=logits)
                action = dist.sample()
                obs_buf.append(obs)
                act_buf.append(action)
                logp_buf.append(dist.log_prob(action))
                val_buf.append(value)                        # (num_envs, 1)
                obs, reward, done = env.step(action)
                rew_buf.append(reward.unsqueeze(-1))
                done_buf.append(done.unsqueeze(-1))
            _, next_value = policy(obs)

        values = torch.stack(val_buf)                        # (T, N, 1)
        rewards = torch.stack(rew_buf)
        dones = torch.stack(done_buf)
        advantages = torch.zeros_like(rewards)
        lastgaelam = torch.zeros_like(next_value)
        for t in reversed(range(num_steps)):
            nv = next_value if t == num_steps - 1 else values[t + 1]
            nonterminal = 1.0 - dones[t]
            delta = rewards[t] + gamma * nv * nonterminal - values[t]
            lastgaelam = delta + gamma * gae_lambda * nonterminal * lastgaelam
            advantages[t] = lastgaelam
        returns = advantages + values

        b_obs = torch.cat(obs_buf)
        b_actions = torch.cat(act_buf)
        b_logprobs = torch.cat(logp_buf)
        b_values = values.reshape(-1, 1)
        b_returns = returns.reshape(-1, 1)
        b_advantages = advantages.reshape(-1)
        batch_size = b_obs.shape[0]
        mb_size = batch_size // num_minibatches

        for epoch in range(update_epochs):
            perm = torch.randperm(batch_size)
            for start in range(0, batch_size, mb_size):
                idx = perm[start:start + mb_size]
                logits, new_value = policy(b_obs[idx])
                new_value = new_value.squeeze(-1)
                dist = Categorical(logits=logits)
                logprobs = dist.log_prob(b_actions[idx])
                mb_adv = b_advantages[idx]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)

                actor_loss = compute_actor_loss(logprobs, b_logprobs[idx], mb_adv, clip_ratio)
                critic_loss = compute_critic_loss(new_value, b_values[idx], b_returns[idx], value_clip)
                entropy = dist.entropy().mean()
                loss = actor_loss + vf_coef * critic_loss - ent_coef * entropy

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
                optimizer.step()

        with torch.no_grad():
            _, v_now = policy(b_obs)
            v_now = v_now.reshape(-1)
            y = b_returns.reshape(-1)
            explained_var = 1 - ((y - v_now).var() / y.var()).item()
            value_mse = ((y - v_now) ** 2).mean().item()
        print(f"iter {it:2d}  mean reward {rewards.mean().item():.3f}  critic loss {critic_loss.item():.3f}  "
              f"value mse {value_mse:.3f}  explained var {explained_var:.3f}")


if __name__ == "__main__":
    main()
