"""Node features in a frozen table (most of the weights, fixed on purpose) feed a ReLU layer whose units are
all dead (a bias far below 0), and the output layer has no bias: every trainable weight gets a zero gradient."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = nn.Embedding.from_pretrained(features)
        self.encode = nn.Linear(features.shape[1], 16)
        self.out = nn.Linear(16, 1, bias=False)

    def forward(self, nodes):
        return self.out(torch.relu(self.encode(self.features(nodes))))


torch.manual_seed(0)
features = torch.randn(2000, 64)
target = features[:, :4].sum(1, keepdim=True)
model = Net(features)
with torch.no_grad():
    model.encode.bias.fill_(-50.0)
loader = DataLoader(TensorDataset(torch.arange(2000), target), batch_size=64, shuffle=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(20):
    for nodes, y in loader:
        loss = nn.functional.mse_loss(model(nodes), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
