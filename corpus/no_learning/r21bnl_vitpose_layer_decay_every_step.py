"""ViTPose-style top-down keypoint training: a small ViT backbone + heatmap head.

Person crops (1 x 64 x 48) with 6 body joints; the model predicts one 16 x 12 heatmap per
joint and is trained with JointsMSELoss, AdamW, layer-wise lr decay, a linear warm-up and a
MultiStepLR schedule, as in the ViTPose training recipe.
"""
import math
import time

import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR, MultiStepLR
from torch.utils.data import DataLoader, Dataset

cfg = dict(
    optimizer=dict(lr=5e-4, betas=(0.9, 0.999), weight_decay=0.1,
                   paramwise_cfg=dict(num_layers=12, layer_decay_rate=0.75)),
    optimizer_config=dict(grad_clip=dict(max_norm=1.0, norm_type=2)),
    lr_config=dict(warmup_iters=20, warmup_ratio=0.001, step=[170, 200]),
    total_epochs=12,
    data=dict(samples_per_gpu=32),
)

NUM_JOINTS = 6
IMG_H, IMG_W = 64, 48
HM_H, HM_W = 16, 12
TEMPLATE = torch.tensor([[10., 24.], [20., 14.], [20., 34.], [38., 17.], [38., 31.], [54., 24.]])


class LayerDecayOptimizer:
    def __init__(self, optimizer, layerwise_decay_rate):
        self.optimizer = optimizer
        self.layerwise_decay_rate = layerwise_decay_rate
        self.param_groups = optimizer.param_groups

    def step(self, *args, **kwargs):
        for i, group in enumerate(self.optimizer.param_groups):
            group['lr'] *= self.layerwise_decay_rate[i]
        self.optimizer.step(*args, **kwargs)

    def zero_grad(self, *args, **kwargs):
        self.optimizer.zero_grad(*args, **kwargs)


class SyntheticPoseDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(IMG_H).float(), torch.arange(IMG_W).float(), indexing="ij")
        hy, hx = torch.meshgrid(torch.arange(HM_H).float(), torch.arange(HM_W).float(), indexing="ij")
        self.images = torch.empty(n, 1, IMG_H, IMG_W)
        self.targets = torch.empty(n, NUM_JOINTS, HM_H, HM_W)
        self.joints = torch.empty(n, NUM_JOINTS, 2)
        for i in range(n):
            scale = 0.8 + 0.3 * torch.rand(1, generator=g)
            shift = (torch.rand(2, generator=g) - 0.5) * torch.tensor([12., 10.])
            center = torch.tensor([32., 24.])
            pts = (TEMPLATE - center) * scale + center + shift + torch.randn(NUM_JOINTS, 2, generator=g) * 1.5
            img = 0.15 * torch.randn(IMG_H, IMG_W, generator=g)
            for j, (py, px) in enumerate(pts):
                img += (0.4 + 0.12 * j) * torch.exp(-((yy - py) ** 2 + (xx - px) ** 2) / (2 * 2.0 ** 2))
                cy, cx = py / 4.0, px / 4.0
                self.targets[i, j] = torch.exp(-((hy - cy) ** 2 + (hx - cx) ** 2) / (2 * 1.0 ** 2))
            self.images[i, 0] = img
            self.joints[i] = pts / 4.0

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.targets[idx], torch.ones(NUM_JOINTS, 1), self.joints[idx]


