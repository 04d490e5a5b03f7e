"""Next-frame video prediction with an SSIM loss, in PyTorch Lightning.

Synthetic Moving-MNIST-style clips: two bright blobs bounce around a 64x64 frame for 10 frames;
the model sees the first 5 frames (stacked as channels) and predicts the next 5. The loss is
1 - SSIM per predicted frame, using an SSIM metric module with the pl.metrics (Lightning 1.1)
interface: a functional ssim() plus an SSIM Metric class with update()/compute()/forward().
"""
import time

import lightning.pytorch as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_PAST, N_AHEAD, SIZE = 5, 5, 64


# ---------------------------------------------------------------- ssim (pl.metrics style)
def _gaussian(kernel_size, sigma, dtype, device):
    dist = torch.arange((1 - kernel_size) / 2, (1 + kernel_size) / 2, 1, dtype=dtype, device=device)
    gauss = torch.exp(-torch.pow(dist / sigma, 2) / 2)
    return (gauss / gauss.sum()).unsqueeze(dim=0)


def _gaussian_kernel(channel, kernel_size, sigma, dtype, device):
    kx = _gaussian(kernel_size[0], sigma[0], dtype, device)
    ky = _gaussian(kernel_size[1], sigma[1], dtype, device)
    kernel = torch.matmul(kx.t(), ky)
    return kernel.expand(channel, 1, kernel_size[0], kernel_size[1]).contiguous()


def _ssim_update(preds, target):
    if preds.dtype != target.dtype:
        raise TypeError("Expected `preds` and `target` to have the same data type.")
    if preds.shape != target.shape:
        raise ValueError("Expected `preds` and `target` to have the same shape.")
    if len(preds.shape) != 4:
        raise ValueError("Expected `preds` and `target` to have BxCxHxW shape.")
    return preds, target


def _ssim_compute(preds, target, kernel_size=(11, 11), sigma=(1.5, 1.5), data_range=None, k1=0.01, k2=0.03):
    if data_range is None:
        data_range = max(preds.max() - preds.min(), target.max() - target.min())
    c1 = pow(k1 * data_range, 2)
    c2 = pow(k2 * data_range, 2)
    channel = preds.size(1)
    pad_w = (kernel_size[0] - 1) // 2
    pad_h = (kernel_size[1] - 1) // 2
    preds = F.pad(preds, (pad_w, pad_w, pad_h, pad_h), mode="reflect")
    target = F.pad(target, (pad_w, pad_w, pad_h, pad_h), mode="reflect")
    input_list = torch.cat((preds, target, preds * preds, target * target, preds * target))
    # fold the 5 maps x batch into channels: one depthwise gaussian conv
    n, h, w = input_list.shape[0] * channel, input_list.shape[2], input_list.shape[3]
    kernel = _gaussian_kernel(n, kernel_size, sigma, preds.dtype, preds.device)
    outputs = F.conv2d(input_list.reshape(1, n, h, w), kernel, groups=n)
    outputs = outputs.view(input_list.shape[0], channel, h - 2 * pad_h, w - 2 * pad_w)
    b = preds.size(0)
    mu_pred, mu_target, e_pp, e_tt, e_pt = (outputs[i * b:(i + 1) * b] for i in range(5))
    mu_pred_sq, mu_target_sq, mu_pred_target = mu_pred.pow(2), mu_target.pow(2), mu_pred * mu_target
    sigma_pred_sq = e_pp - mu_pred_sq
    sigma_target_sq = e_tt - mu_target_sq
    sigma_pred_target = e_pt - mu_pred_target
    upper = 2 * sigma_pred_target + c2
    lower = sigma_pred_sq + sigma_target_sq + c2
    ssim_idx = ((2 * mu_pred_target + c1) * upper) / ((mu_pred_sq + mu_target_sq + c1) * lower)
    return ssim_idx[..., pad_h:-pad_h, pad_w:-pad_w].mean()


def ssim(preds, target, kernel_size=(11, 11), sigma=(1.5, 1.5), data_range=None):
    preds, target = _ssim_update(preds, target)
    return _ssim_compute(preds, target, kernel_size, sigma, data_range)


class SSIM(nn.Module):
    def __init__(self, kernel_size=(11, 11), sigma=(1.5, 1.5), data_range=None):
        super().__init__()
        self.kernel_size, self.sigma, self.data_range = kernel_size, sigma, data_range
        self.y_pred, self.y = [], []

    def update(self, preds, target):
        preds, target = _ssim_update(preds, target)
        self.y_pred.append(preds)
        self.y.append(target)

    def compute(self):
        preds = torch.cat(self.y_pred, dim=0)
        target = torch.cat(self.y, dim=0)
        return _ssim_compute(preds, target, self.kernel_size, self.sigma, self.data_range)

    def reset(self):
        self.y_pred, self.y = [], []

    def forward(self, preds, target):
        with torch.no_grad():
            self.update(preds, target)
        cache = (self.y_pred, self.y)
        self.reset()
        self.update(preds, target)
        value = self.compute()
        self.y_pred, self.y = cache
        return value


