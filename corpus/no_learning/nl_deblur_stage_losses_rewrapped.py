"""Multi-stage deblurring network (DGUNet/MPRNet style) on synthetic blurred patches.

Every stage returns a restored image; the loss is the Charbonnier loss plus a
small edge (Laplacian) loss, summed over all the stages.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

PATCH = 20
BATCH = 8
EPOCHS = 6
LR = 2e-3


def gaussian_kernel(size=5, sigma=1.5):
    ax = torch.arange(size, dtype=torch.float32) - (size - 1) / 2
    g = torch.exp(-(ax ** 2) / (2 * sigma ** 2))
    k = torch.outer(g, g)
    return (k / k.sum()).view(1, 1, size, size)


class BlurDataset(Dataset):
    """Sharp patches made of a few bright rectangles, blurred with a fixed Gaussian plus noise."""

    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        sharp = np.zeros((n, 1, PATCH, PATCH), dtype=np.float32)
        for i in range(n):
            for _ in range(rng.randint(2, 5)):
                x0, y0 = rng.randint(0, PATCH - 6, size=2)
                w, h = rng.randint(3, 10, size=2)
                sharp[i, 0, y0:y0 + h, x0:x0 + w] = rng.uniform(0.4, 1.0)
        self.sharp = torch.from_numpy(sharp)
        with torch.no_grad():
            blurred = F.conv2d(self.sharp, gaussian_kernel(), padding=2)
        self.blurred = (blurred + 0.01 * torch.randn_like(blurred)).clamp(0, 1)

    def __len__(self):
        return len(self.sharp)

    def __getitem__(self, idx):
        return self.blurred[idx], self.sharp[idx]


class CharbonnierLoss(nn.Module):
    def __init__(self, eps=1e-3):
        super().__init__()
        self.eps = eps

    def forward(self, x, y):
        diff = x - y
        return torch.mean(torch.sqrt(diff * diff + self.eps * self.eps))


class EdgeLoss(nn.Module):
    def __init__(self):
        super().__init__()
        lap = torch.tensor([[0., 1., 0.], [1., -4., 1.], [0., 1., 0.]]).view(1, 1, 3, 3)
        self.register_buffer("lap", lap)
        self.loss = CharbonnierLoss()

    def forward(self, x, y):
        return self.loss(F.conv2d(x, self.lap, padding=1), F.conv2d(y, self.lap, padding=1))


class Stage(nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(2, ch, 3, padding=1), nn.PReLU(),
            nn.Conv2d(ch, ch, 3, padding=1), nn.PReLU(),
            nn.Conv2d(ch, 1, 3, padding=1),
        )

    def forward(self, current, degraded):
        return current + self.body(torch.cat([current, degraded], dim=1))


class DGUNetLite(nn.Module):
    def __init__(self, n_stages=3):
        super().__init__()
        self.stages = nn.ModuleList([Stage() for _ in range(n_stages)])

    def forward(self, degraded):
        outs = []
        x = degraded
        for stage in self.stages:
            x = stage(x, degraded)
            outs.append(x)
        return outs[::-1]  # last stage first, like DGUNet


def psnr(pred, target):
    mse = F.mse_loss(pred.clamp(0, 1), target).item()
    return 10 * math.log10(1.0 / max(mse, 1e-10))


def main():
    train_loader = DataLoader(BlurDataset(192, seed=1), batch_size=BATCH, shuffle=True)
    val_set = BlurDataset(64, seed=2)

    model = DGUNetLite()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, betas=(0.9, 0.999))
    criterion_char = CharbonnierLoss()
    criterion_edge = EdgeLoss()

    with torch.no_grad():
        print(f"blurred input PSNR: {psnr(val_set.blurred, val_set.sharp):.2f} dB")

    step = 0
    for epoch in range(1, EPOCHS + 1):
        model.train()
        epoch_loss = 0.0
        for input_, target in train_loader:
            optimizer.zero_grad()
            restored = model(input_)

            loss_char = torch.tensor([criterion_char(restored[j], target) for j in range(len(restored))], requires_grad=True).sum()
            loss_edge = torch.tensor([criterion_edge(restored[j], target) for j in range(len(restored))], requires_grad=True).sum()
            loss = loss_char + (0.05 * loss_edge)

            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            step += 1
            if step % 25 == 0:
                print(f"  step {step:4d}  loss {loss.item():.4f}")

        model.eval()
        with torch.no_grad():
            val_psnr = psnr(model(val_set.blurred)[0], val_set.sharp)
        print(f"epoch {epoch}  train loss {epoch_loss / len(train_loader):.4f}  val PSNR {val_psnr:.2f} dB")


if __name__ == "__main__":
    main()
