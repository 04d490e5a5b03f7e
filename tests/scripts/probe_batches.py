"""Batches of every shape a probe must handle: dicts with a model called by keyword, nested tuples,
or no DataLoader at all (with an nn.Module loss or a functional one). Deterministic, unshuffled."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

KIND = sys.argv[1]
EPOCHS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
torch.manual_seed(0)
X = torch.randn(128, 6)
Y = (X[:, 0] + X[:, 1] > 0).long()


class DictData(Dataset):
    def __len__(self):
        return len(X)

    def __getitem__(self, i):
        return {"features": X[i], "label": Y[i]}


class NestedData(Dataset):
    def __len__(self):
        return len(X)

    def __getitem__(self, i):
        return (X[i, :3], X[i, 3:]), Y[i]


class KeywordModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, features=None, left=None, right=None):
        if features is None:
            features = torch.cat([left, right], dim=1)
        return self.net(features)


model = KeywordModel()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
criterion = nn.CrossEntropyLoss()


def batches():
    if KIND == "dict":
        yield from DataLoader(DictData(), batch_size=16)
    elif KIND == "nested":
        yield from DataLoader(NestedData(), batch_size=16)
    else:
        for start in range(0, len(X), 16):
            yield X[start:start + 16], Y[start:start + 16]


for epoch in range(EPOCHS):
    for batch in batches():
        if KIND == "dict":
            logits, labels = model(features=batch["features"]), batch["label"]
        elif KIND == "nested":
            (left, right), labels = batch
            logits = model(left=left, right=right)
        else:
            logits, labels = model(batch[0]), batch[1]
        if KIND == "functional":
            loss = -torch.log_softmax(logits, dim=1).gather(1, labels[:, None]).mean()
        else:
            loss = criterion(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("checksum", sum(float(p.double().sum()) for p in model.parameters()))
