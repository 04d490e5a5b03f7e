"""Transfer learning for ants vs bees, following the PyTorch "Transfer Learning for Computer
Vision" tutorial (ConvNet as fixed feature extractor): freeze the backbone, replace fc by a new
2-way Linear, train only fc with SGD(lr=0.001, momentum=0.9) and StepLR(step_size=7,
gamma=0.1) inside train_model(), which runs a train and a val phase per epoch and keeps the
best weights.

No downloads here: the hymenoptera images are generated (244 train / 152 val, 32x32), and the
backbone is a small resnet-style stand-in whose "pretrained" weights come from a fixed seed.
"""
import copy
import time

import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
device = torch.device("cpu")


class HymenopteraSynthetic(Dataset):
    """ants: dark reddish bodies on green/brown; bees: yellow-black striped bodies on flowers."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 2, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, 32), torch.linspace(-1, 1, 32), indexing="ij")
        imgs = []
        for y in self.labels.tolist():
            bg = torch.tensor([0.35, 0.45, 0.2]) + 0.15 * torch.rand(3, generator=g)
            img = bg[:, None, None] * (0.8 + 0.4 * torch.rand(1, 32, 32, generator=g))
            cy, cx = (torch.rand(2, generator=g) - 0.5) * 0.8
            ang = torch.rand(1, generator=g) * 3.1416
            u = (xx - cx) * torch.cos(ang) + (yy - cy) * torch.sin(ang)
            v = -(xx - cx) * torch.sin(ang) + (yy - cy) * torch.cos(ang)
            body = ((u / 0.45) ** 2 + (v / 0.2) ** 2) < 1
            if y == 0:
                colour = torch.tensor([0.35, 0.1, 0.05])[:, None, None].expand(3, 32, 32)
            else:
                stripes = (torch.sin(u * 25) > 0).float()
                colour = torch.stack([0.9 * stripes + 0.1, 0.75 * stripes + 0.05, 0.1 * stripes])
            img = torch.where(body, colour, img)
            imgs.append(img + 0.05 * torch.randn(3, 32, 32, generator=g))
        self.images = torch.stack(imgs)
        mean = torch.tensor([0.485, 0.456, 0.406])[:, None, None]
        std = torch.tensor([0.229, 0.224, 0.225])[:, None, None]
        self.images = (self.images - mean) / std

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


image_datasets = {"train": HymenopteraSynthetic(244, seed=1), "val": HymenopteraSynthetic(152, seed=2)}
dataloaders = {x: DataLoader(image_datasets[x], batch_size=4, shuffle=True) for x in ["train", "val"]}
dataset_sizes = {x: len(image_datasets[x]) for x in ["train", "val"]}
class_names = ["ants", "bees"]


def conv_bn(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallResNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 32, 1), conv_bn(32, 64, 2), conv_bn(64, 64, 1),
                                      conv_bn(64, 128, 2), conv_bn(128, 128, 2))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


def pretrained_backbone():
    torch.manual_seed(2012)
    return SmallResNet()


def train_model(model, criterion, optimizer, scheduler, num_epochs=25):
    since = time.time()
    best_model_wts = copy.deepcopy(model.state_dict())
    best_acc = 0.0

    for epoch in range(num_epochs):
        print(f"Epoch {epoch}/{num_epochs - 1}")
        print("-" * 10)

        for phase in ["train", "val"]:
            if phase == "train":
                model.train()
            else:
                model.eval()

            running_loss = 0.0
            running_corrects = 0

            for inputs, labels in dataloaders[phase]:
                inputs = inputs.to(device)
                labels = labels.to(device)

                optimizer.zero_grad()

                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)

                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                        scheduler.step()

                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels.data)

            epoch_loss = running_loss / dataset_sizes[phase]
            epoch_acc = running_corrects.double() / dataset_sizes[phase]

            print(f"{phase} Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}")

            if phase == "val" and epoch_acc > best_acc:
                best_acc = epoch_acc
                best_model_wts = copy.deepcopy(model.state_dict())

        print()

    time_elapsed = time.time() - since
    print(f"Training complete in {time_elapsed // 60:.0f}m {time_elapsed % 60:.0f}s")
    print(f"Best val Acc: {best_acc:4f}")
    model.load_state_dict(best_model_wts)
    return model


model_conv = pretrained_backbone()
for param in model_conv.parameters():
    param.requires_grad = False

num_ftrs = model_conv.fc.in_features
model_conv.fc = nn.Linear(num_ftrs, 2)
model_conv = model_conv.to(device)

criterion = nn.CrossEntropyLoss()
optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.001, momentum=0.9)
exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=7, gamma=0.1)

model_conv = train_model(model_conv, criterion, optimizer_conv, exp_lr_scheduler, num_epochs=4)
