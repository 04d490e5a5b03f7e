"""Small CNN on a CIFAR-10-like image set, trained with Hugging Face accelerate.

The images are 3x32x32 tensors generated per class (a class colour and a class-specific
frequency pattern, plus noise). Class names are read from a label table, as in the
original CSV export of the data set.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
# label table exported with the data set: class id -> name
LABEL_TABLE = {i + 1: name for i, name in enumerate(CLASSES)}
NAME_TO_ID = {name: idx for idx, name in LABEL_TABLE.items()}


class Cifar10Variant(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        names = [CLASSES[i] for i in torch.randint(0, len(CLASSES), (n,), generator=g).tolist()]
        self.targets = [NAME_TO_ID[name] for name in names]
        colours = torch.rand(len(CLASSES), 3, 1, 1, generator=g)
        xs = torch.linspace(0, 1, 32)
        self.data = torch.empty(n, 3, 32, 32)
        for i, name in enumerate(names):
            k = CLASSES.index(name)
            wave = torch.sin(2 * torch.pi * (k + 1) * xs).view(1, 1, 32)
            self.data[i] = colours[k] * (1 + wave) + 0.2 * torch.randn(3, 32, 32, generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        return self.data[index], self.targets[index]


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(32 * 8 * 8, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def main():
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)

    train_ds = Cifar10Variant(1280, seed=0)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    model = Net(num_classes=len(CLASSES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()

    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)

    for epoch in range(3):
        model.train()
        running_loss = 0.0
        for i, (inputs, labels) in enumerate(train_loader):
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            accelerator.backward(loss)
            optimizer.step()
            running_loss += loss.item()
            if i % 5 == 4:
                accelerator.print(f"[{epoch + 1}, {i + 1:3d}] loss: {running_loss / 5:.3f}")
                running_loss = 0.0
    accelerator.print("Finished Training")


if __name__ == "__main__":
    main()
