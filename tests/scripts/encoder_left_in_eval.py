"""A pretrained-style encoder whose loader ends with .eval(): its batch norm never normalises the raw
sensor scale while the head trains."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def load_encoder():
    encoder = nn.Sequential(nn.BatchNorm1d(8), nn.Linear(8, 32), nn.Tanh())
    encoder.eval()
    return encoder


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = load_encoder()
        self.head = nn.Linear(32, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


torch.manual_seed(0)
x = torch.randn(1024, 8)
y = (x[:, 0] + x[:, 1] > 0).long()
x = x * 300 + 2000
model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(4):
    for inputs, targets in DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True):
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
