"""10-class classifier on 28x28 grayscale images (synthetic "digits": a class template plus noise).

Softmax output layer and a hand-written cross-entropy averaged over the classes.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(7)

NB_CLASSES = 10
DIM = 28


def make_templates():
    templates = torch.zeros(NB_CLASSES, DIM, DIM)
    for c in range(NB_CLASSES):
        for _ in range(4):
            r, col = torch.randint(4, DIM - 8, (2,)).tolist()
            h, w = torch.randint(2, 8, (2,)).tolist()
            templates[c, r:r + h, col:col + w] = 1.0
    return templates


class SyntheticDigits(Dataset):
    def __init__(self, n, templates):
        self.labels = torch.randint(0, NB_CLASSES, (n,))
        noise = torch.rand(n, DIM, DIM) * 90
        imgs = templates[self.labels] * 180 + noise
        self.images = imgs.clamp(0, 255).to(torch.uint8)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


def average_cross_entropy(outputs, targets):
    one_hot = nn.functional.one_hot(targets, NB_CLASSES).float()
    cross_entropies = -(one_hot * torch.log(outputs) + (1 - one_hot) * torch.log(1 - outputs))
    return cross_entropies.mean()


templates = make_templates()
train_loader = DataLoader(SyntheticDigits(3000, templates), batch_size=64, shuffle=True)

model = nn.Sequential(
    nn.Flatten(),
    nn.Linear(DIM * DIM, 128),
    nn.ReLU(),
    nn.Linear(128, NB_CLASSES),
    nn.Softmax(dim=1),
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for epoch in range(2):
    correct, seen, running = 0, 0, 0.0
    for batch_idx, (x, y) in enumerate(train_loader):
        inp = x.float()
        outputs = model(inp)
        loss = average_cross_entropy(outputs, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        correct += (outputs.argmax(1) == y).sum().item()
        seen += len(y)
        if batch_idx % 15 == 0:
            print(f"epoch {epoch} batch {batch_idx:3d} loss {loss.item():.4f}")
    print(f"epoch {epoch}: mean loss {running / len(train_loader):.4f}  train acc {correct / seen:.3f}")
