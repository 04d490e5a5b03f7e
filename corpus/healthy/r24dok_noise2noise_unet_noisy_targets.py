"""Noise2Noise denoiser (Lehtinen et al. 2018) after joeylitalien/noise2noise-pytorch: a small
U-Net trained with L2 loss to map one noisy copy of an image to another, independently noisy
copy of the same image. No clean images are used for training; PSNR against the clean image is
reported on a validation set."""
import math
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


def make_clean(n, size, g):
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
    imgs = torch.zeros(n, 1, size, size)
    for i in range(n):
        for _ in range(3):
            cx, cy = (torch.rand(2, generator=g) * 1.6 - 0.8).tolist()
            r = 0.15 + 0.35 * torch.rand(1, generator=g).item()
            v = torch.rand(1, generator=g).item()
            if torch.rand(1, generator=g).item() < 0.5:
                imgs[i, 0][((xx - cx) ** 2 + (yy - cy) ** 2) < r * r] = v
            else:
                imgs[i, 0][((xx - cx).abs() < r) & ((yy - cy).abs() < r)] = v
    return imgs


class NoisyDataset(Dataset):
    def __init__(self, n, size, noise_param, clean_targets, seed):
        g = torch.Generator().manual_seed(seed)
        self.clean = make_clean(n, size, g)
        self.noise_param = noise_param
        self.clean_targets = clean_targets

    def _add_noise(self, img):
        std = torch.rand(1).item() * self.noise_param
        return img + std * torch.randn_like(img)

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, i):
        img = self.clean[i]
        source = self._add_noise(img)
        target = img if self.clean_targets else self._add_noise(img)
        return source, target


class UNet(nn.Module):
    def __init__(self, in_channels=1, out_channels=1):
        super().__init__()
        self._block1 = nn.Sequential(
            nn.Conv2d(in_channels, 24, 3, padding=1), nn.LeakyReLU(0.1),
            nn.Conv2d(24, 24, 3, padding=1), nn.LeakyReLU(0.1), nn.MaxPool2d(2))
        self._block2 = nn.Sequential(
            nn.Conv2d(24, 24, 3, padding=1), nn.LeakyReLU(0.1), nn.MaxPool2d(2))
        self._block3 = nn.Sequential(
            nn.Conv2d(24, 24, 3, padding=1), nn.LeakyReLU(0.1),
            nn.ConvTranspose2d(24, 24, 3, stride=2, padding=1, output_padding=1))
        self._block4 = nn.Sequential(
            nn.Conv2d(48, 48, 3, padding=1), nn.LeakyReLU(0.1),
            nn.ConvTranspose2d(48, 48, 3, stride=2, padding=1, output_padding=1))
        self._block5 = nn.Sequential(
            nn.Conv2d(48 + in_channels, 32, 3, padding=1), nn.LeakyReLU(0.1),
            nn.Conv2d(32, out_channels, 3, padding=1))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight.data)
                m.bias.data.zero_()

    def forward(self, x):
        pool1 = self._block1(x)
        pool2 = self._block2(pool1)
        upsample2 = self._block3(pool2)
        concat2 = torch.cat((upsample2, pool1), dim=1)
        upsample1 = self._block4(concat2)
        concat1 = torch.cat((upsample1, x), dim=1)
        return self._block5(concat1)


def psnr(input, target):
    return 10 * torch.log10(1 / torch.mean((input - target) ** 2)).item()


train_loader = DataLoader(NoisyDataset(512, 24, noise_param=0.5, clean_targets=False, seed=1),
                          batch_size=16, shuffle=True)
valid_set = NoisyDataset(128, 24, noise_param=0.5, clean_targets=True, seed=2)
valid_source = torch.stack([valid_set[i][0] for i in range(len(valid_set))])
valid_clean = valid_set.clean

model = UNet()
loss_fn = nn.MSELoss()
optim = torch.optim.Adam(model.parameters(), lr=0.001, betas=(0.9, 0.99), eps=1e-8)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optim, patience=2, factor=0.5)

print(f"noisy input PSNR: {psnr(valid_source, valid_clean):.2f} dB")
for epoch in range(4):
    model.train()
    train_loss, n = 0.0, 0
    for batch_idx, (source, target) in enumerate(train_loader):
        source_denoised = model(source)
        loss = loss_fn(source_denoised, target)
        train_loss += loss.item()
        n += 1
        optim.zero_grad()
        loss.backward()
        optim.step()
        if batch_idx % 16 == 0:
            print(f"epoch {epoch} batch {batch_idx}: train loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        valid_out = model(valid_source)
        valid_loss = loss_fn(valid_out, valid_clean).item()
    scheduler.step(valid_loss)
    print(f"epoch {epoch}: train loss (vs noisy target) {train_loss / n:.4f}  "
          f"valid loss (vs clean) {valid_loss:.4f}  valid PSNR {psnr(valid_out, valid_clean):.2f} dB")
