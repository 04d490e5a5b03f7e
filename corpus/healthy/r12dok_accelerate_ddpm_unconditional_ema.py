"""Unconditional DDPM training with accelerate, after diffusers'
examples/unconditional_image_generation/train_unconditional.py.

diffusers and the image dataset are not used: the script carries a small DDPMScheduler
(linear betas, 1000 steps, add_noise), the old EMAModel (inv_gamma/power warm-up of the decay),
a cosine-with-warm-up schedule like get_scheduler("cosine") and a tiny time-conditioned
U-Net; the data are synthetic 1x16x16 images of discs and squares scaled to [-1, 1]. The
training loop is the script's: random timesteps, epsilon-prediction MSE, accelerator.accumulate,
clip_grad_norm_ on sync steps, optimizer.step, lr_scheduler.step, ema_model.step and
`param.grad = None` for every parameter.
"""
import argparse
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.optim.lr_scheduler import LambdaLR


def parse_args():
    parser = argparse.ArgumentParser(description="Simple example of a training script.")
    parser.add_argument("--resolution", type=int, default=16)
    parser.add_argument("--train_batch_size", type=int, default=16)
    parser.add_argument("--eval_batch_size", type=int, default=64)
    parser.add_argument("--num_epochs", type=int, default=4)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--lr_scheduler", type=str, default="cosine")
    parser.add_argument("--lr_warmup_steps", type=int, default=30)
    parser.add_argument("--adam_beta1", type=float, default=0.95)
    parser.add_argument("--adam_beta2", type=float, default=0.999)
    parser.add_argument("--adam_weight_decay", type=float, default=1e-6)
    parser.add_argument("--adam_epsilon", type=float, default=1e-08)
    parser.add_argument("--use_ema", action="store_true", default=True)
    parser.add_argument("--ema_inv_gamma", type=float, default=1.0)
    parser.add_argument("--ema_power", type=float, default=3 / 4)
    parser.add_argument("--ema_max_decay", type=float, default=0.9999)
    parser.add_argument("--mixed_precision", type=str, default="no", choices=["no", "fp16", "bf16"])
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


class DDPMScheduler:
    def __init__(self, num_train_timesteps=1000, beta_start=0.0001, beta_end=0.02):
        self.num_train_timesteps = num_train_timesteps
        self.betas = torch.linspace(beta_start, beta_end, num_train_timesteps, dtype=torch.float32)
        self.alphas = 1.0 - self.betas
        self.alphas_cumprod = torch.cumprod(self.alphas, dim=0)

    def add_noise(self, original_samples, noise, timesteps):
        alphas_cumprod = self.alphas_cumprod.to(original_samples.device)
        sqrt_alpha_prod = alphas_cumprod[timesteps] ** 0.5
        sqrt_one_minus_alpha_prod = (1 - alphas_cumprod[timesteps]) ** 0.5
        sqrt_alpha_prod = sqrt_alpha_prod.view(-1, 1, 1, 1)
        sqrt_one_minus_alpha_prod = sqrt_one_minus_alpha_prod.view(-1, 1, 1, 1)
        return sqrt_alpha_prod * original_samples + sqrt_one_minus_alpha_prod * noise


class EMAModel:
    """Exponential Moving Average of models weights"""

    def __init__(self, model, update_after_step=0, inv_gamma=1.0, power=2 / 3, min_value=0.0, max_value=0.9999):
        self.averaged_model = copy.deepcopy(model).eval()
        self.averaged_model.requires_grad_(False)

        self.update_after_step = update_after_step
        self.inv_gamma = inv_gamma
        self.power = power
        self.min_value = min_value
        self.max_value = max_value

        self.decay = 0.0
        self.optimization_step = 0

    def get_decay(self, optimization_step):
        step = max(0, optimization_step - self.update_after_step - 1)
        value = 1 - (1 + step / self.inv_gamma) ** -self.power

        if step <= 0:
            return 0.0

        return max(self.min_value, min(value, self.max_value))

    @torch.no_grad()
    def step(self, new_model):
        ema_state_dict = {}
        ema_params = self.averaged_model.state_dict()

        self.decay = self.get_decay(self.optimization_step)

        for key, param in new_model.named_parameters():
            ema_param = ema_params[key]
            if not param.requires_grad:
                ema_params[key].copy_(param.to(dtype=ema_param.dtype).data)
                ema_param = ema_params[key]
            else:
                ema_param.mul_(self.decay)
                ema_param.add_(param.data.to(dtype=ema_param.dtype), alpha=1 - self.decay)

            ema_state_dict[key] = ema_param

        for key, param in new_model.named_buffers():
            ema_state_dict[key] = param

        self.averaged_model.load_state_dict(ema_state_dict, strict=False)
        self.optimization_step += 1


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))

    return LambdaLR(optimizer, lr_lambda)


def timestep_embedding(timesteps, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32, device=timesteps.device) / half)
    args = timesteps.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, in_ch, out_ch, temb_ch):
        super().__init__()
        self.norm1 = nn.GroupNorm(8, in_ch)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.temb_proj = nn.Linear(temb_ch, out_ch)
        self.norm2 = nn.GroupNorm(8, out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1)
        self.skip = nn.Conv2d(in_ch, out_ch, 1) if in_ch != out_ch else nn.Identity()

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class UNet2DOutput:
    def __init__(self, sample):
        self.sample = sample


