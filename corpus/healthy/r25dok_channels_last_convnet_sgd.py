"""Image classification with a small BN convnet trained in channels_last memory format, following
the PyTorch (beta) Channels Last Memory Format tutorial: the model and every input batch are
converted with .to(memory_format=torch.channels_last); the rest is an ordinary SGD + momentum loop
with a cosine schedule on synthetic 3x32x32 images."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class SyntheticImages(Dataset):
    def __init__(self, n, n_classes=10, seed=0):
        g = torch.Generator().manual_seed(seed)
        base = torch.Generator().manual_seed(123)
        protos = F.interpolate(torch.randn(n_classes, 3, 4, 4, generator=base), size=32, mode="bilinear",
                               align_corners=False)
        self.labels = torch.randint(0, n_classes, (n,), generator=g)
        shifts = torch.randint(-3, 4, (n, 2), generator=g)
        imgs = protos[self.labels] * (0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=g))
        self.images = torch.stack([im.roll(tuple(s.tolist()), dims=(1, 2)) for im, s in zip(imgs, shifts)])
        self.images = self.images + 1.5 * torch.randn(self.images.shape, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class Net(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 24, 3, padding=1, bias=False), nn.BatchNorm2d(24), nn.ReLU(inplace=True),
            nn.Conv2d(24, 24, 3, padding=1, bias=False), nn.BatchNorm2d(24), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(24, 48, 3, padding=1, bias=False), nn.BatchNorm2d(48), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(48, 48, 3, padding=1, bias=False), nn.BatchNorm2d(48), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(48, num_classes)

    def forward(self, x):
        x = self.features(x)
        return self.fc(torch.flatten(x, 1))


train_loader = DataLoader(SyntheticImages(1024, seed=1), batch_size=64, shuffle=True)
test_loader = DataLoader(SyntheticImages(512, seed=2), batch_size=128)

model = Net().to(memory_format=torch.channels_last)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
epochs = 4
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(train_loader))


def test():
    model.eval()
    correct, total, loss = 0, 0, 0.0
    with torch.no_grad():
        for images, target in test_loader:
            images = images.to(memory_format=torch.channels_last)
            output = model(images)
            loss += criterion(output, target).item() * len(target)
            correct += (output.argmax(1) == target).sum().item()
            total += len(target)
    return loss / total, correct / total


print("initial test loss {:.3f} acc {:.3f}".format(*test()))
for epoch in range(epochs):
    model.train()
    running = 0.0
    for i, (images, target) in enumerate(train_loader):
        images = images.to(memory_format=torch.channels_last)
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        running += loss.item()
        if i % 8 == 7:
            print(f"[{epoch + 1}, {i + 1:3d}] loss: {running / 8:.3f}")
            running = 0.0
    test_loss, test_acc = test()
    print(f"epoch {epoch + 1}: test loss {test_loss:.3f} test acc {test_acc:.3f}")
