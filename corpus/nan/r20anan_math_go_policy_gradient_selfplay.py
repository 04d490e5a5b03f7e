"""Policy-gradient self-play for a small connection game (5x5 board, four in a row wins),
following the recipe of "Deep Learning and the Game of Go", chapter 10: a policy network plays
games against itself, every decision is recorded together with the final outcome of the game
(+1 for the winner's moves, -1 for the loser's), and the network is trained with categorical
cross-entropy against a target vector that holds the reward at the move that was played.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

BOARD = 5
WIN = 4
NUM_MOVES = BOARD * BOARD
NUM_GAMES = 160
EPOCHS = 4
LR = 1e-3
BATCH_SIZE = 64


class ConnectGame:
    def __init__(self):
        self.board = np.zeros((BOARD, BOARD), dtype=np.int8)
        self.next_player = 1
        self.winner = 0
        self.moves = 0

    def is_valid_move(self, idx):
        return self.board[idx // BOARD, idx % BOARD] == 0

    def is_over(self):
        return self.winner != 0 or self.moves == NUM_MOVES

    def _line_length(self, r, c, dr, dc):
        p = self.board[r, c]
        n = 0
        r, c = r + dr, c + dc
        while 0 <= r < BOARD and 0 <= c < BOARD and self.board[r, c] == p:
            n += 1
            r, c = r + dr, c + dc
        return n

    def apply_move(self, idx):
        r, c = idx // BOARD, idx % BOARD
        self.board[r, c] = self.next_player
        self.moves += 1
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            if 1 + self._line_length(r, c, dr, dc) + self._line_length(r, c, -dr, -dc) >= WIN:
                self.winner = self.next_player
        self.next_player = -self.next_player


def encode(game):
    """Two planes from the point of view of the player to move: own stones, opponent stones."""
    own = (game.board == game.next_player).astype(np.float32)
    opp = (game.board == -game.next_player).astype(np.float32)
    return np.stack([own, opp])


class PolicyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1)
        self.dense = nn.Linear(32 * NUM_MOVES, 256)
        self.out = nn.Linear(256, NUM_MOVES)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.dense(x.flatten(1)))
        return F.softmax(self.out(x), dim=1)


class ExperienceCollector:
    def __init__(self):
        self.states, self.actions, self.rewards = [], [], []
        self._episode_states, self._episode_actions = [], []

    def begin_episode(self):
        self._episode_states, self._episode_actions = [], []

    def record_decision(self, state, action):
        self._episode_states.append(state)
        self._episode_actions.append(action)

    def complete_episode(self, reward):
        self.states += self._episode_states
        self.actions += self._episode_actions
        self.rewards += [reward] * len(self._episode_actions)


class PolicyAgent:
    def __init__(self, model, temperature=0.05):
        self.model = model
        self.temperature = temperature
        self.collector = None

    def select_move(self, game):
        board_tensor = encode(game)
        if np.random.random() < self.temperature:
            move_probs = np.ones(NUM_MOVES) / NUM_MOVES
        else:
            with torch.no_grad():
                move_probs = self.model(torch.from_numpy(board_tensor)[None])[0].double().numpy()
        eps = 1e-5
        move_probs = np.clip(move_probs, eps, 1 - eps)
        move_probs = move_probs / np.sum(move_probs)
        ranked_moves = np.random.choice(np.arange(NUM_MOVES), NUM_MOVES, replace=False, p=move_probs)
        for idx in ranked_moves:
            if game.is_valid_move(idx):
                if self.collector is not None:
                    self.collector.record_decision(board_tensor, idx)
                return idx


def simulate_game(black, white):
    game = ConnectGame()
    agents = {1: black, -1: white}
    while not game.is_over():
        game.apply_move(agents[game.next_player].select_move(game))
    return game.winner


class ExperienceDataset(Dataset):
    def __init__(self, collectors):
        self.states = np.concatenate([np.array(c.states) for c in collectors])
        self.actions = np.concatenate([np.array(c.actions) for c in collectors])
        self.rewards = np.concatenate([np.array(c.rewards, dtype=np.float32) for c in collectors])

    def __len__(self):
        return len(self.actions)

    def __getitem__(self, i):
        y = np.zeros(NUM_MOVES, dtype=np.float32)
        y[self.actions[i]] = self.rewards[i]
        return torch.from_numpy(self.states[i]), torch.from_numpy(y)


def categorical_crossentropy(y_pred, y_true):
    return -(y_true * torch.log(y_pred)).sum(dim=1).mean()


def self_play(model, num_games):
    agent1, agent2 = PolicyAgent(model), PolicyAgent(model)
    c1, c2 = ExperienceCollector(), ExperienceCollector()
    agent1.collector, agent2.collector = c1, c2
    wins = draws = 0
    model.eval()
    for g in range(num_games):
        c1.begin_episode()
        c2.begin_episode()
        if g % 2 == 0:
            winner = simulate_game(agent1, agent2)
            r1 = winner
        else:
            winner = simulate_game(agent2, agent1)
            r1 = -winner
        c1.complete_episode(r1)
        c2.complete_episode(-r1)
        wins += winner == 1
        draws += winner == 0
    print(f"self-play: {num_games} games, first player won {wins}, draws {draws}")
    return ExperienceDataset([c1, c2])


def main():
    model = PolicyNet()
    experience = self_play(model, NUM_GAMES)
    print(f"experience: {len(experience)} decisions")
    loader = DataLoader(experience, batch_size=BATCH_SIZE, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    step = 0
    for epoch in range(EPOCHS):
        model.train()
        losses = []
        for states, targets in loader:
            probs = model(states)
            loss = categorical_crossentropy(probs, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch + 1} step {step} loss {loss.item():.4f}")
        print(f"Epoch {epoch + 1}/{EPOCHS} - loss: {np.mean(losses):.4f}")


if __name__ == "__main__":
    main()
