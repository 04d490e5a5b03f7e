"""Small CNN image classifier (10 classes, CIFAR-sized 3x32x32 inputs) trained with Adam.

The images are generated: each class is a colour/orientation pattern with random phase,
contrast and noise, normalised like torchvision's ToTensor + Normalize(0.5, 0.5).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class PatternCIFAR(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        ys, xs = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
        palette = torch.rand(10, 3, 1, 1, generator=torch.Generator().manual_seed(1234))
        imgs = []
        for c in self.labels.tolist():
            ang = c * math.pi / 10
            freq = 0.35 + 0.05 * (c % 3)
            phase = 2 * math.pi * torch.rand(1, generator=g)
            wave = torch.sin(freq * (xs * math.cos(ang) + ys * math.sin(ang)) + phase)
            contrast = 0.5 + 0.5 * torch.rand(1, generator=g)
            img = palette[c] * (0.5 + 0.5 * contrast * wave) + 0.15 * torch.randn(3, 32, 32, generator=g)
            imgs.append(img.clamp(0, 1))
        self.images = (torch.stack(imgs) - 0.5) / 0.5

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 16, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.fc1 = nn.Linear(32 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 32 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


trainloader = DataLoader(PatternCIFAR(3200, seed=1), batch_size=64, shuffle=True)
testloader = DataLoader(PatternCIFAR(1000, seed=2), batch_size=250)

model = Net()
criterion = nn.CrossEntropyLoss()
optimizer = optim.Adam(model.parameters(), lr=0.1)

for epoch in range(4):
    running_loss = 0.0
    for i, (inputs, labels) in enumerate(trainloader):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        if i % 10 == 9:
            print(f"[{epoch + 1}, {i + 1:3d}] loss: {running_loss / 10:.4f}")
            running_loss = 0.0

    correct = total = 0
    with torch.no_grad():
        for images, labels in testloader:
            predicted = model(images).argmax(1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    print(f"epoch {epoch} loss = {loss.item()}  test accuracy {100 * correct / total:.1f} %")
