"""Staged fine-tuning: the backbone is frozen while the head warms up, then "unfrozen" with its own
rate; the mixin's set_trainable only ever touches parameters that already require grad."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainable:
    def set_trainable(self, trainable=False):
        for p in self.backbone.parameters():
            if p.requires_grad:
                p.requires_grad = trainable


class Net(nn.Module, Trainable):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 2))
        self.head = nn.Linear(2, 4)

    def forward(self, x):
        return self.head(self.backbone(x))


torch.manual_seed(0)
x = torch.randn(2048, 16)
y = (x[:, :4].argmax(1) + (x[:, 4] > 0).long()) % 4
model = Net()
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
model.set_trainable(False)
optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-3)
for inputs, targets in loader:
    loss = nn.functional.cross_entropy(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
model.set_trainable(True)
optimizer = torch.optim.Adam([{"params": model.backbone.parameters(), "lr": 1e-3},
                              {"params": model.head.parameters(), "lr": 1e-3}])
for epoch in range(20):
    for inputs, targets in loader:
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
