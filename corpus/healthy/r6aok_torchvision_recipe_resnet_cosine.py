"""Image classification with a torchvision-reference-style recipe on a small ResNet.

Follows references/classification/train.py: CrossEntropyLoss with label smoothing, no weight
decay on normalisation layers, SGD with momentum, a linear warm-up chained to cosine annealing
(SequentialLR, stepped once per epoch), an EMA copy of the weights updated every few steps, and
a MetricLogger-style print every `print_freq` iterations.

Data: synthetic 10-class "CIFAR" at 16x16 (each class a smooth colour texture, random shifts and
flips, Gaussian noise), generated in memory.
"""
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class Args:
    epochs = 5
    batch_size = 64
    lr = 0.2
    momentum = 0.9
    weight_decay = 5e-4
    norm_weight_decay = 0.0
    label_smoothing = 0.1
    lr_warmup_epochs = 1
    lr_warmup_decay = 0.1
    model_ema_steps = 4
    model_ema_decay = 0.99
    print_freq = 10


class SyntheticCIFAR(Dataset):
    def __init__(self, n, seed, train):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(10, 3, 16, 16, generator=torch.Generator().manual_seed(2024))
        protos = F.avg_pool2d(protos, 5, stride=1, padding=2) * 2.5
        self.targets = torch.randint(0, 10, (n,), generator=g)
        self.images = protos[self.targets] + 1.2 * torch.randn(n, 3, 16, 16, generator=g)
        self.train = train

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        img = self.images[idx]
        if self.train:
            dx, dy = torch.randint(-2, 3, (2,)).tolist()
            img = torch.roll(img, (dx, dy), dims=(1, 2))
            if torch.rand(()) < 0.5:
                img = img.flip(2)
        return img, self.targets[idx]


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.layer3 = BasicBlock(32, 64, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        for m in self.modules():
            if isinstance(m, BasicBlock):
                nn.init.constant_(m.bn2.weight, 0)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def split_normalization_params(model):
    norm_classes = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)
    norm_params, other_params = [], []
    for module in model.modules():
        if next(module.children(), None):
            other_params.extend(p for p in module.parameters(recurse=False) if p.requires_grad)
        elif isinstance(module, norm_classes):
            norm_params.extend(p for p in module.parameters() if p.requires_grad)
        else:
            other_params.extend(p for p in module.parameters() if p.requires_grad)
    return norm_params, other_params


class ExponentialMovingAverage(torch.optim.swa_utils.AveragedModel):
    def __init__(self, model, decay, device="cpu"):
        def ema_avg(avg_model_param, model_param, num_averaged):
            return decay * avg_model_param + (1 - decay) * model_param

        super().__init__(model, device, ema_avg, use_buffers=True)


def accuracy(output, target):
    with torch.inference_mode():
        return (output.argmax(1) == target).float().mean() * 100.0


def train_one_epoch(model, criterion, optimizer, data_loader, epoch, args, model_ema=None):
    model.train()
    header = f"Epoch: [{epoch}]"
    start = time.time()
    for i, (image, target) in enumerate(data_loader):
        output = model(image)
        loss = criterion(output, target)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if model_ema and i % args.model_ema_steps == 0:
            model_ema.update_parameters(model)
            if epoch < args.lr_warmup_epochs:
                model_ema.n_averaged.fill_(0)

        if i % args.print_freq == 0:
            acc1 = accuracy(output, target)
            print(f"{header}  [{i:3d}/{len(data_loader)}]  lr: {optimizer.param_groups[0]['lr']:.4f}  "
                  f"loss: {loss.item():.4f}  acc1: {acc1.item():.1f}  time: {time.time() - start:.1f}s")


def evaluate(model, criterion, data_loader, log_suffix=""):
    model.eval()
    total_loss, total_acc, n = 0.0, 0.0, 0
    with torch.inference_mode():
        for image, target in data_loader:
            output = model(image)
            total_loss += criterion(output, target).item() * image.shape[0]
            total_acc += accuracy(output, target).item() * image.shape[0]
            n += image.shape[0]
    print(f"Test: {log_suffix} Acc@1 {total_acc / n:.3f} loss {total_loss / n:.4f}")
    return total_acc / n


def main(args):
    dataset = SyntheticCIFAR(1536, seed=1, train=True)
    dataset_test = SyntheticCIFAR(512, seed=2, train=False)
    data_loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)
    data_loader_test = DataLoader(dataset_test, batch_size=256)

    print("Creating model")
    model = ResNet(num_classes=10)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    param_groups = split_normalization_params(model)
    wd_groups = [args.norm_weight_decay, args.weight_decay]
    parameters = [{"params": p, "weight_decay": w} for p, w in zip(param_groups, wd_groups) if p]
    optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)

    main_lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs - args.lr_warmup_epochs)
    warmup_lr_scheduler = torch.optim.lr_scheduler.LinearLR(
        optimizer, start_factor=args.lr_warmup_decay, total_iters=args.lr_warmup_epochs)
    lr_scheduler = torch.optim.lr_scheduler.SequentialLR(
        optimizer, schedulers=[warmup_lr_scheduler, main_lr_scheduler], milestones=[args.lr_warmup_epochs])

    adjust = args.batch_size * args.model_ema_steps / args.epochs
    alpha = min(1.0, (1.0 - args.model_ema_decay) * adjust)
    model_ema = ExponentialMovingAverage(model, decay=1.0 - alpha)

    print("Start training")
    start_time = time.time()
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, optimizer, data_loader, epoch, args, model_ema)
        lr_scheduler.step()
        evaluate(model, criterion, data_loader_test)
        evaluate(model_ema, criterion, data_loader_test, log_suffix="EMA")
    print(f"Training time {time.time() - start_time:.1f}s")


if __name__ == "__main__":
    main(Args())
