"""SRGAN (x2) on synthetic image patches: the generator is first warmed up with the pixel loss
only (SRResNet pre-training), then trained adversarially against the discriminator with the
SRGAN generator loss (image MSE + adversarial + TV)."""
import argparse
import time
from math import log10

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description='Train Super Resolution Models')
parser.add_argument('--crop_size', default=24, type=int, help='training images crop size')
parser.add_argument('--upscale_factor', default=2, type=int, help='super resolution upscale factor')
parser.add_argument('--num_epochs', default=5, type=int, help='train epoch number')
parser.add_argument('--pretrain_iters', default=30, type=int, help='generator-only warm-up iterations')
opt = parser.parse_args()

torch.manual_seed(0)


class TrainDataset(Dataset):
    def __init__(self, n, crop_size, upscale_factor, seed):
        g = torch.Generator().manual_seed(seed)
        lowres = torch.rand(n, 3, crop_size // 8, crop_size // 8, generator=g)
        self.hr = F.interpolate(lowres, size=(crop_size, crop_size), mode='bicubic', align_corners=False).clamp(0, 1)
        self.lr = F.interpolate(self.hr, scale_factor=1 / upscale_factor, mode='bicubic', align_corners=False).clamp(0, 1)

    def __len__(self):
        return len(self.hr)

    def __getitem__(self, i):
        return self.lr[i], self.hr[i]


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.prelu = nn.PReLU()
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        residual = self.prelu(self.bn1(self.conv1(x)))
        residual = self.bn2(self.conv2(residual))
        return x + residual


class Generator(nn.Module):
    def __init__(self, scale_factor):
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 32, kernel_size=9, padding=4), nn.PReLU())
        self.block2 = ResidualBlock(32)
        self.block3 = ResidualBlock(32)
        self.block4 = nn.Sequential(nn.Conv2d(32, 32, kernel_size=3, padding=1), nn.BatchNorm2d(32))
        self.block5 = nn.Sequential(nn.Conv2d(32, 32 * scale_factor ** 2, kernel_size=3, padding=1),
                                    nn.PixelShuffle(scale_factor), nn.PReLU())
        self.block6 = nn.Conv2d(32, 3, kernel_size=9, padding=4)

    def forward(self, x):
        b1 = self.block1(x)
        b4 = self.block4(self.block3(self.block2(b1)))
        out = self.block6(self.block5(b1 + b4))
        return (torch.tanh(out) + 1) / 2


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(32, 32, kernel_size=3, stride=2, padding=1), nn.BatchNorm2d(32), nn.LeakyReLU(0.2),
            nn.Conv2d(32, 64, kernel_size=3, stride=2, padding=1), nn.BatchNorm2d(64), nn.LeakyReLU(0.2),
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(64, 128, kernel_size=1), nn.LeakyReLU(0.2),
            nn.Conv2d(128, 1, kernel_size=1),
        )

    def forward(self, x):
        batch_size = x.size(0)
        return torch.sigmoid(self.net(x).view(batch_size))


class TVLoss(nn.Module):
    def forward(self, x):
        h_tv = torch.pow(x[:, :, 1:, :] - x[:, :, :-1, :], 2).sum()
        w_tv = torch.pow(x[:, :, :, 1:] - x[:, :, :, :-1], 2).sum()
        return 2 * (h_tv + w_tv) / x.size(0)


class GeneratorLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.mse_loss = nn.MSELoss()
        self.tv_loss = TVLoss()

    def forward(self, out_labels, out_images, target_images):
        adversarial_loss = torch.mean(1 - out_labels)
        image_loss = self.mse_loss(out_images, target_images)
        tv_loss = self.tv_loss(out_images)
        return image_loss + 0.001 * adversarial_loss + 2e-8 * tv_loss


train_set = TrainDataset(192, opt.crop_size, opt.upscale_factor, 1)
val_set = TrainDataset(32, opt.crop_size, opt.upscale_factor, 2)
train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
val_loader = DataLoader(val_set, batch_size=16, shuffle=False)

netG = Generator(opt.upscale_factor)
print('# generator parameters:', sum(param.numel() for param in netG.parameters()))
netD = Discriminator()
print('# discriminator parameters:', sum(param.numel() for param in netD.parameters()))

generator_criterion = GeneratorLoss()
mse = nn.MSELoss()
optimizerG = optim.Adam(netG.parameters(), lr=1e-3)
optimizerD = optim.Adam(netD.parameters(), lr=1e-4)

start = time.time()
iteration = 0
for epoch in range(1, opt.num_epochs + 1):
    running_results = {'batch_sizes': 0, 'd_loss': 0, 'g_loss': 0, 'd_score': 0, 'g_score': 0}
    netG.train()
    netD.train()
    for data, target in train_loader:
        iteration += 1
        batch_size = data.size(0)
        running_results['batch_sizes'] += batch_size
        real_img = target
        z = data

        if iteration <= opt.pretrain_iters:
            fake_img = netG(z)
            netG.zero_grad()
            g_loss = mse(fake_img, real_img)
            g_loss.backward()
            optimizerG.step()
            running_results['g_loss'] += g_loss.item() * batch_size
            if iteration % 10 == 0:
                print(f'[pretrain {iteration}] mse {g_loss.item():.5f}')
            continue

        fake_img = netG(z)

        netD.zero_grad()
        real_out = netD(real_img).mean()
        fake_out = netD(fake_img).mean()
        d_loss = 1 - real_out + fake_out
        d_loss.backward(retain_graph=True)
        optimizerD.step()

        netG.zero_grad()
        g_loss = generator_criterion(fake_out, fake_img, real_img)
        g_loss.backward()
        optimizerG.step()

        running_results['g_loss'] += g_loss.item() * batch_size
        running_results['d_loss'] += d_loss.item() * batch_size
        running_results['d_score'] += real_out.item() * batch_size
        running_results['g_score'] += fake_out.item() * batch_size
        if iteration % 10 == 0:
            print('[%d/%d] iter %d Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f' % (
                epoch, opt.num_epochs, iteration, d_loss.item(), g_loss.item(), real_out.item(), fake_out.item()))

    netG.eval()
    with torch.no_grad():
        mse_sum, n = 0.0, 0
        for val_lr, val_hr in val_loader:
            sr = netG(val_lr)
            mse_sum += ((sr - val_hr) ** 2).mean().item() * val_lr.size(0)
            n += val_lr.size(0)
    psnr = 10 * log10(1 / (mse_sum / n))
    print(f'epoch {epoch} g_loss {running_results["g_loss"] / running_results["batch_sizes"]:.5f} '
          f'val PSNR {psnr:.2f} dB ({time.time() - start:.1f}s)')
