"""EveryDream2-style diffusion training loop: a main config (train.json) plus an optimizer
config (optimizer.json) with a "base" section, AdamW and a constant LR schedule, training a
small noise-prediction UNet with the DDPM epsilon objective. The 16x16 "images" (blobs and
bars on a dark background) are generated here; both JSON configs are written to a temp dir
the way they would sit next to the trainer."""
import argparse
import json
import math
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(42)
np.random.seed(42)

WORKDIR = tempfile.mkdtemp(prefix="ed2_")

TRAIN_JSON = {
    "batch_size": 16,
    "max_epochs": 6,
    "lr": 2e-4,
    "lr_scheduler": "constant",
    "lr_warmup_steps": 0,
    "optimizer_config": os.path.join(WORKDIR, "optimizer.json"),
    "log_step": 16,
    "seed": 555,
}

OPTIMIZER_JSON = {
    "doc": {"lr": "learning rate, if null will use CLI or main JSON config value"},
    "base": {
        "optimizer": "adamw",
        "lr": 1e-6,
        "lr_scheduler": "constant",
        "lr_decay_steps": None,
        "lr_warmup_steps": None,
        "betas": [0.9, 0.999],
        "epsilon": 1e-8,
        "weight_decay": 0.010,
    },
}

with open(os.path.join(WORKDIR, "train.json"), "w") as f:
    json.dump(TRAIN_JSON, f, indent=2)
with open(os.path.join(WORKDIR, "optimizer.json"), "w") as f:
    json.dump(OPTIMIZER_JSON, f, indent=2)


def get_args():
    parser = argparse.ArgumentParser(description="EveryDream2-style training")
    parser.add_argument("--config", type=str, default=os.path.join(WORKDIR, "train.json"))
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--batch_size", type=int, default=None)
    parser.add_argument("--max_epochs", type=int, default=None)
    args, _ = parser.parse_known_args()
    with open(args.config) as f:
        cfg = json.load(f)
    for k, v in cfg.items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)
    return args


class ShapesDataset(Dataset):
    def __init__(self, n, size=16, seed=0):
        rng = np.random.RandomState(seed)
        yy, xx = np.mgrid[0:size, 0:size]
        imgs = np.zeros((n, 1, size, size), dtype=np.float32)
        for i in range(n):
            img = np.zeros((size, size), dtype=np.float32)
            for _ in range(rng.randint(1, 3)):
                if rng.rand() < 0.5:
                    cx, cy = rng.uniform(3, size - 3, 2)
                    r = rng.uniform(2, 4.5)
                    img[(xx - cx) ** 2 + (yy - cy) ** 2 < r * r] = 1.0
                else:
                    x0, y0 = rng.randint(1, size - 6, 2)
                    w, h = rng.randint(2, 6), rng.randint(5, 11)
                    img[y0:y0 + h, x0:x0 + w] = 1.0
            imgs[i, 0] = img
        self.images = torch.from_numpy(imgs * 2.0 - 1.0)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return {"image": self.images[i]}


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.norm1 = nn.GroupNorm(8, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(tdim, cout)
        self.norm2 = nn.GroupNorm(8, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(temb)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class TinyUNet(nn.Module):
    def __init__(self, ch=16, tdim=32):
        super().__init__()
        self.tdim = tdim
        self.time_mlp = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.conv_in = nn.Conv2d(1, ch, 3, padding=1)
        self.down1 = ResBlock(ch, ch, tdim)
        self.down2 = ResBlock(ch, 2 * ch, tdim)
        self.mid = ResBlock(2 * ch, 2 * ch, tdim)
        self.up2 = ResBlock(4 * ch, ch, tdim)
        self.up1 = ResBlock(2 * ch, ch, tdim)
        self.conv_out = nn.Sequential(nn.GroupNorm(8, ch), nn.SiLU(), nn.Conv2d(ch, 1, 3, padding=1))

    def forward(self, x, t):
        temb = self.time_mlp(timestep_embedding(t, self.tdim))
        h0 = self.conv_in(x)
        h1 = self.down1(h0, temb)
        h2 = self.down2(F.avg_pool2d(h1, 2), temb)
        m = self.mid(h2, temb)
        u2 = self.up2(torch.cat([m, h2], 1), temb)
        u1 = self.up1(torch.cat([F.interpolate(u2, scale_factor=2.0), h1], 1), temb)
        return self.conv_out(u1)


class DDPMScheduler:
    def __init__(self, num_train_timesteps=1000):
        betas = torch.linspace(1e-4, 0.02, num_train_timesteps)
        self.alphas_cumprod = torch.cumprod(1.0 - betas, 0)
        self.num_train_timesteps = num_train_timesteps

    def add_noise(self, x0, noise, t):
        a = self.alphas_cumprod[t].sqrt()[:, None, None, None]
        s = (1 - self.alphas_cumprod[t]).sqrt()[:, None, None, None]
        return a * x0 + s * noise


class EveryDreamOptimizer:
    """Builds the optimizer from optimizer.json, falling back on the main config."""

    def __init__(self, args, parameters):
        with open(args.optimizer_config) as f:
            optimizer_config = json.load(f)
        base = optimizer_config["base"]
        self.lr = base.get("lr") or args.lr
        self.lr_scheduler = base.get("lr_scheduler") or args.lr_scheduler
        self.optimizer = torch.optim.AdamW(parameters, lr=self.lr, betas=tuple(base["betas"]),
                                           eps=base["epsilon"],
                                           weight_decay=base["weight_decay"])
        warmup = base.get("lr_warmup_steps") or args.lr_warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)

    def step(self, loss):
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.optimizer.param_groups[0]["params"], 1.0)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)

    def get_lr(self):
        return self.optimizer.param_groups[0]["lr"]


