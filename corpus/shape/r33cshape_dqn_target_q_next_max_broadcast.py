"""DQN (replay buffer + target network) on a small synthetic MDP.

The environment is a random 16-state, 4-action MDP whose states are observed as noisy
8-dimensional feature vectors. Because the MDP is known, the optimal Q-values are computed by
value iteration and used to report how close the learned Q-network gets.
"""
import random
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)

N_STATES, N_ACTIONS, OBS_DIM = 16, 4, 8
GAMMA = 0.9
BATCH_SIZE = 64
TARGET_UPDATE_FREQ = 10
LEARNING_STARTS = 500
NUM_STEPS = 300

Transition = namedtuple("Transition", "obs act rew next_obs done")


class RandomMDP:
    def __init__(self, seed=0):
        rng = np.random.RandomState(seed)
        self.next_state = rng.randint(0, N_STATES, size=(N_STATES, N_ACTIONS))
        self.reward = rng.uniform(-1, 1, size=(N_STATES, N_ACTIONS)).astype(np.float32)
        self.terminal = rng.uniform(size=(N_STATES, N_ACTIONS)) < 0.1
        self.features = rng.normal(size=(N_STATES, OBS_DIM)).astype(np.float32)
        self.rng = rng
        self.state = 0

    def observe(self, s):
        return self.features[s] + 0.05 * self.rng.normal(size=OBS_DIM).astype(np.float32)

    def reset(self):
        self.state = self.rng.randint(N_STATES)
        return self.observe(self.state)

    def step(self, a):
        s = self.state
        r, done = self.reward[s, a], bool(self.terminal[s, a])
        self.state = self.next_state[s, a]
        return self.observe(self.state), r, done

    def optimal_q(self, iters=200):
        q = np.zeros((N_STATES, N_ACTIONS), dtype=np.float32)
        for _ in range(iters):
            v = q.max(1)
            q = self.reward + GAMMA * (1 - self.terminal) * v[self.next_state]
        return q


class ReplayBuffer:
    def __init__(self, size):
        self.size = size
        self.memory = []

    def push(self, *args):
        if len(self.memory) >= self.size:
            self.memory.pop(0)
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        batch = random.sample(self.memory, batch_size)
        obs = torch.from_numpy(np.stack([t.obs for t in batch]))
        act = torch.tensor([t.act for t in batch], dtype=torch.long)
        rew = torch.tensor([t.rew for t in batch], dtype=torch.float32)
        next_obs = torch.from_numpy(np.stack([t.next_obs for t in batch]))
        done = torch.tensor([t.done for t in batch], dtype=torch.float32)
        return obs, act, rew, next_obs, done


class DQN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(OBS_DIM, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, N_ACTIONS)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def evaluate(Q, env, q_star):
    with torch.no_grad():
        q = Q(torch.from_numpy(env.features)).numpy()
    q_err = float(np.abs(q - q_star).mean())
    agree = float((q.argmax(1) == q_star.argmax(1)).mean())
    return q_err, agree


def dqn_learn():
    env = RandomMDP(seed=3)
    q_star = env.optimal_q()
    Q = DQN()
    target_Q = DQN()
    target_Q.load_state_dict(Q.state_dict())
    optimizer = torch.optim.Adam(Q.parameters(), lr=3e-3)
    replay_buffer = ReplayBuffer(10000)

    obs = env.reset()
    for _ in range(LEARNING_STARTS):
        a = random.randrange(N_ACTIONS)
        next_obs, r, done = env.step(a)
        replay_buffer.push(obs, a, r, next_obs, done)
        obs = env.reset() if done else next_obs

    num_param_updates = 0
    for t in range(NUM_STEPS):
        a = random.randrange(N_ACTIONS)
        next_obs, r, done = env.step(a)
        replay_buffer.push(obs, a, r, next_obs, done)
        obs = env.reset() if done else next_obs

        obs_batch, act_batch, rew_batch, next_obs_batch, done_mask = replay_buffer.sample(BATCH_SIZE)
        current_Q_values = Q(obs_batch).gather(1, act_batch.unsqueeze(1))
        next_max_q = target_Q(next_obs_batch).detach().max(1)[0]
        next_Q_values = (1 - done_mask) * next_max_q
        target_Q_values = rew_batch + (GAMMA * next_Q_values)
        bellman_error = target_Q_values - current_Q_values
        loss = bellman_error.pow(2).mean()

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        num_param_updates += 1

        if num_param_updates % TARGET_UPDATE_FREQ == 0:
            target_Q.load_state_dict(Q.state_dict())

        if t % 50 == 0 or t == NUM_STEPS - 1:
            q_err, agree = evaluate(Q, env, q_star)
            print(f"step {t:4d}  loss {loss.item():.4f}  |Q - Q*| {q_err:.3f}  "
                  f"greedy action agrees with Q* on {agree:.2f} of states")


if __name__ == "__main__":
    dqn_learn()
