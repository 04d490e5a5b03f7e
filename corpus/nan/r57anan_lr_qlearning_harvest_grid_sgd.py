"""Deep Q-learning agent (experience replay, epsilon-greedy) for a small grid game:
the basket on the bottom row catches falling apples and must dodge falling rocks.
Same setup as the qlearning4k Catch example, ported to PyTorch."""
import random

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)

EMPTY, BASKET, APPLE, ROCK = 0, 1, 2, 3


class Harvest:
    nb_actions = 3

    def __init__(self, grid_size=10, max_turns=25):
        self.grid_size = grid_size
        self.max_turns = max_turns
        self.reset()

    def reset(self):
        self.basket = self.grid_size // 2
        self.items = []
        self.turn = 0
        self.score = 0
        self.last_reward = 0
        self.over = False

    def play(self, action):
        self.basket = int(np.clip(self.basket + action - 1, 0, self.grid_size - 1))
        self.items = [(r + 1, c, kind) for r, c, kind in self.items]
        reward = 0
        kept = []
        for r, c, kind in self.items:
            if r == self.grid_size - 1:
                if c == self.basket:
                    if kind == APPLE:
                        reward += 50
                    else:
                        reward -= 100
                        self.over = True
            else:
                kept.append((r, c, kind))
        self.items = kept
        if np.random.random() < 0.6:
            kind = APPLE if np.random.random() < 0.7 else ROCK
            self.items.append((0, np.random.randint(self.grid_size), kind))
        self.turn += 1
        self.score += reward
        self.last_reward = reward
        if self.turn >= self.max_turns:
            self.over = True

    def get_frame(self):
        canvas = np.zeros((self.grid_size, self.grid_size), dtype=np.float32)
        for r, c, kind in self.items:
            canvas[r, c] = kind
        canvas[-1, self.basket] = BASKET
        return canvas

    def get_score(self):
        return self.last_reward

    def is_over(self):
        return self.over

    def is_won(self):
        return self.over and self.score >= 150


class ExperienceReplay:
    def __init__(self, memory_size=1000):
        self.memory = []
        self.memory_size = memory_size

    def remember(self, s, a, r, s_prime, game_over):
        self.memory.append((s, a, r, s_prime, float(game_over)))
        if len(self.memory) > self.memory_size:
            self.memory.pop(0)

    def get_batch(self, model, batch_size, gamma=0.9):
        batch_size = min(batch_size, len(self.memory))
        samples = random.sample(self.memory, batch_size)
        S = torch.tensor(np.stack([s for s, _, _, _, _ in samples]))
        a = torch.tensor([a for _, a, _, _, _ in samples])
        r = torch.tensor([r for _, _, r, _, _ in samples], dtype=torch.float32)
        S_prime = torch.tensor(np.stack([sp for _, _, _, sp, _ in samples]))
        game_over = torch.tensor([g for _, _, _, _, g in samples])
        with torch.no_grad():
            Y = model(torch.cat([S, S_prime], dim=0))
        Qsa = Y[batch_size:].max(dim=1).values
        targets = Y[:batch_size].clone()
        targets[torch.arange(batch_size), a] = r + gamma * (1 - game_over) * Qsa
        return S, targets


def build_model(grid_size, nb_frames, hidden_size=100, nb_actions=3):
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(nb_frames * grid_size * grid_size, hidden_size), nn.ReLU(),
        nn.Linear(hidden_size, hidden_size), nn.ReLU(),
        nn.Linear(hidden_size, nb_actions),
    )


def train(model, game, nb_epoch=20, batch_size=50, gamma=0.9, epsilon=(1.0, 0.1), epsilon_rate=0.5):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    criterion = nn.MSELoss()
    memory = ExperienceReplay(memory_size=1000)
    delta = (epsilon[0] - epsilon[1]) / (nb_epoch * epsilon_rate)
    eps, final_eps = epsilon
    win_count = 0
    for epoch in range(nb_epoch):
        loss_sum = 0.0
        game.reset()
        S = game.get_frame()[None]
        while not game.is_over():
            if np.random.random() < eps:
                a = int(np.random.randint(game.nb_actions))
            else:
                with torch.no_grad():
                    q = model(torch.from_numpy(S[None]))
                a = int(q[0].argmax())
            game.play(a)
            r = game.get_score()
            S_prime = game.get_frame()[None]
            memory.remember(S, a, r, S_prime, game.is_over())
            S = S_prime
            inputs, targets = memory.get_batch(model, batch_size=batch_size, gamma=gamma)
            loss = criterion(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
        if game.is_won():
            win_count += 1
        if eps > final_eps:
            eps -= delta
        print(f"Epoch {epoch + 1:03d}/{nb_epoch:03d} | Loss {loss_sum:.4f} | Epsilon {eps:.2f} | "
              f"Score {game.score:4d} | Win count {win_count}")


def main():
    grid_size, nb_frames = 10, 1
    model = build_model(grid_size, nb_frames)
    game = Harvest(grid_size)
    train(model, game)


if __name__ == "__main__":
    main()
