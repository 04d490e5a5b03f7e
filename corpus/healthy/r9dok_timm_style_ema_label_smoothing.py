"""Image classification with a timm-style training loop (pytorch-image-models train.py):
LabelSmoothingCrossEntropy(0.1), a ModelEmaV2 copy of the weights that is validated alongside the
model, SGD-Nesterov without weight decay on biases/norms, gradient clipping, and a per-epoch
cosine schedule with warm-up and restarts (CosineLRScheduler with cycle_limit=2, cycle_decay=0.5)
followed by a cool-down epoch. The data are synthetic oriented-grating "textures" (6 classes,
3x16x16) served by a DataLoader with two worker processes.
"""
import argparse
import logging
import math
import time
from collections import OrderedDict
from copy import deepcopy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

_logger = logging.getLogger("train")


class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[: min(k, maxk)].reshape(-1).float().sum(0) * 100.0 / batch_size for k in topk]


class LabelSmoothingCrossEntropy(nn.Module):
    """NLL loss with label smoothing."""

    def __init__(self, smoothing=0.1):
        super().__init__()
        assert smoothing < 1.0
        self.smoothing = smoothing
        self.confidence = 1.0 - smoothing

    def forward(self, x, target):
        logprobs = F.log_softmax(x, dim=-1)
        nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1))
        nll_loss = nll_loss.squeeze(1)
        smooth_loss = -logprobs.mean(dim=-1)
        loss = self.confidence * nll_loss + self.smoothing * smooth_loss
        return loss.mean()


class ModelEmaV2(nn.Module):
    """Model Exponential Moving Average V2: keeps a moving average of everything in the model
    state_dict (parameters and buffers)."""

    def __init__(self, model, decay=0.9999, device=None):
        super().__init__()
        self.module = deepcopy(model)
        self.module.eval()
        self.decay = decay
        self.device = device
        if self.device is not None:
            self.module.to(device=device)

    def _update(self, model, update_fn):
        with torch.no_grad():
            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                if self.device is not None:
                    model_v = model_v.to(device=self.device)
                ema_v.copy_(update_fn(ema_v, model_v))

    def update(self, model):
        self._update(model, update_fn=lambda e, m: self.decay * e + (1.0 - self.decay) * m)

    def set(self, model):
        self._update(model, update_fn=lambda e, m: m)


class CosineLRScheduler:
    """Cosine decay with restarts (SGDR) and linear warm-up, stepped once per epoch."""

    def __init__(self, optimizer, t_initial, lr_min=0.0, cycle_decay=1.0, cycle_limit=1,
                 warmup_t=0, warmup_lr_init=0.0):
        self.optimizer = optimizer
        self.base_values = [group["lr"] for group in optimizer.param_groups]
        self.t_initial = t_initial
        self.lr_min = lr_min
        self.cycle_decay = cycle_decay
        self.cycle_limit = cycle_limit
        self.warmup_t = warmup_t
        self.warmup_lr_init = warmup_lr_init
        if self.warmup_t:
            self.warmup_steps = [(v - warmup_lr_init) / self.warmup_t for v in self.base_values]
        else:
            self.warmup_steps = [1 for _ in self.base_values]
        self.step(0)

    def _get_lr(self, t):
        if t < self.warmup_t:
            return [self.warmup_lr_init + t * s for s in self.warmup_steps]
        i = t // self.t_initial
        t_i = self.t_initial
        t_curr = t - (self.t_initial * i)
        gamma = self.cycle_decay ** i
        lr_max_values = [v * gamma for v in self.base_values]
        if i < self.cycle_limit:
            return [self.lr_min + 0.5 * (lr_max - self.lr_min) * (1 + math.cos(math.pi * t_curr / t_i))
                    for lr_max in lr_max_values]
        return [self.lr_min for _ in self.base_values]

    def get_cycle_length(self, cycles=0):
        cycles = max(1, cycles or self.cycle_limit)
        return self.t_initial * cycles

    def step(self, epoch, metric=None):
        for param_group, value in zip(self.optimizer.param_groups, self._get_lr(epoch)):
            param_group["lr"] = value


def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=()):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


