"""zero_grad() between backward() and step() in a loop fed by a DataLoader: every step applies nothing."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(512, 8)
y = x @ torch.randn(8, 1)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(3):
    for inputs, targets in DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True):
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
