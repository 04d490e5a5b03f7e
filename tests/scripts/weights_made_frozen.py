"""A layer written from scratch whose weight is made frozen: only the biases train."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Dense(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_in, n_out) / n_in ** 0.5, requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


torch.manual_seed(0)
x = torch.randn(2048, 16)
y = (x[:, :4].argmax(1) + (x[:, 4] > 0).long()) % 4
model = nn.Sequential(Dense(16, 64), nn.ReLU(), Dense(64, 4))
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for epoch in range(20):
    for inputs, targets in loader:
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
