"""Sharpness-Aware Minimization (davda54/sam) on a small WideResNet.

Port of the repository's example/train.py: the SAM wrapper around SGD (adaptive ASAM, rho 2.0),
two forward/backward passes per batch (first_step climbs to w + e(w), second_step comes back
and lets the base optimizer update), BatchNorm running statistics bypassed during the second
pass, smooth_crossentropy with label smoothing 0.1, and the repo's StepLR utility. CIFAR is
replaced by synthetic 16x16 texture images of 10 classes.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"

        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super(SAM, self).__init__(params, defaults)

        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)

            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"

        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]  # get back to "w" from "w + e(w)"

        self.base_optimizer.step()  # do the actual "sharpness-aware" update

        if zero_grad:
            self.zero_grad()

    def step(self, closure=None):
        raise NotImplementedError("SAM doesn't work like the other optimizers, you should first call "
                                  "`first_step` and the `second_step`; see the documentation for more info.")

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device
        norm = torch.norm(
            torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                for group in self.param_groups for p in group["params"]
                if p.grad is not None
            ]),
            p=2,
        )
        return norm


def smooth_crossentropy(pred, gold, smoothing=0.1):
    n_class = pred.size(1)

    one_hot = torch.full_like(pred, fill_value=smoothing / (n_class - 1))
    one_hot.scatter_(dim=1, index=gold.unsqueeze(1), value=1.0 - smoothing)
    log_prob = F.log_softmax(pred, dim=1)

    return F.kl_div(input=log_prob, target=one_hot, reduction="none").sum(-1)


def disable_running_stats(model):
    def _disable(module):
        if isinstance(module, nn.BatchNorm2d):
            module.backup_momentum = module.momentum
            module.momentum = 0

    model.apply(_disable)


def enable_running_stats(model):
    def _enable(module):
        if isinstance(module, nn.BatchNorm2d) and hasattr(module, "backup_momentum"):
            module.momentum = module.backup_momentum

    model.apply(_enable)


class StepLR:
    def __init__(self, optimizer, learning_rate, total_epochs):
        self.optimizer = optimizer
        self.total_epochs = total_epochs
        self.base = learning_rate

    def __call__(self, epoch):
        if epoch < self.total_epochs * 3 / 10:
            lr = self.base
        elif epoch < self.total_epochs * 6 / 10:
            lr = self.base * 0.2
        elif epoch < self.total_epochs * 8 / 10:
            lr = self.base * 0.2 ** 2
        else:
            lr = self.base * 0.2 ** 3

        for param_group in self.optimizer.param_groups:
            param_group["lr"] = lr

    def lr(self):
        return self.optimizer.param_groups[0]["lr"]


class BasicUnit(nn.Module):
    def __init__(self, channels, dropout):
        super().__init__()
        self.block = nn.Sequential(
            nn.BatchNorm2d(channels), nn.ReLU(inplace=True),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels), nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
        )

    def forward(self, x):
        return x + self.block(x)


class DownsampleUnit(nn.Module):
    def __init__(self, in_channels, out_channels, stride, dropout):
        super().__init__()
        self.norm_act = nn.Sequential(nn.BatchNorm2d(in_channels), nn.ReLU(inplace=True))
        self.block = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
        )
        self.downsample = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False)

    def forward(self, x):
        x = self.norm_act(x)
        return self.block(x) + self.downsample(x)


class Block(nn.Module):
    def __init__(self, in_channels, out_channels, stride, depth, dropout):
        super().__init__()
        self.block = nn.Sequential(
            DownsampleUnit(in_channels, out_channels, stride, dropout),
            *(BasicUnit(out_channels, dropout) for _ in range(depth - 1)),
        )

    def forward(self, x):
        return self.block(x)


class WideResNet(nn.Module):
    def __init__(self, depth, width_factor, dropout, in_channels, labels):
        super().__init__()
        self.filters = [8, 8 * width_factor, 16 * width_factor, 32 * width_factor]
        self.block_depth = (depth - 4) // (3 * 2)

        self.f = nn.Sequential(
            nn.Conv2d(in_channels, self.filters[0], 3, padding=1, bias=False),
            Block(self.filters[0], self.filters[1], 1, self.block_depth, dropout),
            Block(self.filters[1], self.filters[2], 2, self.block_depth, dropout),
            Block(self.filters[2], self.filters[3], 2, self.block_depth, dropout),
            nn.BatchNorm2d(self.filters[3]),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(self.filters[3], labels),
        )
        self._initialize()

    def _initialize(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight.data, mode="fan_in", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                m.weight.data.zero_()
                m.bias.data.zero_()

    def forward(self, x):
        return self.f(x)


class TextureDataset(Dataset):
    """Ten classes of oriented/frequency textures with per-class colour, random phase and noise."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        ys, xs = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
        self.labels = torch.randint(0, 10, (n,), generator=g)
        angles = torch.arange(10) * (3.14159 / 10)
        freqs = 0.6 + 0.25 * (torch.arange(10) % 3)
        colours = torch.rand(10, 3, generator=torch.Generator().manual_seed(123)) * 1.5 + 0.25
        images = []
        for y in self.labels.tolist():
            phase = torch.rand(1, generator=g) * 6.28
            wave = torch.sin(freqs[y] * (xs * torch.cos(angles[y]) + ys * torch.sin(angles[y])) + phase)
            img = colours[y].view(3, 1, 1) * wave.unsqueeze(0)
            img = img + 0.8 * torch.randn(3, 16, 16, generator=g)
            images.append(img)
        self.images = torch.stack(images)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class Log:
    def __init__(self, log_each):
        self.log_each = log_each
        self.step = 0

    def train(self, epoch, len_dataset):
        self.epoch, self.is_train = epoch, True
        self.len_dataset = len_dataset
        self._reset()

    def eval(self):
        self.flush()
        self.is_train = False
        self._reset()

    def _reset(self):
        self.loss_sum, self.correct, self.count = 0.0, 0, 0

    def __call__(self, loss, correct, lr=None):
        self.loss_sum += loss.sum().item()
        self.correct += correct.sum().item()
        self.count += loss.size(0)
        if self.is_train:
            self.step += 1
            self.lr = lr
            if self.step % self.log_each == 0:
                print(f"  step {self.step:4d}  loss {loss.mean().item():.4f}  lr {lr:.4f}")

    def flush(self):
        tag = "train" if self.is_train else "test "
        extra = f"  lr {self.lr:.4f}" if self.is_train else ""
        print(f"epoch {self.epoch:2d} {tag} loss {self.loss_sum / self.count:.4f}  "
              f"acc {100.0 * self.correct / self.count:5.1f}%{extra}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--adaptive", default=True, type=bool, help="True if you want to use the Adaptive SAM.")
    parser.add_argument("--batch_size", default=64, type=int)
    parser.add_argument("--depth", default=10, type=int, help="Number of layers.")
    parser.add_argument("--dropout", default=0.0, type=float)
    parser.add_argument("--epochs", default=6, type=int)
    parser.add_argument("--label_smoothing", default=0.1, type=float)
    parser.add_argument("--learning_rate", default=0.1, type=float)
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--rho", default=2.0, type=float, help="Rho parameter for SAM.")
    parser.add_argument("--weight_decay", default=0.0005, type=float)
    parser.add_argument("--width_factor", default=2, type=int)
    args = parser.parse_args()

    torch.manual_seed(42)
    start = time.time()

    train_loader = DataLoader(TextureDataset(1024, seed=0), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(TextureDataset(512, seed=1), batch_size=128)

    log = Log(log_each=10)
    model = WideResNet(args.depth, args.width_factor, args.dropout, in_channels=3, labels=10)

    base_optimizer = torch.optim.SGD
    optimizer = SAM(model.parameters(), base_optimizer, rho=args.rho, adaptive=args.adaptive,
                    lr=args.learning_rate, momentum=args.momentum, weight_decay=args.weight_decay)
    scheduler = StepLR(optimizer, args.learning_rate, args.epochs)

    for epoch in range(args.epochs):
        model.train()
        log.train(epoch, len_dataset=len(train_loader.dataset))

        for batch in train_loader:
            inputs, targets = batch

            # first forward-backward step
            enable_running_stats(model)
            predictions = model(inputs)
            loss = smooth_crossentropy(predictions, targets, smoothing=args.label_smoothing)
            loss.mean().backward()
            optimizer.first_step(zero_grad=True)

            # second forward-backward step
            disable_running_stats(model)
            smooth_crossentropy(model(inputs), targets, smoothing=args.label_smoothing).mean().backward()
            optimizer.second_step(zero_grad=True)

            with torch.no_grad():
                correct = torch.argmax(predictions.data, 1) == targets
                log(loss.cpu(), correct.cpu(), scheduler.lr())
                scheduler(epoch)

        model.eval()
        log.eval()

        with torch.no_grad():
            for inputs, targets in test_loader:
                predictions = model(inputs)
                loss = smooth_crossentropy(predictions, targets)
                correct = torch.argmax(predictions, 1) == targets
                log(loss.cpu(), correct.cpu())

        log.flush()

    print(f"done in {time.time() - start:.1f}s")
