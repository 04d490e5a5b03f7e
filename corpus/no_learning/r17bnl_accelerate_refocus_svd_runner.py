"""Learn-to-refocus: fine-tune a small video-diffusion denoiser to generate a focal stack.

Given one input photo, the model generates a short "video" whose frames sweep the focus plane
from near to far.  Training follows the SVD runner: frames are noised with the DDPM schedule,
the UNet sees the noisy frame, the conditioning photo and the frame's focus position, and is
trained to predict the noise.  Runs under accelerate.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, Dataset

NUM_FRAMES = 4
SIZE = 16


def gaussian_kernels(sigmas, ksize=9):
    ax = torch.arange(ksize) - ksize // 2
    kernels = []
    for s in sigmas:
        if s < 1e-3:
            k = torch.zeros(ksize, ksize)
            k[ksize // 2, ksize // 2] = 1.0
        else:
            g = torch.exp(-(ax.float() ** 2) / (2 * s * s))
            k = torch.outer(g, g)
        kernels.append(k / k.sum())
    return torch.stack(kernels)[:, None]


class FocalStackDataset(Dataset):
    """Synthetic two-plane scenes: a textured background and a bright foreground card."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        bg = torch.rand(n, 1, SIZE // 4, SIZE // 4, generator=g)
        bg = F.interpolate(bg, size=(SIZE, SIZE), mode="nearest") * 0.6
        fg = torch.zeros(n, 1, SIZE, SIZE)
        mask = torch.zeros(n, 1, SIZE, SIZE)
        for i in range(n):
            x0, y0 = torch.randint(1, SIZE - 9, (2,), generator=g).tolist()
            w, h = torch.randint(4, 8, (2,), generator=g).tolist()
            fg[i, :, y0:y0 + h, x0:x0 + w] = 0.7 + 0.3 * torch.rand(1, generator=g)
            mask[i, :, y0:y0 + h, x0:x0 + w] = 1.0
        focus = torch.linspace(0.0, 1.0, NUM_FRAMES)
        k_fg = gaussian_kernels([2.2 * abs(0.0 - f) for f in focus])
        k_bg = gaussian_kernels([2.2 * abs(1.0 - f) for f in focus])
        frames = []
        for k in range(NUM_FRAMES):
            fg_b = F.conv2d(fg, k_fg[k:k + 1], padding=4)
            m_b = F.conv2d(mask, k_fg[k:k + 1], padding=4)
            bg_b = F.conv2d(bg, k_bg[k:k + 1], padding=4)
            frames.append(fg_b + (1 - m_b) * bg_b)
        self.frames = torch.stack(frames, dim=1) * 2 - 1
        self.cond = (fg + (1 - mask) * bg) * 2 - 1
        self.focus = focus

    def __len__(self):
        return len(self.cond)

    def __getitem__(self, i):
        return {"pixel_values": self.frames[i], "cond_image": self.cond[i]}


class Block(nn.Module):
    def __init__(self, cin, cout, emb_dim):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.emb = nn.Linear(emb_dim, cout)
        self.norm = nn.GroupNorm(8, cout)

    def forward(self, x, emb):
        h = F.silu(self.conv1(x)) + self.emb(emb)[:, :, None, None]
        return F.silu(self.norm(self.conv2(h)))


class TinyRefocusUNet(nn.Module):
    def __init__(self, ch=16, emb_dim=32):
        super().__init__()
        self.emb_dim = emb_dim
        self.time_mlp = nn.Sequential(nn.Linear(emb_dim, emb_dim), nn.SiLU(), nn.Linear(emb_dim, emb_dim))
        self.focus_mlp = nn.Sequential(nn.Linear(1, emb_dim), nn.SiLU(), nn.Linear(emb_dim, emb_dim))
        self.down1 = Block(2, ch, emb_dim)
        self.down2 = Block(ch, 2 * ch, emb_dim)
        self.mid = Block(2 * ch, 2 * ch, emb_dim)
        self.up = Block(3 * ch, ch, emb_dim)
        self.out = nn.Conv2d(ch, 1, 1)

    def timestep_embedding(self, t):
        half = self.emb_dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device) / half)
        args = t.float()[:, None] * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    def forward(self, noisy, cond, timesteps, focus):
        emb = self.time_mlp(self.timestep_embedding(timesteps)) + self.focus_mlp(focus[:, None])
        h1 = self.down1(torch.cat([noisy, cond], dim=1), emb)
        h2 = self.down2(F.avg_pool2d(h1, 2), emb)
        h2 = self.mid(h2, emb)
        up = F.interpolate(h2, scale_factor=2, mode="nearest")
        return self.out(self.up(torch.cat([up, h1], dim=1), emb))


