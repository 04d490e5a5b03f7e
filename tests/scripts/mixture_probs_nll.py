"""A pointer-generator style output: a gate mixes a vocabulary softmax with a copy distribution, and the
mixed probabilities go to nn.NLLLoss as they are (it expects their log)."""

import torch
from torch import nn


class Mixer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vocab = nn.Linear(8, 5)
        self.copy = nn.Linear(8, 5)
        self.gate = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p_gen = torch.sigmoid(self.gate(x))
        return p_gen * torch.softmax(self.vocab(x), dim=1) + (1 - p_gen) * torch.softmax(self.copy(x), dim=1)


torch.manual_seed(0)
model = Mixer()
criterion = nn.NLLLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8), torch.randint(0, 5, (64,))
for step in range(200):
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
