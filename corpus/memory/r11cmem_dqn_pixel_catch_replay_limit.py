"""Deep Q-learning on a pixel version of the "catch" game.

A ball falls from the top of a 128x128 screen and the agent moves a paddle left/right/stay to
catch it. The agent sees the last 4 frames; Q-values come from a small conv net. The agent
keeps a replay memory of transitions (trimmed to `memory_limit`) and learns from random
minibatches, with a target network synced every few episodes.
"""
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)


class PixelCatch:
    size = 128
    paddle = 16

    def reset(self):
        self.ball_x = np.random.randint(4, self.size - 4)
        self.ball_y = 0
        self.vx = np.random.choice([-2, -1, 0, 1, 2])
        self.paddle_x = self.size // 2
        return self.render()

    def render(self):
        frame = np.zeros((self.size, self.size), dtype=np.float32)
        frame[self.ball_y:self.ball_y + 3, self.ball_x - 1:self.ball_x + 2] = 1.0
        lo = max(0, self.paddle_x - self.paddle // 2)
        frame[-3:, lo:lo + self.paddle] = 1.0
        return frame

    def step(self, action):
        self.paddle_x = int(np.clip(self.paddle_x + (action - 1) * 8, self.paddle // 2, self.size - self.paddle // 2))
        self.ball_y += 4
        self.ball_x += self.vx
        if self.ball_x < 2 or self.ball_x > self.size - 3:
            self.vx = -self.vx
            self.ball_x = int(np.clip(self.ball_x, 2, self.size - 3))
        done = self.ball_y >= self.size - 4
        reward = -abs(self.ball_x - self.paddle_x) / self.size
        if done:
            reward = 1.0 if abs(self.ball_x - self.paddle_x) <= self.paddle // 2 + 1 else -1.0
        return self.render(), reward, done


class QNetwork(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.conv1 = nn.Conv2d(4, 16, kernel_size=8, stride=8)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=4, stride=2)
        self.fc = nn.Linear(32 * 7 * 7, 128)
        self.out = nn.Linear(128, n_actions)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.fc(x.flatten(1)))
        return self.out(x)


class DQN:
    def __init__(self, n_episodes=40, gamma=0.95, batch_size=32, epsilon=1.0, decay=0.01,
                 min_epsilon=0.05, memory_limit=200, train_every=4, target_update=5):
        self.n_episodes = n_episodes
        self.gamma = gamma
        self.batch_size = batch_size
        self.epsilon = epsilon
        self.decay = decay
        self.min_epsilon = min_epsilon
        self.memory_limit = memory_limit
        self.train_every = train_every
        self.target_update = target_update
        self.replay = []

    def init_environment(self):
        self.env = PixelCatch()
        self.actions = 3

    def init_model(self):
        self.model = QNetwork(self.actions)
        self.target = QNetwork(self.actions)
        self.target.load_state_dict(self.model.state_dict())
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def choose_action(self, state):
        if np.random.rand() <= self.epsilon:
            return np.random.randint(self.actions)
        with torch.no_grad():
            return int(self.model(state.unsqueeze(0)).argmax(1))

    def train_batch(self):
        batch = random.sample(self.replay, min(len(self.replay), self.batch_size))
        states = torch.stack([b[0] for b in batch])
        actions = torch.tensor([b[1] for b in batch])
        rewards = torch.tensor([b[2] for b in batch])
        next_states = torch.stack([b[3] for b in batch])
        dones = torch.tensor([b[4] for b in batch], dtype=torch.float32)
        with torch.no_grad():
            target = rewards + self.gamma * (1 - dones) * self.target(next_states).max(1).values
        q = self.model(states).gather(1, actions[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def train(self):
        step, rewards, losses = 0, [], []
        for ep in range(self.n_episodes):
            frame = torch.from_numpy(self.env.reset())
            state = torch.stack([frame] * 4)
            done, ep_reward = False, 0.0
            while not done:
                action = self.choose_action(state)
                frame, reward, done = self.env.step(action)
                new_state = torch.cat([state[1:], torch.from_numpy(frame)[None]])
                self.replay.append([state, action, reward, new_state, done])
                state = new_state
                ep_reward += reward
                step += 1
                if step % self.train_every == 0:
                    losses.append(self.train_batch())
            self.epsilon = max(self.min_epsilon, self.epsilon * (1 - self.decay * 10))
            if ep % self.target_update == 0:
                self.target.load_state_dict(self.model.state_dict())

            # Remove old entries from replay memory
            if len(self.replay) > self.memory_limit:
                self.replay.pop(0)

            rewards.append(ep_reward)
            if (ep + 1) % 5 == 0:
                print(f"episode {ep + 1:3d}  steps {step:5d}  replay {len(self.replay):5d}  "
                      f"eps {self.epsilon:.2f}  mean reward(5) {np.mean(rewards[-5:]):+.2f}  "
                      f"loss {np.mean(losses[-50:]):.4f}")


def main():
    agent = DQN()
    agent.init_environment()
    agent.init_model()
    agent.train()


if __name__ == "__main__":
    main()
