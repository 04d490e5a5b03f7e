"""x2 super-resolution with a small SRResNet-style generator (the MSE pre-training stage of SRGAN).

High-resolution patches are smooth random images; the low-resolution inputs are
their 2x2 average-pooled versions. The learning rate is decayed by StepLR.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

epochs = 10
batch_size = 16
lr = 1e-3
upscale_factor = 2


class PatchDataset(Dataset):
    def __init__(self, n, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        coarse = torch.rand(n, 1, size // 4, size // 4, generator=g)
        hr = F.interpolate(coarse, size=(size, size), mode="bicubic", align_corners=False)
        self.hr = hr.clamp(0, 1)
        self.lr = F.avg_pool2d(self.hr, upscale_factor)

    def __len__(self):
        return len(self.hr)

    def __getitem__(self, idx):
        return self.lr[idx], self.hr[idx]


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.prelu = nn.PReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return x + self.conv2(self.prelu(self.conv1(x)))


class Generator(nn.Module):
    def __init__(self, channels=12, n_blocks=2):
        super().__init__()
        self.conv_in = nn.Sequential(nn.Conv2d(1, channels, 5, padding=2), nn.PReLU())
        self.blocks = nn.Sequential(*[ResidualBlock(channels) for _ in range(n_blocks)])
        self.upsample = nn.Sequential(
            nn.Conv2d(channels, channels * upscale_factor ** 2, 3, padding=1),
            nn.PixelShuffle(upscale_factor),
            nn.PReLU(),
        )
        self.conv_out = nn.Conv2d(channels, 1, 5, padding=2)

    def forward(self, x):
        x = self.conv_in(x)
        x = x + self.blocks(x)
        return self.conv_out(self.upsample(x))


def psnr(mse):
    return 10 * math.log10(1.0 / max(mse, 1e-10))


def main():
    train_loader = DataLoader(PatchDataset(256, seed=1), batch_size=batch_size, shuffle=True)
    val_set = PatchDataset(64, seed=2)

    netG = Generator()
    content_criterion = nn.MSELoss()
    optimizerG = torch.optim.Adam(netG.parameters(), lr=lr, betas=(0.9, 0.999))
    schedulerG = StepLR(optimizerG, step_size=epochs // 2, gamma=0.1)

    for epoch in range(epochs):
        netG.train()
        total = 0.0
        for i, (lr_img, hr_img) in enumerate(train_loader):
            netG.zero_grad()
            sr_img = netG(lr_img)
            loss = content_criterion(sr_img, hr_img)
            loss.backward()
            optimizerG.step()
            schedulerG.step()

            total += loss.item()
            if i % 5 == 0:
                print(f"[{epoch + 1}/{epochs}][{i}/{len(train_loader)}] MSE {loss.item():.5f}")

        netG.eval()
        with torch.no_grad():
            val_mse = content_criterion(netG(val_set.lr), val_set.hr).item()
        print(f"epoch {epoch + 1}: train MSE {total / len(train_loader):.5f}  val PSNR {psnr(val_mse):.2f} dB")


if __name__ == "__main__":
    main()
