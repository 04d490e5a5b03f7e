"""Small DDPM trained on a folder of 16x16 images (my own crops, saved as .npy arrays).

A tiny conv net predicts the noise added at a random timestep; the trainer draws batches
from an endless loader, like denoising-diffusion-pytorch's Trainer.
"""
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
rng = np.random.default_rng(0)


def make_folder(root, n=240, size=16):
    yy, xx = np.mgrid[0:size, 0:size]
    for i in range(n):
        cx, cy = rng.uniform(4, 12, size=2)
        r = rng.uniform(2.5, 5)
        colour = rng.uniform(0.2, 1.0, size=3)
        blob = ((xx - cx) ** 2 + (yy - cy) ** 2 < r ** 2).astype(np.float32)
        img = 0.1 + blob[..., None] * colour[None, None, :]
        img = (np.clip(img + rng.normal(0, 0.03, img.shape), 0, 1) * 255).astype(np.uint8)
        if i == 17:
            img = img.mean(-1).astype(np.uint8)
        np.save(root / f"crop_{i:04d}.npy", img)


def to_tensor(img):
    if img.ndim == 2:
        img = img[:, :, None]
    return torch.from_numpy(img.transpose(2, 0, 1).copy()).float().div(255)


class ImageFolderDataset(Dataset):
    def __init__(self, folder, exts=("npy",)):
        self.paths = sorted(p for ext in exts for p in Path(folder).glob(f"**/*.{ext}"))

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        img = np.load(self.paths[index])
        return to_tensor(img)


def cycle(dl):
    while True:
        for data in dl:
            yield data


class SinusoidalPosEmb(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, t):
        half = self.dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half) / (half - 1))
        emb = t.float()[:, None] * freqs[None, :]
        return torch.cat([emb.sin(), emb.cos()], dim=-1)


class TinyUnet(nn.Module):
    def __init__(self, dim=32, channels=3):
        super().__init__()
        self.time_mlp = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, dim), nn.GELU())
        self.inp = nn.Conv2d(channels, dim, 3, padding=1)
        self.down = nn.Conv2d(dim, dim * 2, 4, stride=2, padding=1)
        self.mid = nn.Conv2d(dim * 2, dim * 2, 3, padding=1)
        self.up = nn.ConvTranspose2d(dim * 2, dim, 4, stride=2, padding=1)
        self.out = nn.Conv2d(dim * 2, channels, 3, padding=1)

    def forward(self, x, t):
        h = F.gelu(self.inp(x)) + self.time_mlp(t)[:, :, None, None]
        d = F.gelu(self.down(h))
        d = F.gelu(self.mid(d))
        u = F.gelu(self.up(d))
        return self.out(torch.cat([u, h], dim=1))


class GaussianDiffusion(nn.Module):
    def __init__(self, model, timesteps=200):
        super().__init__()
        self.model = model
        self.num_timesteps = timesteps
        betas = torch.linspace(1e-4, 0.02, timesteps)
        alphas_cumprod = torch.cumprod(1 - betas, dim=0)
        self.register_buffer("sqrt_ac", alphas_cumprod.sqrt())
        self.register_buffer("sqrt_1m_ac", (1 - alphas_cumprod).sqrt())

    def forward(self, img):
        b = img.shape[0]
        img = img * 2 - 1
        t = torch.randint(0, self.num_timesteps, (b,))
        noise = torch.randn_like(img)
        x = self.sqrt_ac[t][:, None, None, None] * img + self.sqrt_1m_ac[t][:, None, None, None] * noise
        return F.mse_loss(self.model(x, t), noise)


class Trainer:
    def __init__(self, diffusion, folder, train_batch_size=16, train_lr=2e-3, train_num_steps=150):
        self.model = diffusion
        self.ds = ImageFolderDataset(folder)
        dl = DataLoader(self.ds, batch_size=train_batch_size, shuffle=True, drop_last=True)
        self.dl = cycle(dl)
        self.opt = torch.optim.Adam(diffusion.parameters(), lr=train_lr)
        self.train_num_steps = train_num_steps
        self.step = 0

    def train(self):
        running = []
        while self.step < self.train_num_steps:
            data = next(self.dl)
            loss = self.model(data)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            running.append(loss.item())
            self.step += 1
            if self.step % 10 == 0:
                print(f"step {self.step}: loss {np.mean(running[-10:]):.4f}")
        print("training complete")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "crop_train"
        os.makedirs(folder)
        make_folder(folder)
        diffusion = GaussianDiffusion(TinyUnet(dim=32))
        trainer = Trainer(diffusion, folder, train_batch_size=16, train_lr=2e-3, train_num_steps=150)
        trainer.train()
