"""A small ConvNeXt trained like facebookresearch/ConvNeXt main.py / engine.py.

ConvNeXt blocks with layer scale (gamma initialised to 1e-6) and stochastic depth (drop path rate
linearly increasing to 0.3), AdamW with per-iteration cosine lr and weight-decay schedules and a
warm-up, label smoothing 0.1. Synthetic 32x32 "texture" images of 6 classes instead of ImageNet.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def drop_path(x, drop_prob: float = 0., training: bool = False):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob=None):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-6, data_format="channels_last"):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps
        self.data_format = data_format
        self.normalized_shape = (normalized_shape, )

    def forward(self, x):
        if self.data_format == "channels_last":
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        x = self.weight[:, None, None] * x + self.bias[:, None, None]
        return x


class Block(nn.Module):
    def __init__(self, dim, drop_path=0., layer_scale_init_value=1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones((dim)),
                                  requires_grad=True) if layer_scale_init_value > 0 else None
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()

    def forward(self, x):
        input = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)
        x = self.norm(x)
        x = self.pwconv1(x)
        x = self.act(x)
        x = self.pwconv2(x)
        if self.gamma is not None:
            x = self.gamma * x
        x = x.permute(0, 3, 1, 2)
        x = input + self.drop_path(x)
        return x


class ConvNeXt(nn.Module):
    def __init__(self, in_chans=3, num_classes=1000, depths=[3, 3, 9, 3], dims=[96, 192, 384, 768],
                 drop_path_rate=0., layer_scale_init_value=1e-6, head_init_scale=1.):
        super().__init__()
        self.downsample_layers = nn.ModuleList()
        stem = nn.Sequential(
            nn.Conv2d(in_chans, dims[0], kernel_size=4, stride=4),
            LayerNorm(dims[0], eps=1e-6, data_format="channels_first")
        )
        self.downsample_layers.append(stem)
        for i in range(3):
            downsample_layer = nn.Sequential(
                LayerNorm(dims[i], eps=1e-6, data_format="channels_first"),
                nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2),
            )
            self.downsample_layers.append(downsample_layer)

        self.stages = nn.ModuleList()
        dp_rates = [x.item() for x in torch.linspace(0, drop_path_rate, sum(depths))]
        cur = 0
        for i in range(4):
            stage = nn.Sequential(
                *[Block(dim=dims[i], drop_path=dp_rates[cur + j],
                        layer_scale_init_value=layer_scale_init_value) for j in range(depths[i])]
            )
            self.stages.append(stage)
            cur += depths[i]

        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

        self.apply(self._init_weights)
        self.head.weight.data.mul_(head_init_scale)
        self.head.bias.data.mul_(head_init_scale)

    def _init_weights(self, m):
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=.02)
            nn.init.constant_(m.bias, 0)

    def forward_features(self, x):
        for i in range(4):
            x = self.downsample_layers[i](x)
            x = self.stages[i](x)
        return self.norm(x.mean([-2, -1]))

    def forward(self, x):
        x = self.forward_features(x)
        x = self.head(x)
        return x


class TextureDataset(Dataset):
    """Class = orientation (3) x frequency (2) of a noisy grating, random phase, colour and contrast."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 6, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(32.), torch.arange(32.), indexing="ij")
        angles = torch.tensor([0.0, math.pi / 3, 2 * math.pi / 3])
        freqs = torch.tensor([0.35, 0.8])
        ori = angles[self.labels % 3] + 0.15 * torch.randn(n, generator=g)
        freq = freqs[self.labels // 3] * (1 + 0.1 * torch.randn(n, generator=g))
        phase = 2 * math.pi * torch.rand(n, generator=g)
        proj = xx[None] * torch.cos(ori)[:, None, None] + yy[None] * torch.sin(ori)[:, None, None]
        wave = torch.sin(freq[:, None, None] * proj + phase[:, None, None])
        colour = torch.rand(n, 3, generator=g) + 0.2
        contrast = 0.5 + torch.rand(n, generator=g)
        img = wave[:, None] * colour[:, :, None, None] * contrast[:, None, None, None]
        img = img + 0.6 * torch.randn(n, 3, 32, 32, generator=g)
        self.images = (img - img.mean()) / img.std()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


def cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0, start_warmup_value=0):
    warmup_schedule = np.array([])
    warmup_iters = warmup_epochs * niter_per_ep
    if warmup_epochs > 0:
        warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = np.array([final_value + 0.5 * (base_value - final_value) * (1 + math.cos(math.pi * i / (len(iters))))
                         for i in iters])
    schedule = np.concatenate((warmup_schedule, schedule))
    assert len(schedule) == epochs * niter_per_ep
    return schedule


