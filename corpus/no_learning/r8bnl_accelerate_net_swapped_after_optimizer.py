"""Human-activity recognition from accelerometer windows, trained with accelerate.

Two candidate architectures are defined: a baseline MLP on the flattened window (Net) and a
1-D conv net (Net2). The run starts from the baseline, and when the config asks for the conv
architecture the network is switched before training.

Synthetic data: 3-axis windows of 64 samples for 4 activities (still, walking, running,
cycling), told apart by the frequency and axis of their oscillation, with gravity on z,
noise and random amplitude.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch import optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

config = {"arch": "conv", "lr": 3e-3, "epochs": 4, "batch_size": 32}
ACTIVITIES = ["still", "walking", "running", "cycling"]


class HARWindows(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(64).float() / 32.0
        self.y = torch.randint(0, 4, (n,), generator=g)
        amp = 0.5 + torch.rand(n, generator=g)
        phase = 2 * math.pi * torch.rand(n, generator=g)
        x = 0.3 * torch.randn(n, 3, 64, generator=g)
        x[:, 2] += 1.0
        for i in range(n):
            k = int(self.y[i])
            if k == 1:
                x[i, 0] += amp[i] * torch.sin(2 * math.pi * 2 * t + phase[i])
            elif k == 2:
                x[i, 0] += 2 * amp[i] * torch.sin(2 * math.pi * 4 * t + phase[i])
                x[i, 2] += amp[i] * torch.sin(2 * math.pi * 4 * t + phase[i])
            elif k == 3:
                x[i, 1] += amp[i] * torch.sin(2 * math.pi * 1.5 * t + phase[i])
        self.x = x

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3 * 64, 64)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Net2(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 16, 5, padding=2)
        self.conv2 = nn.Conv1d(16, 32, 5, padding=2)
        self.conv3 = nn.Conv1d(32, 32, 5, padding=2)
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        x = F.max_pool1d(F.relu(self.conv1(x)), 2)
        x = F.max_pool1d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.conv3(x))
        return self.fc(x.mean(dim=2))


def evaluate(net, loader):
    net.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (net(x).argmax(1) == y).sum().item()
            total += y.numel()
    net.train()
    return correct / total


def main():
    accelerator = Accelerator(cpu=True)
    train_loader = DataLoader(HARWindows(1600, seed=1), batch_size=config["batch_size"], shuffle=True)
    val_loader = DataLoader(HARWindows(400, seed=2), batch_size=200)

    net1 = Net()  # 1st network
    optimizer = optim.Adam(net1.parameters(), lr=config["lr"])
    accelerator.print("baseline Net: %d parameters" % sum(p.numel() for p in net1.parameters()))

    if config["arch"] == "conv":
        net1 = Net2()  # another network
        accelerator.print("switched to Net2: %d parameters" % sum(p.numel() for p in net1.parameters()))

    net1, optimizer, train_loader, val_loader = accelerator.prepare(net1, optimizer, train_loader, val_loader)
    criterion = nn.CrossEntropyLoss()

    step = 0
    for epoch in range(config["epochs"]):
        net1.train()
        running = 0.0
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(net1(x), y)
            accelerator.backward(loss)
            optimizer.step()
            running += loss.item()
            step += 1
            if step % 25 == 0:
                accelerator.print("epoch %d step %d loss %.4f" % (epoch, step, running / 25))
                running = 0.0
        accelerator.print("epoch %d: val acc %.3f" % (epoch, evaluate(net1, val_loader)))


if __name__ == "__main__":
    main()
