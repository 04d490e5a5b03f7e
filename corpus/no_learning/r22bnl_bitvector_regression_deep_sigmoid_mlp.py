"""Regression from binary configuration vectors to a real-valued score.

Each sample is a 48-bit configuration (feature switches) and the target is the measured score
of that configuration, which depends on single bits and on pairs of interacting bits.
Model: a fully connected network, four hidden layers of 500 units, trained with MSE.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_BITS = 48
HIDDEN = 500
N_HIDDEN_LAYERS = 4
EPOCHS = 4
BATCH_SIZE = 100


class BitVectorDataset(Dataset):
    def __init__(self, bits, scores):
        self.bits = torch.from_numpy(bits)
        self.scores = torch.from_numpy(scores).unsqueeze(1)

    def __len__(self):
        return len(self.bits)

    def __getitem__(self, idx):
        return self.bits[idx], self.scores[idx]


def make_data(n, rng):
    bits = rng.integers(0, 2, size=(n, N_BITS)).astype(np.float32)
    single = rng.normal(0, 1, size=N_BITS)
    pairs = rng.integers(0, N_BITS, size=(24, 2))
    pair_w = rng.normal(0, 2, size=24)
    scores = bits @ single
    for (a, b), w in zip(pairs, pair_w):
        scores = scores + w * bits[:, a] * bits[:, b]
    return bits, scores.astype(np.float32)


class ScoreNet(nn.Module):
    def __init__(self, n_in, hidden, n_layers):
        super().__init__()
        layers = []
        d = n_in
        for _ in range(n_layers):
            layers.append(nn.Linear(d, hidden))
            layers.append(nn.Sigmoid())
            d = hidden
        self.hidden = nn.Sequential(*layers)
        self.out = nn.Linear(d, 1)

    def forward(self, x):
        return self.out(self.hidden(x))


def evaluate(model, loader, criterion):
    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for x, y in loader:
            total += criterion(model(x), y).item() * len(x)
            n += len(x)
    model.train()
    return total / n


def main():
    rng = np.random.default_rng(0)
    bits, scores = make_data(6000, rng)
    train_set = BitVectorDataset(bits[:5000], scores[:5000])
    val_set = BitVectorDataset(bits[5000:], scores[5000:])
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=500)
    print("val score variance (MSE of predicting the mean): %.3f" % float(np.var(scores[5000:])))

    model = ScoreNet(N_BITS, HIDDEN, N_HIDDEN_LAYERS)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()

    for epoch in range(EPOCHS):
        running = 0.0
        for step, (x, y) in enumerate(train_loader):
            pred = model(x)
            loss = criterion(pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            if step % 10 == 0:
                print("epoch %d step %2d train mse %.3f" % (epoch, step, loss.item()))
        print("epoch %d  mean train mse %.3f  val mse %.3f" % (
            epoch, running / len(train_loader), evaluate(model, val_loader, criterion)))


if __name__ == "__main__":
    main()
