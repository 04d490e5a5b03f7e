"""LoRA-style adapters inside blocks run under a reentrant checkpoint, after a frozen stem: no input of the
checkpoint requires grad, so torch warns and the adapters get no gradient; only the head trains."""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(8, 16).requires_grad_(False)
        self.blocks = nn.ModuleList(nn.Linear(16, 16) for _ in range(2))
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=True)
        return self.head(h)


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
for step in range(200):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
