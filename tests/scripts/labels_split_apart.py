"""Inputs and labels split by two separate random_split calls: each draws its own permutation, so the i-th
input of the training split is paired with another sample's label (fastai#1276's warning, in plain PyTorch)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, random_split


class Windows(Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


torch.manual_seed(0)
labels = torch.randint(0, 4, (1200,))
inputs = torch.randn(1200, 16) + 2.0 * nn.functional.one_hot(labels, 16).float()
train_x, val_x = random_split(inputs, [1000, 200])
train_y, val_y = random_split(labels, [1000, 200])
loader = DataLoader(Windows(train_x, train_y), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 4))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(20):
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
