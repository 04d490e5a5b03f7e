"""Train a small convolutional classifier on 12x12 "images" (bars and crosses in noise).

The config holds the base learning rate of the recipe; this classification stage
trains with a fifth of it. A Trainer class keeps the model, the optimizer and the
per-epoch learning-rate plan.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

config = {
    "lr": 0.01,
    "batch_size": 32,
    "epochs": 5,
    "epoch_decay_start": 3,
    "adjust_lr": 0,
    "num_classes": 4,
    "seed": 1,
}


class PatternDataset(Dataset):
    """Class 0: horizontal bar, 1: vertical bar, 2: diagonal, 3: cross; at a random offset, in noise."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        imgs = 0.6 * torch.randn(n, 1, 12, 12, generator=g)
        offsets = torch.randint(2, 10, (n,), generator=g)
        idx = torch.arange(12)
        for i in range(n):
            c, o = self.labels[i].item(), offsets[i].item()
            if c == 0:
                imgs[i, 0, o, :] += 1.5
            elif c == 1:
                imgs[i, 0, :, o] += 1.5
            elif c == 2:
                imgs[i, 0, idx, idx] += 1.5
            else:
                imgs[i, 0, o, :] += 1.0
                imgs[i, 0, :, o] += 1.0
        self.images = imgs

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class SmallCNN(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 3 * 3, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


class Trainer:
    def __init__(self, config):
        self.lr = config["lr"]
        self.epochs = config["epochs"]
        self.adjust_lr = config["adjust_lr"]

        # linear decay of the rate after epoch_decay_start
        self.alpha_plan = [self.lr] * self.epochs
        for i in range(config["epoch_decay_start"], self.epochs):
            self.alpha_plan[i] = float(self.epochs - i) / (self.epochs - config["epoch_decay_start"]) * self.lr

        self.model = SmallCNN(config["num_classes"])
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.lr // 5)

    def adjust_learning_rate(self, epoch):
        for param_group in self.optimizer.param_groups:
            param_group["lr"] = self.alpha_plan[epoch]

    def train(self, train_loader, epoch):
        self.model.train()
        if self.adjust_lr:
            self.adjust_learning_rate(epoch)
        total, n = 0.0, 0
        for i, (images, labels) in enumerate(train_loader):
            logits = self.model(images)
            loss = F.cross_entropy(logits, labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item() * len(labels)
            n += len(labels)
            if i % 10 == 0:
                print("Epoch [%d/%d] Iter [%d/%d] loss: %.4f" % (epoch + 1, self.epochs, i, len(train_loader), loss.item()))
        return total / n

    def evaluate(self, test_loader):
        self.model.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for images, labels in test_loader:
                pred = self.model(images).argmax(dim=1)
                correct += (pred == labels).sum().item()
                total += labels.size(0)
        return 100.0 * correct / total


def main():
    torch.manual_seed(config["seed"])
    train_loader = DataLoader(PatternDataset(1280, seed=10), batch_size=config["batch_size"], shuffle=True)
    test_loader = DataLoader(PatternDataset(400, seed=11), batch_size=200)

    trainer = Trainer(config)
    for epoch in range(config["epochs"]):
        train_loss = trainer.train(train_loader, epoch)
        acc = trainer.evaluate(test_loader)
        print("Epoch %d: train loss %.4f, test accuracy %.2f%%" % (epoch + 1, train_loss, acc))


if __name__ == "__main__":
    main()
