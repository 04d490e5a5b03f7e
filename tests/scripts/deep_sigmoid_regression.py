"""A regression MLP with five hidden layers, each followed by a sigmoid."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randint(0, 2, (4096, 32)).float()
y = (x[:, :8] * torch.arange(1, 9)).sum(1, keepdim=True) + 3 * x[:, 8:10].prod(1, keepdim=True)
layers = []
for width_in in (32, 256, 256, 256, 256):
    layers += [nn.Linear(width_in, 256), nn.Sigmoid()]
model = nn.Sequential(*layers, nn.Linear(256, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(3):
    for inputs, targets in DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True):
        loss = nn.functional.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