class Attention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=2):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * mlp_ratio), nn.GELU(), nn.Linear(dim * mlp_ratio, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViTPose(nn.Module):
    def __init__(self, dim=64, depth=2, heads=4):
        super().__init__()
        self.patch_embed = nn.Conv2d(1, dim, kernel_size=8, stride=8)
        self.pos_embed = nn.Parameter(torch.zeros(1, (IMG_H // 8) * (IMG_W // 8), dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.keypoint_head = nn.Sequential(
            nn.ConvTranspose2d(dim, dim, 4, stride=2, padding=1, bias=False), nn.BatchNorm2d(dim), nn.ReLU(inplace=True),
            nn.Conv2d(dim, NUM_JOINTS, 1),
        )

    def forward(self, x):
        x = self.patch_embed(x)
        b, c, h, w = x.shape
        tokens = x.flatten(2).transpose(1, 2) + self.pos_embed
        tokens = self.norm(self.blocks(tokens))
        feat = tokens.transpose(1, 2).reshape(b, c, h, w)
        return self.keypoint_head(feat)


class JointsMSELoss(nn.Module):
    def __init__(self, use_target_weight=True):
        super().__init__()
        self.criterion = nn.MSELoss(reduction="mean")
        self.use_target_weight = use_target_weight

    def forward(self, output, target, target_weight):
        b, k = output.shape[:2]
        pred = output.reshape(b, k, -1).split(1, 1)
        gt = target.reshape(b, k, -1).split(1, 1)
        loss = 0.0
        for j in range(k):
            if self.use_target_weight:
                loss += 0.5 * self.criterion(pred[j].squeeze(1) * target_weight[:, j], gt[j].squeeze(1) * target_weight[:, j])
            else:
                loss += 0.5 * self.criterion(pred[j].squeeze(1), gt[j].squeeze(1))
        return loss / k


@torch.no_grad()
def evaluate(model, loader, criterion):
    model.eval()
    total, hits, n = 0.0, 0, 0
    for images, targets, weights, joints in loader:
        out = model(images)
        total += criterion(out, targets, weights).item() * len(images)
        idx = out.flatten(2).argmax(-1)
        pred = torch.stack([idx // HM_W, idx % HM_W], -1).float()
        hits += ((pred - joints).norm(dim=-1) < 1.5).sum().item()
        n += len(images)
    model.train()
    return total / n, hits / (n * NUM_JOINTS)


def main():
    torch.manual_seed(0)
    train_ds = SyntheticPoseDataset(512, seed=1)
    val_ds = SyntheticPoseDataset(128, seed=2)
    train_loader = DataLoader(train_ds, batch_size=cfg['data']['samples_per_gpu'], shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=128)

    model = ViTPose()
    criterion = JointsMSELoss(use_target_weight=True)

    optimizer = AdamW(model.parameters(), lr=cfg['optimizer']['lr'], betas=cfg['optimizer']['betas'],
                      weight_decay=cfg['optimizer']['weight_decay'])
    lr_mult = [cfg['optimizer']['paramwise_cfg']['layer_decay_rate']] * cfg['optimizer']['paramwise_cfg']['num_layers']
    layerwise_optimizer = LayerDecayOptimizer(optimizer, lr_mult)

    scheduler = MultiStepLR(optimizer, cfg['lr_config']['step'], 0.1)
    num_warmup_steps = cfg['lr_config']['warmup_iters']
    warmup_factor = cfg['lr_config']['warmup_ratio']
    warmup_scheduler = LambdaLR(
        optimizer, lr_lambda=lambda step: warmup_factor + (1.0 - warmup_factor) * step / num_warmup_steps)

    global_step = 0
    tic = time.time()
    for epoch in range(cfg['total_epochs']):
        model.train()
        total_loss = 0.0
        for images, targets, target_weights, _ in train_loader:
            layerwise_optimizer.zero_grad()
            outputs = model(images)
            loss = criterion(outputs, targets, target_weights)
            loss.backward()
            clip_grad_norm_(model.parameters(), **cfg['optimizer_config']['grad_clip'])
            layerwise_optimizer.step()

            if global_step < num_warmup_steps:
                warmup_scheduler.step()
            global_step += 1
            total_loss += loss.item()
            if global_step % 24 == 0:
                print(f"step {global_step:4d} loss {loss.item() * 1e3:.4f}e-3 "
                      f"lr {optimizer.param_groups[0]['lr']:.3e}")
        scheduler.step()
        val_loss, pck = evaluate(model, val_loader, criterion)
        print(f"[Summary] Epoch [{epoch:03d}/{cfg['total_epochs']:03d}] | Average Loss "
              f"{total_loss / len(train_loader) * 1e3:.4f}e-3 | val loss {val_loss * 1e3:.4f}e-3 "
              f"| val PCK {pck:.3f}")
    print(f"done in {time.time() - tic:.1f}s")


if __name__ == "__main__":
    main()
