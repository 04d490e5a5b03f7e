"""Train an improved-diffusion style UNet (learned sigmas, attention at 16x16) on synthetic 64x64 images."""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def create_argparser():
    defaults = dict(
        image_size=32,
        num_channels=32,
        num_res_blocks=2,
        attention_resolutions="16,8",
        learn_sigma=True,
        diffusion_steps=1000,
        lr=1e-4,
        batch_size=8,
        num_images=32,
        epochs=2,
        log_interval=2,
    )
    parser = argparse.ArgumentParser()
    for k, v in defaults.items():
        parser.add_argument(f"--{k}", type=type(v) if not isinstance(v, bool) else lambda s: s.lower() == "true", default=v)
    return parser


class BlobImages(Dataset):
    def __init__(self, n, size, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
        imgs = []
        for _ in range(n):
            img = torch.zeros(3, size, size)
            for _ in range(3):
                cx, cy = (torch.rand(2, generator=g) * 1.6 - 0.8).tolist()
                r = 0.1 + 0.3 * torch.rand(1, generator=g).item()
                col = torch.rand(3, 1, 1, generator=g)
                img += col * torch.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * r * r))
            imgs.append(img.clamp(0, 1) * 2 - 1)
        self.imgs = torch.stack(imgs)

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return self.imgs[i], {}


def timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = timesteps[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, ch, emb_ch, out_ch=None):
        super().__init__()
        out_ch = out_ch or ch
        self.in_layers = nn.Sequential(nn.GroupNorm(32, ch), nn.SiLU(), nn.Conv2d(ch, out_ch, 3, padding=1))
        self.emb_layers = nn.Sequential(nn.SiLU(), nn.Linear(emb_ch, out_ch))
        self.out_layers = nn.Sequential(nn.GroupNorm(32, out_ch), nn.SiLU(), nn.Dropout(0.0), nn.Conv2d(out_ch, out_ch, 3, padding=1))
        self.skip = nn.Identity() if out_ch == ch else nn.Conv2d(ch, out_ch, 1)

    def forward(self, x, emb):
        h = self.in_layers(x)
        h = h + self.emb_layers(emb)[:, :, None, None]
        h = self.out_layers(h)
        return self.skip(x) + h