def main():
    seed = 0
    learning_rate = 1e-3
    num_epochs = 10
    train_batch_size = 4
    gradient_accumulation_steps = 1
    max_grad_norm = 1.0
    num_train_timesteps = 1000

    accelerator = Accelerator(gradient_accumulation_steps=gradient_accumulation_steps, cpu=True)
    set_seed(seed)

    betas = torch.linspace(1e-4, 0.02, num_train_timesteps)
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)

    train_dataset = FocalStackDataset(80, seed=1)
    val_dataset = FocalStackDataset(32, seed=2)
    focus = train_dataset.focus
    train_dataloader = DataLoader(train_dataset, batch_size=train_batch_size, shuffle=True)

    unet = TinyRefocusUNet()
    optimizer = torch.optim.AdamW(unet.parameters(), lr=learning_rate, weight_decay=1e-2)
    max_train_steps = num_epochs * math.ceil(len(train_dataloader) / gradient_accumulation_steps)
    lr_lambda = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 10) * max(0.1, 1 - s / max_train_steps))

    unet, optimizer, train_dataloader, lr_lambda = accelerator.prepare(
        unet, optimizer, train_dataloader, lr_lambda)

    def denoise_loss(batch, generator=None):
        frames = batch["pixel_values"]
        bsz = frames.shape[0]
        latents = frames.reshape(bsz * NUM_FRAMES, 1, SIZE, SIZE)
        cond = batch["cond_image"].repeat_interleave(NUM_FRAMES, dim=0)
        frame_focus = focus.repeat(bsz).to(latents.device)
        noise = torch.randn(latents.shape, generator=generator)
        timesteps = torch.randint(0, num_train_timesteps, (bsz,), generator=generator)
        timesteps = timesteps.repeat_interleave(NUM_FRAMES)
        a = alphas_cumprod[timesteps].view(-1, 1, 1, 1)
        noisy_latents = a.sqrt() * latents + (1 - a).sqrt() * noise
        model_pred = unet(noisy_latents, cond, timesteps, frame_focus)
        return F.mse_loss(model_pred.float(), noise.float(), reduction="mean")

    @torch.no_grad()
    def validate():
        unet.eval()
        g = torch.Generator().manual_seed(123)
        batch = {"pixel_values": val_dataset.frames, "cond_image": val_dataset.cond}
        val = sum(denoise_loss(batch, generator=g).item() for _ in range(2)) / 2
        unet.train()
        return val

    print(f"Num examples = {len(train_dataset)}, Num epochs = {num_epochs}, "
          f"Total optimization steps = {max_train_steps}")
    print(f"epoch -1 val denoise loss {validate():.4f}")
    global_step = 0
    for epoch in range(num_epochs):
        unet.train()
        train_loss = 0.0
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(unet):
                loss = denoise_loss(batch)
                avg_loss = accelerator.gather(loss.repeat(train_batch_size)).mean()
                train_loss += avg_loss.item() / gradient_accumulation_steps

                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(unet.parameters(), max_grad_norm)
                lr_lambda.step()
                optimizer.zero_grad()

            if accelerator.sync_gradients:
                global_step += 1
                if global_step % 50 == 0:
                    print(f"step {global_step:4d} train_loss {train_loss:.4f} "
                          f"lr {lr_lambda.get_last_lr()[0]:.2e}")
                train_loss = 0.0
        print(f"epoch {epoch} val denoise loss {validate():.4f}")


if __name__ == "__main__":
    main()
