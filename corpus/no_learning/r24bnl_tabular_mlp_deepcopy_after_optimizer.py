"""Credit-default style tabular classifier: an MLP with embeddings for the categorical columns.

The rows are generated here (numeric columns + two categorical columns, three risk classes).
The untouched initial network is kept so that several runs can start from the same weights;
training works on a deep copy of it.
"""
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(7)
np.random.seed(7)

N_NUM = 12
CARD = (9, 6)
N_CLASSES = 3


def make_table(n, rng):
    num = rng.normal(size=(n, N_NUM)).astype(np.float32)
    cat = np.stack([rng.integers(0, c, size=n) for c in CARD], axis=1)
    score = num @ np.random.default_rng(0).normal(size=(N_NUM, N_CLASSES))
    score += np.random.default_rng(1).normal(size=(CARD[0], N_CLASSES))[cat[:, 0]] * 1.5
    score += np.random.default_rng(2).normal(size=(CARD[1], N_CLASSES))[cat[:, 1]] * 1.5
    y = score.argmax(axis=1)
    return num, cat, y


class CreditDataset(Dataset):
    def __init__(self, num, cat, y):
        self.num = torch.from_numpy(num)
        self.cat = torch.from_numpy(cat).long()
        self.y = torch.from_numpy(y).long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.num[i], self.cat[i], self.y[i]


class TabularNet(nn.Module):
    def __init__(self, n_num, cardinalities, n_classes, emb_dim=4, hidden=64):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(c, emb_dim) for c in cardinalities])
        self.bn_num = nn.BatchNorm1d(n_num)
        self.mlp = nn.Sequential(
            nn.Linear(n_num + emb_dim * len(cardinalities), hidden),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x_num, x_cat):
        embs = [emb(x_cat[:, i]) for i, emb in enumerate(self.embeddings)]
        return self.mlp(torch.cat([self.bn_num(x_num)] + embs, dim=1))


def evaluate(net, loader, criterion):
    net.eval()
    total, correct, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x_num, x_cat, y in loader:
            out = net(x_num, x_cat)
            loss_sum += criterion(out, y).item() * y.size(0)
            correct += (out.argmax(1) == y).sum().item()
            total += y.size(0)
    return loss_sum / total, correct / total


def main():
    rng = np.random.default_rng(3)
    train_ds = CreditDataset(*make_table(4096, rng))
    val_ds = CreditDataset(*make_table(1024, rng))
    train_loader = DataLoader(train_ds, batch_size=128, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=512)

    model = TabularNet(N_NUM, CARD, N_CLASSES)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-5)
    criterion = nn.CrossEntropyLoss()

    net = copy.deepcopy(model)
    for epoch in range(6):
        net.train()
        running, batches = 0.0, 0
        for x_num, x_cat, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(net(x_num, x_cat), y)
            loss.backward()
            optimizer.step()
            running += loss.item()
            batches += 1
        val_loss, val_acc = evaluate(net, val_loader, criterion)
        print(f"epoch {epoch + 1}: train loss {running / batches:.4f}  val loss {val_loss:.4f}  val acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
