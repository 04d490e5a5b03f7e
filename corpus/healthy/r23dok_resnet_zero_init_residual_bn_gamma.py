"""Small ResNet image classifier with zero_init_residual=True, built the way
torchvision/models/resnet.py builds it and trained like references/classification/train.py.

Every BasicBlock's last BatchNorm starts with weight (gamma) = 0, so each residual branch
initially outputs zero and every block is the identity ("Bag of Tricks", Goyal et al.).
The network is a CIFAR-style ResNet-10 (3x3 stem, no max-pool, widths 16/32/64/128) on a
synthetic 10-class "CIFAR": 3x16x16 images, each class a fixed smooth colour pattern plus noise.
SGD momentum 0.9 with no weight decay on norm parameters (set_weight_decay), label smoothing
0.1, a linear warm-up epoch then cosine decay (SequentialLR stepped per epoch).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=10, zero_init_residual=False, width=16):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


class SyntheticCifar(Dataset):
    def __init__(self, n, templates, noise=0.9, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, templates.shape[0], (n,), generator=g)
        shift = torch.randint(-2, 3, (n, 2), generator=g)
        imgs = templates[self.labels]
        imgs = torch.stack([torch.roll(im, (int(s[0]), int(s[1])), dims=(1, 2)) for im, s in zip(imgs, shift)])
        self.images = imgs + noise * torch.randn(imgs.shape, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


def set_weight_decay(model, weight_decay, norm_weight_decay=None):
    norm_classes = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)
    params = {"other": [], "norm": []}
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if norm_weight_decay is not None and isinstance(module, norm_classes):
                params["norm"].append(p)
            else:
                params["other"].append(p)
    groups = [{"params": params["other"], "weight_decay": weight_decay}]
    if params["norm"]:
        groups.append({"params": params["norm"], "weight_decay": norm_weight_decay})
    return groups


def evaluate(model, loader, criterion):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.inference_mode():
        for image, target in loader:
            output = model(image)
            loss_sum += criterion(output, target).item() * image.shape[0]
            correct += (output.argmax(1) == target).sum().item()
            total += image.shape[0]
    return loss_sum / total, 100.0 * correct / total


def main():
    coarse = torch.randn(10, 3, 4, 4)
    templates = F.interpolate(coarse, size=(16, 16), mode="bilinear", align_corners=False)
    train_ds = SyntheticCifar(1536, templates, seed=1)
    val_ds = SyntheticCifar(512, templates, seed=2)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)

    model = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10, zero_init_residual=True)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    parameters = set_weight_decay(model, 1e-4, norm_weight_decay=0.0)
    optimizer = torch.optim.SGD(parameters, lr=0.1, momentum=0.9, weight_decay=1e-4)

    epochs, warmup_epochs = 6, 1
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=warmup_epochs)
    main_sched = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs - warmup_epochs)
    lr_scheduler = torch.optim.lr_scheduler.SequentialLR(
        optimizer, schedulers=[warmup, main_sched], milestones=[warmup_epochs]
    )

    for epoch in range(epochs):
        model.train()
        start = time.time()
        running, n = 0.0, 0
        for i, (image, target) in enumerate(train_loader):
            output = model(image)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            n += 1
            if i % 8 == 0:
                print(f"Epoch: [{epoch}] [{i}/{len(train_loader)}] lr {optimizer.param_groups[0]['lr']:.4f} loss {loss.item():.4f}")
        lr_scheduler.step()
        val_loss, acc1 = evaluate(model, val_loader, criterion)
        print(f"Epoch {epoch}: train loss {running / n:.4f}  val loss {val_loss:.4f}  Acc@1 {acc1:.2f}  ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