# ---------------------------------------------------------------- data
class BouncingBlobs(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        T = N_PAST + N_AHEAD
        grid = torch.linspace(0, 1, SIZE)
        yy, xx = torch.meshgrid(grid, grid, indexing="ij")
        clips = []
        for start in range(0, n, 32):
            m = min(32, n - start)
            pos = torch.rand(m, 2, 2, generator=g) * 0.6 + 0.2
            vel = (torch.rand(m, 2, 2, generator=g) - 0.5) * 0.12
            rad = 0.05 + 0.05 * torch.rand(m, 2, 1, generator=g)
            frames = []
            for _ in range(T):
                d2 = (xx - pos[..., 0, None, None]) ** 2 + (yy - pos[..., 1, None, None]) ** 2
                frames.append((torch.exp(-d2 / (2 * rad[..., None] ** 2)).amax(1) * 255).to(torch.uint8))
                pos = pos + vel
                vel = torch.where((pos < 0.05) | (pos > 0.95), -vel, vel)
                pos = pos.clamp(0.05, 0.95)
            clips.append(torch.stack(frames, 1))
        self.clips = torch.cat(clips)

    def __len__(self):
        return len(self.clips)

    def __getitem__(self, idx):
        return self.clips[idx].float().div(255).unsqueeze(1)


# ---------------------------------------------------------------- model
class FramePredictor(nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(N_PAST, ch, 3, 2, 1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(ch, 2 * ch, 3, 2, 1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(2 * ch, 2 * ch, 3, 1, 1), nn.ReLU())
        self.dec2 = nn.Sequential(nn.ConvTranspose2d(2 * ch, ch, 4, 2, 1), nn.ReLU())
        self.dec1 = nn.Sequential(nn.ConvTranspose2d(2 * ch, ch, 4, 2, 1), nn.ReLU())
        self.out = nn.Conv2d(ch + N_PAST, N_AHEAD, 3, 1, 1)

    def forward(self, x):
        b = x.shape[0]
        x = x.view(b, N_PAST, SIZE, SIZE)
        e1 = self.enc1(x)
        e2 = self.mid(self.enc2(e1))
        d1 = self.dec1(torch.cat([self.dec2(e2), e1], 1))
        y = torch.sigmoid(self.out(torch.cat([d1, x], 1)))
        return y.view(b, N_AHEAD, 1, SIZE, SIZE)


class video_pred(pl.LightningModule):
    def __init__(self, model=None, lr=2e-3):
        super().__init__()
        self.model = model
        self.lr = lr
        self.accuracy = SSIM(data_range=1.0)
        self.n_steps_past = N_PAST
        self.n_steps_ahead = N_AHEAD
        self.t0 = time.time()

    def forward(self, x):
        return self.model(x)

    def SSIM_loss(self, y_hat, y):
        loss_4_each_frame = [1 - self.accuracy(y_hat[:, t], y[:, t]) for t in range(self.n_steps_ahead)]
        return torch.stack(loss_4_each_frame).mean()

    def training_step(self, batch, batch_idx):
        x, y = batch[:, :self.n_steps_past], batch[:, self.n_steps_past:]
        y_hat = self.forward(x)
        loss = self.SSIM_loss(y_hat, y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        if self.global_step % 10 == 0:
            print(f"step {self.global_step:3d}  loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch[:, :self.n_steps_past], batch[:, self.n_steps_past:]
        y_hat = self.forward(x)
        self.log("val_loss", self.SSIM_loss(y_hat, y), on_epoch=True)
        self.log("val_mse", F.mse_loss(y_hat, y), on_epoch=True)

    def on_train_epoch_end(self):
        m = self.trainer.callback_metrics
        print(f"epoch {self.current_epoch}: train_loss {m['train_loss']:.4f}  val_loss {m['val_loss']:.4f}  "
              f"val_mse {m['val_mse']:.5f}  ({time.time() - self.t0:.1f}s)")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def main():
    train_loader = DataLoader(BouncingBlobs(384, seed=1), batch_size=16, shuffle=True)
    val_loader = DataLoader(BouncingBlobs(32, seed=2), batch_size=16)
    model = video_pred(model=FramePredictor())
    trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
