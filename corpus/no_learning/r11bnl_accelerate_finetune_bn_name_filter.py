"""Fine-tune a small ResNet on a new 6-class image task with Hugging Face accelerate.

Transfer-learning recipe: load the backbone, keep the BatchNorm layers trainable
(they adapt to the new data statistics), freeze the rest, put a fresh `fc` on top.
Images are generated (class-specific oriented stripes plus noise).
"""
import argparse
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 6


def make_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    ys, xs = torch.meshgrid(torch.arange(32).float(), torch.arange(32).float(), indexing="ij")
    imgs = []
    for c in y.tolist():
        ang = c * 3.14159 / NUM_CLASSES
        stripes = torch.sin(0.8 * (xs * torch.cos(torch.tensor(ang)) + ys * torch.sin(torch.tensor(ang))))
        img = stripes.expand(3, 32, 32) + 0.5 * torch.randn(3, 32, 32, generator=g)
        imgs.append(img)
    return torch.stack(imgs), y


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResNetSmall(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.layer3 = BasicBlock(32, 64, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def load_backbone(path):
    model = ResNetSmall(num_classes=1000)
    model.load_state_dict(torch.load(path))
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args()
    torch.manual_seed(0)

    accelerator = Accelerator(cpu=True)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = f"{tmp}/backbone.pt"
        torch.save(ResNetSmall(num_classes=1000).state_dict(), ckpt)
        model = load_backbone(ckpt)

    model.fc = nn.Linear(model.fc.in_features, NUM_CLASSES)
    for name, param in model.named_parameters():
        if ("bn" not in name):
            param.requires_grad_(False)

    trainable = [p for p in model.parameters() if p.requires_grad]
    accelerator.print(f"trainable tensors: {len(trainable)} / {len(list(model.parameters()))}")
    optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=args.lr, momentum=0.9)

    x_tr, y_tr = make_images(768, seed=0)
    x_va, y_va = make_images(192, seed=1)
    train_dl = DataLoader(TensorDataset(x_tr, y_tr), batch_size=args.batch_size, shuffle=True)
    val_dl = DataLoader(TensorDataset(x_va, y_va), batch_size=64)
    model, optimizer, train_dl, val_dl = accelerator.prepare(model, optimizer, train_dl, val_dl)

    step = 0
    for epoch in range(args.epochs):
        model.train()
        for xb, yb in train_dl:
            loss = F.cross_entropy(model(xb), yb)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step % 20 == 0:
                accelerator.print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f}")
        model.eval()
        correct = 0
        with torch.no_grad():
            for xb, yb in val_dl:
                correct += (model(xb).argmax(1) == yb).sum().item()
        accelerator.print(f"epoch {epoch} val acc {correct / len(val_dl.dataset):.3f}")


if __name__ == "__main__":
    main()