class GratingTextures(Dataset):
    """Sinusoidal gratings: the class sets the orientation and the spatial frequency, with random
    phase, contrast, colour tint and pixel noise."""

    def __init__(self, n, num_classes=6, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        angle = self.labels.float() * math.pi / num_classes + 0.15 * torch.randn(n, generator=g)
        freq = 0.35 + 0.25 * (self.labels % 2).float() + 0.05 * torch.randn(n, generator=g)
        phase = 2 * math.pi * torch.rand(n, generator=g)
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        proj = (xx[None] * torch.cos(angle)[:, None, None] + yy[None] * torch.sin(angle)[:, None, None])
        wave = torch.sin(freq[:, None, None] * proj + phase[:, None, None])
        contrast = 0.5 + torch.rand(n, 1, 1, generator=g)
        tint = 0.5 + torch.rand(n, 3, 1, 1, generator=g)
        img = tint * (contrast * wave)[:, None] + 1.5 * torch.randn(n, 3, size, size, generator=g)
        self.images = img

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class SmallResNet(nn.Module):
    def __init__(self, num_classes=6, width=16, drop_rate=0.1):
        super().__init__()
        self.stem = conv_bn(3, width)
        self.stage1 = conv_bn(width, 2 * width, stride=2)
        self.stage2 = conv_bn(2 * width, 2 * width)
        self.stage3 = conv_bn(2 * width, 4 * width, stride=2)
        self.drop_rate = drop_rate
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.stage1(x)
        x = x + self.stage2(x)
        x = self.stage3(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        x = F.dropout(x, p=self.drop_rate, training=self.training)
        return self.head(x)


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, lr_scheduler=None, model_ema=None):
    losses_m = AverageMeter()
    model.train()
    num_updates = epoch * len(loader)
    for batch_idx, (input, target) in enumerate(loader):
        output = model(input)
        loss = loss_fn(output, target)
        losses_m.update(loss.item(), input.size(0))

        optimizer.zero_grad()
        loss.backward()
        if args.clip_grad is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
        optimizer.step()

        if model_ema is not None:
            model_ema.update(model)
        num_updates += 1

        if batch_idx % args.log_interval == 0:
            lrl = [param_group["lr"] for param_group in optimizer.param_groups]
            lr = sum(lrl) / len(lrl)
            _logger.info(
                f"Train: {epoch} [{batch_idx:>3d}/{len(loader)}]  Loss: {losses_m.val:#.3g} ({losses_m.avg:#.3g})  "
                f"LR: {lr:.3e}"
            )
    return OrderedDict([("loss", losses_m.avg)])


def validate(model, loader, loss_fn, log_suffix=""):
    losses_m, top1_m = AverageMeter(), AverageMeter()
    model.eval()
    with torch.no_grad():
        for input, target in loader:
            output = model(input)
            loss = loss_fn(output, target)
            acc1 = accuracy(output, target, topk=(1,))[0]
            losses_m.update(loss.item(), input.size(0))
            top1_m.update(acc1.item(), output.size(0))
    _logger.info(f"Test{log_suffix}: Loss: {losses_m.avg:>7.3f}  Acc@1: {top1_m.avg:>7.3f}")
    return OrderedDict([("loss", losses_m.avg), ("top1", top1_m.avg)])


def main():
    parser = argparse.ArgumentParser(description="PyTorch ImageNet-style Training")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--smoothing", type=float, default=0.1)
    parser.add_argument("--clip-grad", type=float, default=1.0)
    parser.add_argument("--model-ema-decay", type=float, default=0.99)
    parser.add_argument("--warmup-epochs", type=int, default=1)
    parser.add_argument("--warmup-lr", type=float, default=1e-3)
    parser.add_argument("--min-lr", type=float, default=1e-4)
    parser.add_argument("--cycle-epochs", type=int, default=3)
    parser.add_argument("--cycle-limit", type=int, default=2)
    parser.add_argument("--cycle-decay", type=float, default=0.5)
    parser.add_argument("--cooldown-epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.manual_seed(args.seed)

    model = SmallResNet(num_classes=6)
    _logger.info(f"Model created, param count: {sum(p.numel() for p in model.parameters())}")

    optimizer = torch.optim.SGD(
        param_groups_weight_decay(model, args.weight_decay), lr=args.lr, momentum=args.momentum, nesterov=True
    )
    model_ema = ModelEmaV2(model, decay=args.model_ema_decay)

    lr_scheduler = CosineLRScheduler(
        optimizer,
        t_initial=args.cycle_epochs,
        lr_min=args.min_lr,
        cycle_decay=args.cycle_decay,
        cycle_limit=args.cycle_limit,
        warmup_t=args.warmup_epochs,
        warmup_lr_init=args.warmup_lr,
    )
    num_epochs = lr_scheduler.get_cycle_length() + args.cooldown_epochs
    _logger.info(f"Scheduled epochs: {num_epochs}")

    loader_train = DataLoader(GratingTextures(1920, seed=0), batch_size=args.batch_size, shuffle=True,
                              drop_last=True, num_workers=args.workers, persistent_workers=args.workers > 0)
    loader_eval = DataLoader(GratingTextures(512, seed=1), batch_size=2 * args.batch_size,
                             num_workers=args.workers, persistent_workers=args.workers > 0)

    train_loss_fn = LabelSmoothingCrossEntropy(smoothing=args.smoothing)
    validate_loss_fn = nn.CrossEntropyLoss()

    best_metric, best_epoch = None, None
    for epoch in range(num_epochs):
        t0 = time.time()
        train_metrics = train_one_epoch(
            epoch, model, loader_train, optimizer, train_loss_fn, args,
            lr_scheduler=lr_scheduler, model_ema=model_ema,
        )
        eval_metrics = validate(model, loader_eval, validate_loss_fn)
        ema_eval_metrics = validate(model_ema.module, loader_eval, validate_loss_fn, log_suffix=" (EMA)")
        eval_metrics = ema_eval_metrics

        lr_scheduler.step(epoch + 1, eval_metrics["top1"])
        if best_metric is None or eval_metrics["top1"] > best_metric:
            best_metric, best_epoch = eval_metrics["top1"], epoch
        _logger.info(f"epoch {epoch}: train_loss {train_metrics['loss']:.4f}  "
                     f"eval_top1 {eval_metrics['top1']:.2f}  ({time.time() - t0:.1f}s)")

    _logger.info(f"*** Best metric: {best_metric:.2f} (epoch {best_epoch})")


if __name__ == "__main__":
    main()
