"""A pooling block that builds its layers inside forward (``fixed``: once, in __init__), and one built
lazily at the first forward and kept as a part of the model, which is no bug; a slice of its own layers
(``self.blocks[:-1]`` makes a new ModuleList at every call) holds no new weights either."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
FIXED = "fixed" in sys.argv[1:]


class Pool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Linear(3, 8)
        self.conv = nn.Conv1d(8, 8, 1) if FIXED else None
        self.head = None
        self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = self.conv if FIXED else nn.Conv1d(8, 8, 1)
        if self.head is None:
            self.head = nn.Linear(8, 2)
        features = nn.ReLU()(conv(self.mlp(x).transpose(1, 2))).mean(2)
        for block in self.blocks[:-1]:
            features = block(features)
        return self.head(features)


model = Pool()
model(torch.randn(2, 5, 3))  # builds the head before the optimizer, as a lazy model is meant to be used
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(32, 5, 3), torch.randint(0, 2, (32,))
for step in range(30):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
