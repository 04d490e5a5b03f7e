"""IRNN (ReLU RNN with identity-initialised recurrent weights, Le et al. 2015) on long sequences.

Each sequence is 200 noisy readings of a level; the model reads the whole sequence and
predicts the average level at the end.
"""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class LevelSequences(Dataset):
    def __init__(self, n, seq_len):
        self.level = torch.rand(n, 1)
        noise = 0.3 * torch.randn(n, seq_len, 1)
        self.x = self.level.unsqueeze(1) + noise
        self.y = self.level

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class IRNN(nn.Module):
    def __init__(self, input_size=1, hidden_size=64):
        super().__init__()
        self.rnn = nn.RNN(input_size, hidden_size, nonlinearity="relu", batch_first=True)
        nn.init.eye_(self.rnn.weight_hh_l0)
        nn.init.zeros_(self.rnn.bias_hh_l0)
        self.head = nn.Linear(hidden_size, 1)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq-len", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(LevelSequences(640, args.seq_len), batch_size=args.batch_size, shuffle=True)
    model = IRNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = nn.MSELoss()

    step = 0
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in train_loader:
            pred = model(x)
            loss = criterion(pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            if step % 5 == 0:
                print(f"epoch {epoch} step {step:3d} loss {loss.item():.4f}")
            step += 1
        print(f"epoch {epoch}: mean loss {total / len(train_loader):.4f}")


if __name__ == "__main__":
    main()
