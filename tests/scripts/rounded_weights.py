"""Fake-quantised training: the weights are rounded to a 4-bit grid in the forward."""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class QuantLinear(nn.Linear):
    def forward(self, x):
        scale = self.weight.detach().abs().max() / 7
        return F.linear(x, torch.round(self.weight / scale) * scale, torch.round(self.bias * 8) / 8)


torch.manual_seed(0)
x = torch.randn(1024, 8)
y = (x[:, 0] > 0).long()
model = nn.Sequential(QuantLinear(8, 16), nn.ReLU(), QuantLinear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    for inputs, targets in DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True):
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
