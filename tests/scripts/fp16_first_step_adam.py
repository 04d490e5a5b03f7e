"""A float16 model (``.half()``) trained with Adam whose first forward already overflows float16 (the exp
of 11.5 is 98,715, past float16's 65,504): the first non-finite loss comes before any optimizer step."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(256, 8)
log_scale = torch.full((256, 1), 11.5)
y = torch.randn(256, 1)
loader = DataLoader(TensorDataset(x, log_scale, y), batch_size=32)
model = nn.Linear(8, 1).half()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for xb, sb, yb in loader:
        out = model(xb.half()) * torch.exp(sb.half()) / 1e5
        loss = ((out - yb.half()) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
