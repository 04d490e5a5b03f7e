"""Unconditional DDPM on small synthetic "sprite" images (8x8, blobs and bars).

A residual MLP denoiser predicts the noise added at a random diffusion step; the loss is the MSE between
the predicted and the true noise. The denoiser is kept in float16 (weight_dtype) to save memory,
as in the AnimateDiff / Magic Animate training scripts.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(3)
np.random.seed(3)

IMAGE_SIZE = 8
NUM_TRAIN_TIMESTEPS = 1000
BATCH_SIZE = 32
EPOCHS = 6
LEARNING_RATE = 1e-4
ADAM_BETA1, ADAM_BETA2 = 0.9, 0.999
ADAM_WEIGHT_DECAY = 1e-2
ADAM_EPSILON = 1e-8
weight_dtype = torch.float16


class SpriteDataset(Dataset):
    def __init__(self, n):
        yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE]
        imgs = np.zeros((n, 1, IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32)
        for i in range(n):
            if np.random.rand() < 0.5:
                cy, cx = np.random.uniform(2, 6, 2)
                r = np.random.uniform(1.2, 3)
                imgs[i, 0] = ((yy - cy) ** 2 + (xx - cx) ** 2 < r ** 2)
            else:
                c = np.random.randint(1, 7)
                w = np.random.randint(1, 3)
                if np.random.rand() < 0.5:
                    imgs[i, 0, :, c:c + w] = 1.0
                else:
                    imgs[i, 0, c:c + w, :] = 1.0
        self.images = torch.from_numpy(imgs * 2.0 - 1.0)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx]


def timestep_embedding(timesteps, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    args = timesteps.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResidualMLPBlock(nn.Module):
    def __init__(self, dim, temb_dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim)
        self.time_emb_proj = nn.Linear(temb_dim, dim)
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, x, temb):
        h = self.fc1(F.silu(self.norm(x))) + self.time_emb_proj(F.silu(temb))
        return x + self.fc2(F.silu(h))


class DenoiserMLP(nn.Module):
    def __init__(self, hidden=256, temb_dim=64, n_blocks=3):
        super().__init__()
        self.temb_dim = temb_dim
        self.time_embedding = nn.Sequential(nn.Linear(temb_dim, temb_dim), nn.SiLU(), nn.Linear(temb_dim, temb_dim))
        self.proj_in = nn.Linear(IMAGE_SIZE * IMAGE_SIZE, hidden)
        self.blocks = nn.ModuleList([ResidualMLPBlock(hidden, temb_dim) for _ in range(n_blocks)])
        self.norm_out = nn.LayerNorm(hidden)
        self.proj_out = nn.Linear(hidden, IMAGE_SIZE * IMAGE_SIZE)

    def forward(self, sample, timesteps):
        temb = self.time_embedding(timestep_embedding(timesteps, self.temb_dim).to(sample.dtype))
        h = self.proj_in(sample.flatten(1))
        for block in self.blocks:
            h = block(h, temb)
        return self.proj_out(F.silu(self.norm_out(h))).view_as(sample)


class DDPMScheduler:
    def __init__(self, num_train_timesteps):
        self.betas = torch.linspace(1e-4, 0.02, num_train_timesteps)
        self.alphas_cumprod = torch.cumprod(1.0 - self.betas, dim=0)

    def add_noise(self, original, noise, timesteps):
        sqrt_alpha_prod = self.alphas_cumprod[timesteps].sqrt()[:, None, None, None]
        sqrt_one_minus = (1 - self.alphas_cumprod[timesteps]).sqrt()[:, None, None, None]
        return sqrt_alpha_prod * original + sqrt_one_minus * noise


def main():
    train_dataset = SpriteDataset(1024)
    train_dataloader = DataLoader(train_dataset, batch_size=BATCH_SIZE, shuffle=True)
    model = DenoiserMLP()
    model.to(dtype=weight_dtype)
    noise_scheduler = DDPMScheduler(NUM_TRAIN_TIMESTEPS)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, betas=(ADAM_BETA1, ADAM_BETA2),
                                  weight_decay=ADAM_WEIGHT_DECAY, eps=ADAM_EPSILON)
    print(f"denoiser parameters: {sum(p.numel() for p in model.parameters()) / 1e3:.1f}K, dtype {weight_dtype}")
    global_step = 0
    for epoch in range(EPOCHS):
        model.train()
        train_loss = 0.0
        for step, clean_images in enumerate(train_dataloader):
            noise = torch.randn_like(clean_images)
            timesteps = torch.randint(0, NUM_TRAIN_TIMESTEPS, (clean_images.shape[0],))
            noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)
            model_pred = model(noisy_images.to(weight_dtype), timesteps)
            loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
            global_step += 1
            if global_step % 10 == 0 or global_step <= 3:
                print(f"step {global_step}: loss {loss.item():.4f} lr {LEARNING_RATE}")
        print(f"epoch {epoch}: train_loss {train_loss / len(train_dataloader):.4f}")


if __name__ == "__main__":
    main()