class AttentionBlock(nn.Module):
    def __init__(self, ch, num_heads=1):
        super().__init__()
        self.num_heads = num_heads
        self.norm = nn.GroupNorm(32, ch)
        self.qkv = nn.Conv1d(ch, ch * 3, 1)
        self.proj_out = nn.Conv1d(ch, ch, 1)

    def forward(self, x):
        b, c, *spatial = x.shape
        x = x.reshape(b, c, -1)
        qkv = self.qkv(self.norm(x)).reshape(b * self.num_heads, -1, x.shape[2])
        q, k, v = torch.split(qkv, qkv.shape[1] // 3, dim=1)
        scale = 1 / math.sqrt(math.sqrt(q.shape[1]))
        weight = torch.einsum("bct,bcs->bts", q * scale, k * scale)
        weight = torch.softmax(weight.float(), dim=-1)
        h = torch.einsum("bts,bcs->bct", weight, v).reshape(b, -1, x.shape[-1])
        return (x + self.proj_out(h)).reshape(b, c, *spatial)


class UNetModel(nn.Module):
    def __init__(self, image_size, model_channels, out_channels, num_res_blocks, attention_resolutions, channel_mult=(1, 2, 2, 2)):
        super().__init__()
        self.model_channels = model_channels
        emb_ch = model_channels * 4
        self.time_embed = nn.Sequential(nn.Linear(model_channels, emb_ch), nn.SiLU(), nn.Linear(emb_ch, emb_ch))
        self.input_blocks = nn.ModuleList([nn.ModuleList([nn.Conv2d(3, model_channels, 3, padding=1)])])
        chans, ch, ds = [model_channels], model_channels, 1
        for level, mult in enumerate(channel_mult):
            for _ in range(num_res_blocks):
                layers = [ResBlock(ch, emb_ch, mult * model_channels)]
                ch = mult * model_channels
                if image_size // ds in attention_resolutions:
                    layers.append(AttentionBlock(ch))
                self.input_blocks.append(nn.ModuleList(layers))
                chans.append(ch)
            if level != len(channel_mult) - 1:
                self.input_blocks.append(nn.ModuleList([nn.Conv2d(ch, ch, 3, stride=2, padding=1)]))
                chans.append(ch)
                ds *= 2
        self.middle_block = nn.ModuleList([ResBlock(ch, emb_ch), AttentionBlock(ch), ResBlock(ch, emb_ch)])
        self.output_blocks = nn.ModuleList()
        for level, mult in list(enumerate(channel_mult))[::-1]:
            for i in range(num_res_blocks + 1):
                layers = [ResBlock(ch + chans.pop(), emb_ch, model_channels * mult)]
                ch = model_channels * mult
                if image_size // ds in attention_resolutions:
                    layers.append(AttentionBlock(ch))
                if level and i == num_res_blocks:
                    layers.append(nn.Upsample(scale_factor=2, mode="nearest"))
                    ds //= 2
                self.output_blocks.append(nn.ModuleList(layers))
        self.out = nn.Sequential(nn.GroupNorm(32, ch), nn.SiLU(), nn.Conv2d(model_channels, out_channels, 3, padding=1))

    @staticmethod
    def _run(layers, h, emb):
        for layer in layers:
            h = layer(h, emb) if isinstance(layer, ResBlock) else layer(h)
        return h

    def forward(self, x, timesteps):
        emb = self.time_embed(timestep_embedding(timesteps, self.model_channels))
        hs, h = [], x
        for block in self.input_blocks:
            h = self._run(block, h, emb)
            hs.append(h)
        h = self._run(self.middle_block, h, emb)
        for block in self.output_blocks:
            h = self._run(block, torch.cat([h, hs.pop()], dim=1), emb)
        return self.out(h)


class GaussianDiffusion:
    def __init__(self, steps):
        betas = np.linspace(1e-4 * 1000 / steps, 0.02 * 1000 / steps, steps, dtype=np.float64)
        alphas_cumprod = np.cumprod(1.0 - betas)
        self.num_timesteps = steps
        self.sqrt_ac = torch.tensor(np.sqrt(alphas_cumprod), dtype=torch.float32)
        self.sqrt_1m_ac = torch.tensor(np.sqrt(1.0 - alphas_cumprod), dtype=torch.float32)

    def q_sample(self, x_start, t, noise):
        return self.sqrt_ac[t][:, None, None, None] * x_start + self.sqrt_1m_ac[t][:, None, None, None] * noise

    def training_losses(self, model, x_start, t):
        noise = torch.randn_like(x_start)
        x_t = self.q_sample(x_start, t, noise)
        model_output = model(x_t, t)
        eps, var_values = torch.split(model_output, 3, dim=1)
        mse = ((noise - eps) ** 2).mean(dim=(1, 2, 3))
        vb = 1e-3 * (var_values ** 2).mean(dim=(1, 2, 3))
        return {"loss": mse + vb, "mse": mse, "vb": vb}


def main():
    args = create_argparser().parse_args()
    torch.manual_seed(0)
    attention_ds = [int(r) for r in args.attention_resolutions.split(",")]
    model = UNetModel(args.image_size, args.num_channels, 6 if args.learn_sigma else 3,
                      args.num_res_blocks, attention_ds)
    diffusion = GaussianDiffusion(args.diffusion_steps)
    print(f"creating model... {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    data = DataLoader(BlobImages(args.num_images, args.image_size), batch_size=args.batch_size, shuffle=True, drop_last=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)

    step = 0
    for epoch in range(args.epochs):
        for batch, cond in data:
            t = torch.randint(0, diffusion.num_timesteps, (batch.shape[0],))
            losses = diffusion.training_losses(model, batch, t)
            loss = losses["loss"].mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % args.log_interval == 0:
                print(f"step {step:4d} | loss {loss.item():.4f} | mse {losses['mse'].mean().item():.4f} | vb {losses['vb'].mean().item():.5f}")
        print(f"epoch {epoch} done, {step} steps")


if __name__ == "__main__":
    main()