class TinyUNet2DModel(nn.Module):
    def __init__(self, in_channels=1, out_channels=1, ch=16):
        super().__init__()
        self.ch = ch
        self.time_mlp = nn.Sequential(nn.Linear(ch, ch * 4), nn.SiLU(), nn.Linear(ch * 4, ch * 4))
        self.conv_in = nn.Conv2d(in_channels, ch, 3, padding=1)
        self.down1 = ResBlock(ch, ch, ch * 4)
        self.downsample = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.mid = ResBlock(ch, ch * 2, ch * 4)
        self.upsample = nn.Conv2d(ch * 2, ch, 3, padding=1)
        self.up1 = ResBlock(ch * 2, ch, ch * 4)
        self.norm_out = nn.GroupNorm(8, ch)
        self.conv_out = nn.Conv2d(ch, out_channels, 3, padding=1)

    def forward(self, sample, timestep):
        temb = self.time_mlp(timestep_embedding(timestep, self.ch))
        h0 = self.conv_in(sample)
        h1 = self.down1(h0, temb)
        h = self.mid(self.downsample(h1), temb)
        h = self.upsample(F.interpolate(h, scale_factor=2, mode="nearest"))
        h = self.up1(torch.cat([h, h1], dim=1), temb)
        return UNet2DOutput(self.conv_out(F.silu(self.norm_out(h))))


class ShapesDataset(torch.utils.data.Dataset):
    def __init__(self, n, resolution, seed):
        g = torch.Generator().manual_seed(seed)
        coords = torch.arange(resolution).float()
        yy, xx = torch.meshgrid(coords, coords, indexing="ij")
        images = []
        for _ in range(n):
            r = 2.5 + 3.0 * torch.rand(1, generator=g).item()
            cy, cx = (r + torch.rand(2, generator=g) * (resolution - 2 * r)).tolist()
            if torch.rand(1, generator=g).item() < 0.5:
                img = ((yy - cy) ** 2 + (xx - cx) ** 2 <= r * r).float()
            else:
                img = (((yy - cy).abs() <= r * 0.8) & ((xx - cx).abs() <= r * 0.8)).float()
            images.append(img)
        self.images = torch.stack(images).unsqueeze(1)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        img = self.images[idx]
        if torch.rand(1).item() < 0.5:  # RandomHorizontalFlip
            img = img.flip(-1)
        return {"input": img * 2.0 - 1.0}  # ToTensor + Normalize([0.5], [0.5])


def main(args):
    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision=args.mixed_precision,
        cpu=True,
    )
    set_seed(args.seed)

    model = TinyUNet2DModel()
    noise_scheduler = DDPMScheduler(num_train_timesteps=1000)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=args.learning_rate,
        betas=(args.adam_beta1, args.adam_beta2),
        weight_decay=args.adam_weight_decay,
        eps=args.adam_epsilon,
    )

    dataset = ShapesDataset(512, args.resolution, seed=1)
    train_dataloader = torch.utils.data.DataLoader(dataset, batch_size=args.train_batch_size, shuffle=True)

    lr_scheduler = get_cosine_schedule_with_warmup(
        optimizer,
        num_warmup_steps=args.lr_warmup_steps,
        num_training_steps=(len(train_dataloader) * args.num_epochs) // args.gradient_accumulation_steps,
    )

    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, lr_scheduler
    )

    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)

    ema_model = EMAModel(model, inv_gamma=args.ema_inv_gamma, power=args.ema_power, max_value=args.ema_max_decay)

    # fixed held-out batch to compare the raw and the EMA weights
    g = torch.Generator().manual_seed(123)
    val_images = ShapesDataset(args.eval_batch_size, args.resolution, seed=2).images * 2.0 - 1.0
    val_noise = torch.randn(val_images.shape, generator=g)
    val_timesteps = torch.randint(0, noise_scheduler.num_train_timesteps, (args.eval_batch_size,), generator=g)
    val_noisy = noise_scheduler.add_noise(val_images, val_noise, val_timesteps)

    def val_loss(net):
        net.eval()
        with torch.no_grad():
            loss = F.mse_loss(net(val_noisy, val_timesteps).sample, val_noise).item()
        net.train()
        return loss

    accelerator.print(f"***** Running training *****  num examples = {len(dataset)}, "
                      f"steps per epoch = {num_update_steps_per_epoch}, epochs = {args.num_epochs}")
    accelerator.print(f"val loss at init: {val_loss(model):.4f}")

    global_step = 0
    for epoch in range(args.num_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            clean_images = batch["input"]
            # Sample noise that we'll add to the images
            noise = torch.randn(clean_images.shape).to(clean_images.device)
            bsz = clean_images.shape[0]
            # Sample a random timestep for each image
            timesteps = torch.randint(
                0, noise_scheduler.num_train_timesteps, (bsz,), device=clean_images.device
            ).long()

            # Add noise to the clean images according to the noise magnitude at each timestep
            # (this is the forward diffusion process)
            noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)

            with accelerator.accumulate(model):
                # Predict the noise residual
                noise_pred = model(noisy_images, timesteps).sample
                loss = F.mse_loss(noise_pred, noise)
                accelerator.backward(loss)

                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                lr_scheduler.step()
                if args.use_ema:
                    ema_model.step(model)
                for param in model.parameters():
                    param.grad = None

            # Checks if the accelerator has performed an optimization step behind the scenes
            if accelerator.sync_gradients:
                global_step += 1

            logs = {"loss": loss.detach().item(), "lr": lr_scheduler.get_last_lr()[0], "step": global_step}
            if args.use_ema:
                logs["ema_decay"] = ema_model.decay
            if global_step % 10 == 0 or global_step == 1:
                accelerator.print(f"Epoch {epoch} " + ", ".join(
                    f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in logs.items()))

        accelerator.wait_for_everyone()
        accelerator.print(f"epoch {epoch} done: val loss model {val_loss(accelerator.unwrap_model(model)):.4f}, "
                          f"ema {val_loss(ema_model.averaged_model):.4f}")
        ema_model.averaged_model.eval()

    accelerator.end_training()


if __name__ == "__main__":
    args = parse_args()
    main(args)