def main():
    args = get_args()
    print(f" * config: {args.config}  lr={args.lr}  batch_size={args.batch_size}  "
          f"max_epochs={args.max_epochs}")
    train_set = ShapesDataset(512, seed=args.seed)
    val_set = ShapesDataset(128, seed=args.seed + 1)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              drop_last=True)
    unet = TinyUNet()
    noise_scheduler = DDPMScheduler()
    ed_optimizer = EveryDreamOptimizer(args, unet.parameters())
    print(f" * optimizer: AdamW, lr {ed_optimizer.get_lr():.2e}, "
          f"scheduler {ed_optimizer.lr_scheduler}")

    gen = torch.Generator().manual_seed(0)
    val_noise = torch.randn(len(val_set), 1, 16, 16, generator=gen)
    val_t = torch.randint(0, noise_scheduler.num_train_timesteps, (len(val_set),), generator=gen)

    def validate():
        unet.eval()
        with torch.no_grad():
            x = noise_scheduler.add_noise(val_set.images, val_noise, val_t)
            pred = unet(x, val_t)
            loss = F.mse_loss(pred, val_noise).item()
        unet.train()
        return loss

    print(f" * val loss before training: {validate():.4f}")
    global_step = 0
    for epoch in range(args.max_epochs):
        unet.train()
        epoch_losses = []
        for batch in train_loader:
            latents = batch["image"]
            noise = torch.randn_like(latents)
            timesteps = torch.randint(0, noise_scheduler.num_train_timesteps,
                                      (latents.shape[0],)).long()
            noisy = noise_scheduler.add_noise(latents, noise, timesteps)
            model_pred = unet(noisy, timesteps)
            loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean")
            ed_optimizer.step(loss)
            epoch_losses.append(loss.item())
            global_step += 1
            if global_step % args.log_step == 0:
                print(f"step {global_step:4d}  loss/step {loss.item():.4f}  "
                      f"lr {ed_optimizer.get_lr():.2e}")
        print(f"epoch {epoch}  loss/epoch {np.mean(epoch_losses):.4f}  "
              f"val loss {validate():.4f}")


if __name__ == "__main__":
    main()
