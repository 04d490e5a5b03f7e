"""MNIST-style CNN (the skorch tutorial network) on synthetic 28x28 digits.

Same network and hyper-parameters as the tutorial, trained with Adam.
The network outputs class probabilities and the loss is NLL on their log, as skorch's
NeuralNetClassifier does.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SyntheticDigits(Dataset):
    """Each class is a fixed stroke pattern; samples are the pattern plus noise, shifted a little."""

    def __init__(self, n, seed=0):
        patterns = (torch.rand(10, 28, 28, generator=torch.Generator().manual_seed(1234)) > 0.8).float()
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, 10, (n,), generator=g)
        imgs = patterns[self.y] + 0.3 * torch.rand(n, 28, 28, generator=g)
        shifts = torch.randint(-2, 3, (n,), generator=g)
        self.x = torch.stack([torch.roll(img, int(s), dims=1) for img, s in zip(imgs, shifts)]).unsqueeze(1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Cnn(nn.Module):
    def __init__(self, dropout=0.5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, kernel_size=3)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3)
        self.conv2_drop = nn.Dropout2d(p=dropout)
        self.fc1 = nn.Linear(1600, 100)
        self.fc2 = nn.Linear(100, 10)
        self.fc1_drop = nn.Dropout(p=dropout)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, x.size(1) * x.size(2) * x.size(3))
        x = F.relu(self.fc1_drop(self.fc1(x)))
        x = F.softmax(self.fc2(x), dim=-1)
        return x


def main():
    parser = argparse.ArgumentParser(description="synthetic MNIST CNN")
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(SyntheticDigits(1024, seed=0), batch_size=args.batch_size, shuffle=True)
    valid_loader = DataLoader(SyntheticDigits(320, seed=1), batch_size=256)

    model = Cnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.NLLLoss()

    for epoch in range(args.epochs):
        model.train()
        train_loss = 0.0
        for batch_idx, (xb, yb) in enumerate(train_loader):
            y_proba = model(xb)
            loss = criterion(torch.log(y_proba), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
            if batch_idx % 5 == 0:
                print(f"epoch {epoch} batch {batch_idx:2d} loss {loss.item():.4f}")
        model.eval()
        correct = 0
        with torch.no_grad():
            for xb, yb in valid_loader:
                correct += (model(xb).argmax(1) == yb).sum().item()
        print(f"epoch {epoch}: train_loss {train_loss / len(train_loader):.4f}  "
              f"valid_acc {correct / len(valid_loader.dataset):.4f}")


if __name__ == "__main__":
    main()
