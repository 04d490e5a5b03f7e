"""Full-batch node classification whose bag-of-words rows are normalised by their sums: a node with
no words divides 0 by 0, numpy warns, and the first loss is NaN. The loss reads the model's output
at the training indices only (no nn.Module loss and no DataLoader)."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def main() -> None:
    rng = np.random.default_rng(0)
    features = (rng.random((120, 30)) < 0.2).astype(np.float32)
    features[[5, 77]] = 0.0
    features = features / features.sum(1, keepdims=True)
    labels = torch.from_numpy(rng.integers(0, 3, 120))
    idx_train = torch.arange(60)
    x = torch.from_numpy(features)
    model = nn.Sequential(nn.Linear(30, 16), nn.ReLU(), nn.Linear(16, 3), nn.LogSoftmax(dim=1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(100):
        optimizer.zero_grad()
        output = model(x)
        loss = F.nll_loss(output[idx_train], labels[idx_train])
        loss.backward()
        optimizer.step()


main()
