"""EGNN-style: the output (coordinates) is made by ops from one layer, while the last layer the forward runs updates
features that this last block leaves unused. Healthy: the unused layer gets no gradient and never moves."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.coord, self.update = nn.Linear(8, 32), nn.Linear(32, 2), nn.Linear(32, 32)

    def forward(self, x):
        h = torch.relu(self.embed(x))
        out = x[:, :2] + self.coord(h)
        h = self.update(h)
        return out


torch.manual_seed(0)
x = torch.randn(512, 8)
y = x[:, :2] + 0.5 * x[:, 2:4]
model = Block()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(400):
    batch = torch.randint(0, 512, (32,))
    loss = nn.functional.mse_loss(model(x[batch]), y[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
