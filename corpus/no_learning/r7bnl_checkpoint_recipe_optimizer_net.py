"""CIFAR-10-style classifier (the 60-minute-blitz Net: two conv layers, three linear layers)
trained with SGD + momentum, with checkpointing done as in the PyTorch recipe "Saving and
loading a general checkpoint": the freshly initialised network and optimizer are saved as a
general checkpoint (epoch, model and optimizer state_dicts, loss) so that every run of a sweep
starts from the same weights, and training then starts by loading that checkpoint.

Synthetic 32x32 RGB images: ten classes, each a coloured shape (disc, bar, ring, cross...)
on a noisy background.
"""
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

CLASSES = ("disc", "square", "hbar", "vbar", "ring", "cross", "diag", "corner", "dots", "frame")


def make_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 32), torch.linspace(-1, 1, 32), indexing="ij")
    labels = torch.randint(0, 10, (n,), generator=g)
    imgs = 0.3 * torch.randn(n, 3, 32, 32, generator=g)
    for i in range(n):
        c = (torch.rand(2, generator=g) - 0.5) * 0.6
        x, y = xx - c[0], yy - c[1]
        r = (x ** 2 + y ** 2).sqrt()
        masks = [r < 0.4, (x.abs() < 0.35) & (y.abs() < 0.35), y.abs() < 0.12, x.abs() < 0.12,
                 (r > 0.3) & (r < 0.5), (x.abs() < 0.1) | (y.abs() < 0.1), (x - y).abs() < 0.15,
                 (x > 0.2) & (y > 0.2), (torch.sin(9 * x) * torch.sin(9 * y)) > 0.6,
                 (x.abs() > 0.55) | (y.abs() > 0.55)]
        colour = torch.tensor([[1.0, -0.5, -0.5], [-0.5, 1.0, -0.5], [-0.5, -0.5, 1.0]])[labels[i] % 3]
        imgs[i] += masks[labels[i]].float() * colour.view(3, 1, 1)
    return TensorDataset(imgs, labels)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.flatten(start_dim=1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def train_one_epoch(model, optimizer, criterion, loader, epoch):
    model.train()
    running_loss = 0.0
    for i, (inputs, labels) in enumerate(loader):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        if i % 10 == 9:
            print(f"[{epoch + 1}, {i + 1:3d}] loss: {running_loss / 10:.3f}")
            running_loss = 0.0
    return loss.item()


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for inputs, labels in loader:
            correct += (model(inputs).argmax(1) == labels).sum().item()
            total += labels.numel()
    return correct / total


def main():
    trainloader = DataLoader(make_images(1600, seed=1), batch_size=16, shuffle=True)
    testloader = DataLoader(make_images(400, seed=2), batch_size=100)
    criterion = nn.CrossEntropyLoss()

    net = Net()
    optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    with tempfile.TemporaryDirectory() as tmp_dir:
        EPOCH = 0
        PATH = os.path.join(tmp_dir, "init_checkpoint.pt")
        LOSS = float("inf")
        torch.save({
            'epoch': EPOCH,
            'model_state_dict': net.state_dict(),
            'optimizer_state_dict': optimizer.state_dict(),
            'loss': LOSS,
        }, PATH)

        model = Net()
        optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

        checkpoint = torch.load(PATH)
        model.load_state_dict(checkpoint['model_state_dict'])
        optimizer.load_state_dict(checkpoint['optimizer_state_dict'])
        epoch = checkpoint['epoch']
        loss = checkpoint['loss']
        print(f"Loaded checkpoint {os.path.basename(PATH)} (epoch {epoch}, loss {loss})")

        model.train()
        for epoch in range(epoch, 2):
            train_one_epoch(model, optimizer, criterion, trainloader, epoch)
            print(f"Accuracy of the network on the test images: {100 * evaluate(model, testloader):.1f} %")
    print("Finished Training")


if __name__ == "__main__":
    main()
