"""LoRA adapters trained without optimizer.zero_grad(): A starts random and B at zero, so A's first
gradient is zero and the accumulation shows from the second step on."""

import torch
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int = 4) -> None:
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(rank, base.in_features) * 0.1)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + x @ self.lora_a.T @ self.lora_b.T


torch.manual_seed(0)
model = LoRALinear(nn.Linear(16, 4))
optimizer = torch.optim.SGD([model.lora_a, model.lora_b], lr=0.01)
x, y = torch.randn(128, 16), torch.randint(0, 4, (128,))
for step in range(200):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