def param_groups_weight_decay(model, weight_decay):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name.endswith(".gamma"):
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": no_decay, "weight_decay": 0.},
            {"params": decay, "weight_decay": weight_decay}]


def train_one_epoch(model, criterion, data_loader, optimizer, epoch, start_steps,
                    lr_schedule_values, wd_schedule_values):
    model.train()
    total, n = 0.0, 0
    for data_iter_step, (samples, targets) in enumerate(data_loader):
        it = start_steps + data_iter_step
        for i, param_group in enumerate(optimizer.param_groups):
            param_group["lr"] = lr_schedule_values[it]
            if param_group["weight_decay"] > 0:
                param_group["weight_decay"] = wd_schedule_values[it]

        output = model(samples)
        loss = criterion(output, targets)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            raise SystemExit(f"Loss is {loss_value}, stopping training")

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss_value * len(targets)
        n += len(targets)
        if data_iter_step % 10 == 0:
            print(f"Epoch: [{epoch}] [{data_iter_step}/{len(data_loader)}] loss: {loss_value:.4f} "
                  f"lr: {optimizer.param_groups[0]['lr']:.6f}")
    return total / n


@torch.no_grad()
def evaluate(data_loader, model):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    for images, target in data_loader:
        output = model(images)
        loss_sum += F.cross_entropy(output, target, reduction="sum").item()
        correct += (output.argmax(1) == target).sum().item()
        total += len(target)
    return loss_sum / total, correct / total


def main():
    torch.manual_seed(0)
    np.random.seed(0)
    epochs, batch_size, warmup_epochs = 5, 64, 1
    lr, min_lr, weight_decay, weight_decay_end = 4e-3, 1e-5, 0.05, 0.05

    dataset_train = TextureDataset(1280, seed=1)
    dataset_val = TextureDataset(384, seed=2)
    data_loader_train = DataLoader(dataset_train, batch_size=batch_size, shuffle=True, drop_last=True)
    data_loader_val = DataLoader(dataset_val, batch_size=128, shuffle=False)

    model = ConvNeXt(num_classes=6, depths=[1, 1, 3, 1], dims=[16, 32, 64, 96],
                     drop_path_rate=0.3, layer_scale_init_value=1e-6, head_init_scale=1.0)
    n_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print("number of params:", n_parameters)

    optimizer = torch.optim.AdamW(param_groups_weight_decay(model, weight_decay), lr=lr)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    num_training_steps_per_epoch = len(data_loader_train)
    lr_schedule_values = cosine_scheduler(lr, min_lr, epochs, num_training_steps_per_epoch,
                                          warmup_epochs=warmup_epochs)
    wd_schedule_values = cosine_scheduler(weight_decay, weight_decay_end, epochs, num_training_steps_per_epoch)

    start_time = time.time()
    max_accuracy = 0.0
    for epoch in range(epochs):
        train_loss = train_one_epoch(model, criterion, data_loader_train, optimizer, epoch,
                                     epoch * num_training_steps_per_epoch,
                                     lr_schedule_values, wd_schedule_values)
        val_loss, acc = evaluate(data_loader_val, model)
        max_accuracy = max(max_accuracy, acc)
        gammas = torch.cat([b.gamma.detach().abs() for s in model.stages for b in s])
        print(f"epoch {epoch}: train_loss {train_loss:.4f} val_loss {val_loss:.4f} acc1 {100 * acc:.1f}% "
              f"max {100 * max_accuracy:.1f}% mean|gamma| {gammas.mean().item():.2e}")
    print(f"Training time {time.time() - start_time:.1f}s")


if __name__ == "__main__":
    main()
