"""Advantage actor-critic (single-worker version of an A3C worker) for a continuous-action task.

PointReach: a point on a line has to be driven to a goal. The state is (position, goal),
the action is a velocity in [-2, 2], the reward is minus the distance to the goal after the
move, and an episode lasts 25 steps. The actor is a Gaussian policy (mu and sigma heads),
the critic a state-value network; both are updated once per episode from the discounted
returns of that episode.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal

torch.manual_seed(0)
np.random.seed(0)

device = torch.device("cpu")


class PointReachEnv:
    def __init__(self, max_steps=25, seed=0):
        self.rng = np.random.RandomState(seed)
        self.max_steps = max_steps

    def reset(self):
        self.t = 0
        self.pos = self.rng.uniform(-1, 1)
        self.goal = self.rng.uniform(-1, 1)
        return np.array([self.pos, self.goal], dtype=np.float32)

    def step(self, action):
        a = float(np.clip(action, -2.0, 2.0))
        self.pos = float(np.clip(self.pos + 0.15 * a, -2.0, 2.0))
        self.t += 1
        reward = -abs(self.pos - self.goal)
        done = self.t >= self.max_steps
        return np.array([self.pos, self.goal], dtype=np.float32), reward, done, {}


class ValueNetwork(nn.Module):
    def __init__(self, input_dim, output_dim):
        super(ValueNetwork, self).__init__()
        self.fc1 = nn.Linear(input_dim, 128)
        self.fc2 = nn.Linear(128, output_dim)

    def forward(self, state):
        value = F.relu(self.fc1(state))
        return self.fc2(value)


class ActorContinous(nn.Module):
    def __init__(self, state_size, action_size):
        super(ActorContinous, self).__init__()
        self.fc1 = nn.Linear(state_size, 128)
        self.fc2 = nn.Linear(128, 128)
        self.mu_head = nn.Linear(128, action_size)
        self.sigma_head = nn.Linear(128, action_size)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        mu = 2.0 * torch.tanh(self.mu_head(x))
        sigma = F.softplus(self.sigma_head(x)) + 1e-3
        return (mu, sigma)

    def act(self, state):
        (mu, sigma) = self.forward(state)
        dist = Normal(mu, sigma)
        action = dist.sample()
        action_log_prob = dist.log_prob(action)
        return action.item(), action_log_prob


class Worker:
    def __init__(self, env, state_size, action_size, gamma=0.9):
        self.env = env
        self.gamma = gamma
        self.memory = []
        self.valueNet = ValueNetwork(state_size, 1).to(device)
        self.policyNet = ActorContinous(state_size, action_size).to(device)
        self.value_optimizer = torch.optim.Adam(self.valueNet.parameters(), lr=1e-3)
        self.policy_optimizer = torch.optim.Adam(self.policyNet.parameters(), lr=1e-3)

    def calculate_loss(self):
        # get experiences from current trajectory
        states = torch.tensor(np.array([t[0] for t in self.memory]), dtype=torch.float)
        log_probs = torch.tensor([t[2] for t in self.memory], dtype=torch.float).view(-1, 1)

        # -- calculate discount future rewards for every time step
        rewards = [t[3] for t in self.memory]
        fur_Rewards = []
        for i in range(len(rewards)):
            discount = [self.gamma ** k for k in range(len(rewards) - i)]
            f_rewards = rewards[i:]
            fur_Rewards.append(sum(d * f for d, f in zip(discount, f_rewards)))
        fur_Rewards = torch.tensor(fur_Rewards, dtype=torch.float).view(-1, 1)

        # calculate loss for critic
        V = self.valueNet(states)
        value_loss = F.mse_loss(fur_Rewards, V)

        # compute entropy for policy loss
        (mu, sigma) = self.policyNet(states)
        dist = Normal(mu, sigma)
        entropy = 0.5 + 0.5 * math.log(2 * math.pi) + torch.log(dist.scale)  # exploration

        # calculate loss for actor
        advantage = (fur_Rewards - V).detach()
        policy_loss = -advantage * log_probs
        policy_loss = (policy_loss - 0.005 * entropy).mean()

        return value_loss, policy_loss

    def update(self):
        value_loss, policy_loss = self.calculate_loss()

        self.value_optimizer.zero_grad()
        value_loss.backward()
        self.value_optimizer.step()

        self.policy_optimizer.zero_grad()
        policy_loss.backward()
        self.policy_optimizer.step()

        self.memory = []  # clear trajectory
        return value_loss.item(), policy_loss.item()

    def run(self, max_epi):
        avg_reward = None
        for episode in range(1, max_epi + 1):
            state = self.env.reset()
            total_reward = 0.0
            while True:
                state_t = torch.from_numpy(state).float().unsqueeze(0).to(device)
                action, log_prob = self.policyNet.act(state_t)
                next_state, reward, done, _ = self.env.step(action)
                self.memory.append([state, action, log_prob, reward, next_state, done])
                total_reward += reward
                state = next_state
                if done:
                    break
            avg_reward = total_reward if avg_reward is None else 0.95 * avg_reward + 0.05 * total_reward
            value_loss, policy_loss = self.update()
            if episode % 25 == 0:
                print("episode: {:4d}  episode reward: {:7.3f}  avg reward: {:7.3f}  value loss: {:.4f}  policy loss: {:+.4f}"
                      .format(episode, total_reward, avg_reward, value_loss, policy_loss))
        return avg_reward


if __name__ == "__main__":
    env = PointReachEnv(max_steps=25, seed=1)
    worker = Worker(env, state_size=2, action_size=1, gamma=0.9)
    final = worker.run(max_epi=200)
    print("final moving-average episode reward: {:.3f}".format(final))
