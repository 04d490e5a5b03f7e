"""Barlow Twins self-supervised pre-training, after facebookresearch/barlowtwins (main.py), on one
CPU process instead of DDP over 8+ GPUs.

Kept from the original: the projector (Linear without bias + BatchNorm1d + ReLU, last Linear bare),
the affine-free BatchNorm1d over z1/z2, the cross-correlation matrix divided by the batch size,
the on-diagonal (1 - c_ii)^2 term plus lambd * the off-diagonal squares taken through the
flatten/view trick, the LARS optimizer with biases and BN parameters excluded from weight decay
and from the LARS adaptation, and adjust_learning_rate setting both param groups by hand at every
step (linear warm-up over 10 epochs, then cosine). ResNet-50 is replaced by a small conv
backbone, ImageNet by synthetic 16x16 texture images with two random augmentations per image.
The mixed-precision GradScaler is left out (CPU, float32).
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F
from torch import nn, optim

parser = argparse.ArgumentParser(description='Barlow Twins Training')
parser.add_argument('--epochs', default=20, type=int, metavar='N',
                    help='number of total epochs to run')
parser.add_argument('--batch-size', default=64, type=int, metavar='N',
                    help='mini-batch size')
parser.add_argument('--learning-rate-weights', default=0.2, type=float, metavar='LR',
                    help='base learning rate for weights')
parser.add_argument('--learning-rate-biases', default=0.0048, type=float, metavar='LR',
                    help='base learning rate for biases and batch norm parameters')
parser.add_argument('--weight-decay', default=1e-6, type=float, metavar='W',
                    help='weight decay')
parser.add_argument('--lambd', default=0.0051, type=float, metavar='L',
                    help='weight on off-diagonal terms')
parser.add_argument('--projector', default='128-128-128', type=str,
                    metavar='MLP', help='projector MLP')
parser.add_argument('--print-freq', default=10, type=int, metavar='N',
                    help='print frequency')


class TextureImages(torch.utils.data.Dataset):
    """Images made of one of 8 oriented sinusoidal textures with a random phase and contrast."""

    def __init__(self, n, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 8, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing='ij')
        angle = self.labels.float() * math.pi / 8
        freq = 0.5 + 0.25 * (self.labels % 2).float()
        phase = 2 * math.pi * torch.rand(n, generator=g)
        proj = xx[None] * torch.cos(angle)[:, None, None] + yy[None] * torch.sin(angle)[:, None, None]
        img = torch.sin(freq[:, None, None] * proj + phase[:, None, None])
        img = img * (0.5 + torch.rand(n, 1, 1, generator=g))
        color = torch.rand(n, 3, 1, 1, generator=g) + 0.3
        self.data = img[:, None] * color

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self.data[idx], self.labels[idx]


class Transform:
    """Two differently augmented views: random shift-crop, flip, brightness/contrast jitter, noise."""

    def augment(self, x, p_noise):
        x = F.pad(x, (2, 2, 2, 2), mode='reflect')
        i, j = torch.randint(0, 5, (2,)).tolist()
        x = x[:, i:i + 16, j:j + 16]
        if torch.rand(1).item() < 0.5:
            x = x.flip(-1)
        x = x * (0.6 + 0.8 * torch.rand(1)) + 0.4 * (torch.rand(1) - 0.5)
        if torch.rand(1).item() < 0.2:
            x = x.mean(0, keepdim=True).expand_as(x)
        if torch.rand(1).item() < p_noise:
            x = x + 0.2 * torch.randn_like(x)
        return x

    def __call__(self, x):
        y1 = self.augment(x, p_noise=1.0)
        y2 = self.augment(x, p_noise=0.1)
        return y1, y2


class TwoViews(torch.utils.data.Dataset):
    def __init__(self, base, transform):
        self.base = base
        self.transform = transform

    def __len__(self):
        return len(self.base)

    def __getitem__(self, idx):
        x, y = self.base[idx]
        return self.transform(x), y


def small_backbone():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    )


def main():
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)

    model = BarlowTwins(args)
    param_weights = []
    param_biases = []
    for param in model.parameters():
        if param.ndim == 1:
            param_biases.append(param)
        else:
            param_weights.append(param)
    parameters = [{'params': param_weights}, {'params': param_biases}]
    optimizer = LARS(parameters, lr=0, weight_decay=args.weight_decay,
                     weight_decay_filter=exclude_bias_and_norm,
                     lars_adaptation_filter=exclude_bias_and_norm)

    dataset = TwoViews(TextureImages(640), Transform())
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)

    start_time = time.time()
    for epoch in range(0, args.epochs):
        for step, ((y1, y2), _) in enumerate(loader, start=epoch * len(loader)):
            adjust_learning_rate(args, optimizer, loader, step)
            optimizer.zero_grad()
            loss = model.forward(y1, y2)
            loss.backward()
            optimizer.step()
            if step % args.print_freq == 0:
                stats = dict(epoch=epoch, step=step,
                             lr_weights=optimizer.param_groups[0]['lr'],
                             lr_biases=optimizer.param_groups[1]['lr'],
                             loss=loss.item(),
                             time=int(time.time() - start_time))
                print(json.dumps(stats))



def adjust_learning_rate(args, optimizer, loader, step):
    max_steps = args.epochs * len(loader)
    warmup_steps = 10 * len(loader)
    base_lr = args.batch_size / 256
    if step < warmup_steps:
        lr = base_lr * step / warmup_steps
    else:
        step -= warmup_steps
        max_steps -= warmup_steps
        q = 0.5 * (1 + math.cos(math.pi * step / max_steps))
        end_lr = base_lr * 0.001
        lr = base_lr * q + end_lr * (1 - q)
    optimizer.param_groups[0]['lr'] = lr * args.learning_rate_weights
    optimizer.param_groups[1]['lr'] = lr * args.learning_rate_biases


def off_diagonal(x):
    # return a flattened view of the off-diagonal elements of a square matrix
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class BarlowTwins(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.backbone = small_backbone()

        # projector
        sizes = [64] + list(map(int, args.projector.split('-')))
        layers = []
        for i in range(len(sizes) - 2):
            layers.append(nn.Linear(sizes[i], sizes[i + 1], bias=False))
            layers.append(nn.BatchNorm1d(sizes[i + 1]))
            layers.append(nn.ReLU(inplace=True))
        layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.projector = nn.Sequential(*layers)

        # normalization layer for the representations z1 and z2
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))

        # empirical cross-correlation matrix
        c = self.bn(z1).T @ self.bn(z2)

        # sum the cross-correlation matrix between all gpus
        c.div_(self.args.batch_size)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(c)

        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        loss = on_diag + self.args.lambd * off_diag
        return loss


class LARS(optim.Optimizer):
    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001,
                 weight_decay_filter=None, lars_adaptation_filter=None):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                        eta=eta, weight_decay_filter=weight_decay_filter,
                        lars_adaptation_filter=lars_adaptation_filter)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g['params']:
                dp = p.grad

                if dp is None:
                    continue

                if g['weight_decay_filter'] is None or not g['weight_decay_filter'](p):
                    dp = dp.add(p, alpha=g['weight_decay'])

                if g['lars_adaptation_filter'] is None or not g['lars_adaptation_filter'](p):
                    param_norm = torch.norm(p)
                    update_norm = torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0.,
                                    torch.where(update_norm > 0,
                                                (g['eta'] * param_norm / update_norm), one), one)
                    dp = dp.mul(q)

                param_state = self.state[p]
                if 'mu' not in param_state:
                    param_state['mu'] = torch.zeros_like(p)
                mu = param_state['mu']
                mu.mul_(g['momentum']).add_(dp)

                p.add_(mu, alpha=-g['lr'])


def exclude_bias_and_norm(p):
    return p.ndim == 1


if __name__ == '__main__':
    main()
