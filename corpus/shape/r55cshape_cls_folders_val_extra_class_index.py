"""Small CNN image classifier trained from a train/ and val/ folder layout
(one sub-folder per class, like a YOLO-cls / ImageFolder dataset)."""
import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

TRAIN_CLASSES = ["cat", "dog", "fox", "owl"]
VAL_CLASSES = ["cat", "dog", "fox", "owl", "rabbit"]


def write_split(root, split, classes, per_class, gen):
    for k, name in enumerate(classes):
        d = os.path.join(root, split, name)
        os.makedirs(d, exist_ok=True)
        colour = torch.zeros(3, 1, 1)
        colour[k % 3] = 1.0 + (k // 3)
        for i in range(per_class):
            img = colour * (0.5 + 0.5 * torch.rand(1, 16, 16, generator=gen)) + 0.6 * torch.randn(3, 16, 16, generator=gen)
            torch.save(img, os.path.join(d, "%s_%03d.pt" % (name, i)))


class ClassificationFolder(Dataset):
    def __init__(self, root, classes=None):
        self.root = root
        self.classes = classes if classes is not None else sorted(os.listdir(root))
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for c in self.classes:
            cdir = os.path.join(root, c)
            if not os.path.isdir(cdir):
                continue
            for f in sorted(os.listdir(cdir)):
                self.samples.append((os.path.join(cdir, f), self.class_to_idx[c]))
        print("%s: found %d images in %d classes" % (root, len(self.samples), len(self.classes)))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        path, target = self.samples[idx]
        return torch.load(path), target


class SmallCNN(nn.Module):
    def __init__(self, nc):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, nc)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))


with tempfile.TemporaryDirectory() as root:
    gen = torch.Generator().manual_seed(0)
    write_split(root, "train", TRAIN_CLASSES, 80, gen)
    write_split(root, "val", VAL_CLASSES, 24, gen)

    train_set = ClassificationFolder(os.path.join(root, "train"))
    val_set = ClassificationFolder(os.path.join(root, "val"))
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=32)

    nc = len(train_set.classes)
    model = SmallCNN(nc)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for epoch in range(5):
        model.train()
        total, correct, running = 0, 0, 0.0
        for step, (imgs, targets) in enumerate(train_loader):
            preds = model(imgs)
            loss = criterion(preds, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            correct += (preds.argmax(1) == targets).sum().item()
            total += targets.numel()
            if step % 10 == 0:
                print("epoch %d step %d loss %.4f" % (epoch, step, loss.item()))
        model.eval()
        val_loss, vcorrect, vtotal = 0.0, 0, 0
        with torch.no_grad():
            for imgs, targets in val_loader:
                preds = model(imgs)
                val_loss += criterion(preds, targets).item() * targets.numel()
                vcorrect += (preds.argmax(1) == targets).sum().item()
                vtotal += targets.numel()
        print("epoch %d train loss %.4f acc %.3f | val loss %.4f top1 %.3f" % (
            epoch, running / len(train_loader), correct / total, val_loss / vtotal, vcorrect / vtotal))
