"""The topic layer's ReLU is applied functionally and its units are dead: a bias far below 0."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.topic = nn.Linear(32, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        theta = torch.relu(self.topic(self.hidden(x)))
        return self.out(theta)


torch.manual_seed(0)
x = torch.randn(1024, 16)
y = (x[:, 0] > 0).long()
model = Net()
with torch.no_grad():
    model.topic.bias.fill_(-50.0)
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(20):
    for inputs, targets in loader:
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
