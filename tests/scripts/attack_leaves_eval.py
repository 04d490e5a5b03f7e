"""Adversarial training: the attack puts the model in eval mode to craft its inputs and restores the mode it
saw when it was built (eval, right after the first evaluation)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Attack:
    def __init__(self, model):
        self.model = model
        self.training = model.training

    def __call__(self, x):
        self.model.eval()
        x = x + 0.01 * torch.randn_like(x)
        if self.training:
            self.model.train()
        return x


torch.manual_seed(0)
x = torch.randn(2048, 16)
y = (x[:, 0] > 0).long()
model = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 2))
model.eval()
attack = Attack(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(6):
    model.train()
    for inputs, targets in DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True):
        adversarial = attack(inputs)
        loss = nn.functional.cross_entropy(model(adversarial), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
