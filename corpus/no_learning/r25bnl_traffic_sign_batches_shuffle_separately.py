"""Traffic-sign classifier (small MLP on flattened 16x16 grayscale signs), mini-batches made by hand.

The sign images are generated here: 8 sign classes, each a noisy version of a class template.
"""
import math

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)

N_CLASSES = 8
IMG = 16


def make_signs(n, rng):
    templates = np.random.default_rng(42).normal(size=(N_CLASSES, IMG * IMG)).astype(np.float32)
    labels = rng.integers(0, N_CLASSES, size=n)
    features = templates[labels] + rng.normal(scale=1.5, size=(n, IMG * IMG)).astype(np.float32)
    return features, labels


def batches(batch_size, features, labels):
    """Split features and labels into shuffled batches of batch_size."""
    assert len(features) == len(labels)
    features = np.array(features)
    labels = np.array(labels)
    np.random.shuffle(features)
    np.random.shuffle(labels)
    output_batches = []
    for start in range(0, len(features), batch_size):
        end = start + batch_size
        output_batches.append([features[start:end], labels[start:end]])
    return output_batches


class SignNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(IMG * IMG, 128),
            nn.ReLU(),
            nn.Linear(128, 64),
            nn.ReLU(),
            nn.Linear(64, N_CLASSES),
        )

    def forward(self, x):
        return self.net(x)


def main():
    rng = np.random.default_rng(1)
    train_features, train_labels = make_signs(3200, rng)
    valid_features, valid_labels = make_signs(800, rng)
    valid_x = torch.from_numpy(valid_features)
    valid_y = torch.from_numpy(valid_labels).long()

    model = SignNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch_size = 128
    print(f"{math.ceil(len(train_features) / batch_size)} batches per epoch")

    for epoch in range(8):
        model.train()
        total, n = 0.0, 0
        for batch_features, batch_labels in batches(batch_size, train_features, train_labels):
            x = torch.from_numpy(batch_features)
            y = torch.from_numpy(batch_labels).long()
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
        model.eval()
        with torch.no_grad():
            logits = model(valid_x)
            valid_loss = criterion(logits, valid_y).item()
            valid_acc = (logits.argmax(1) == valid_y).float().mean().item()
        print(f"epoch {epoch + 1}: train loss {total / n:.4f}  valid loss {valid_loss:.4f}  valid acc {valid_acc:.3f}")


if __name__ == "__main__":
    main()
