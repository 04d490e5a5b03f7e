"""A classifier that learns, evaluated every epoch under torch.no_grad() on a held-out split whose classes
are numbered by another list (one class missing from it shifts every later class by one, as when each split
lists its own class folders). ``aligned`` numbers the held-out split as the training split."""

import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 5
torch.manual_seed(0)
centres = torch.randn(CLASSES, 16) * 3


def split(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    labels = torch.randint(0, CLASSES, (size,))
    return centres[labels] + torch.randn(size, 16), labels


train_x, train_y = split(640)
val_x, val_y = split(200)
if sys.argv[1:] != ["aligned"]:
    val_y = (val_y + 1) % CLASSES
train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=32, shuffle=True)
val_loader = DataLoader(TensorDataset(val_x, val_y), batch_size=50)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, CLASSES))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(4):
    model.train()
    for x, y in train_loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            scores = model(x)
            val_loss = F.cross_entropy(scores, y)
            correct += int((scores.argmax(1) == y).sum())
    print(f"epoch {epoch}: validation loss {val_loss:.3f}, accuracy {correct / len(val_y):.2f}")
