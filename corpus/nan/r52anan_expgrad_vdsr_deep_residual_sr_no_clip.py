"""VDSR-style very deep residual super-resolution network (x2), trained on synthetic texture patches."""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


def make_texture(g, size=20):
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    img = torch.zeros(size, size)
    for _ in range(4):
        fx, fy = torch.randint(1, 9, (2,), generator=g).tolist()
        ph = torch.rand(1, generator=g).item() * 6.28
        img += torch.rand(1, generator=g).item() * torch.sin(6.28 * (fx * xx + fy * yy) + ph)
    edge = (xx * torch.randn(1, generator=g) + yy * torch.randn(1, generator=g) > 0).float()
    img = img + 1.5 * edge
    img = (img - img.min()) / (img.max() - img.min() + 1e-8)
    return img.unsqueeze(0)


class SRPatches(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.hr = torch.stack([make_texture(g) for _ in range(n)])
        lr = F.interpolate(self.hr, scale_factor=0.5, mode="bicubic", align_corners=False)
        self.lr = F.interpolate(lr, scale_factor=2, mode="bicubic", align_corners=False).clamp(0, 1)

    def __len__(self):
        return len(self.hr)

    def __getitem__(self, i):
        return self.lr[i], self.hr[i]


class ConvReLU(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)

    def forward(self, x):
        return F.relu(self.conv(x))


class VDSR(nn.Module):
    def __init__(self, depth=10, c=16):
        super().__init__()
        self.input = nn.Conv2d(1, c, 3, padding=1, bias=False)
        self.residual_layer = nn.Sequential(*[ConvReLU(c) for _ in range(depth - 2)])
        self.output = nn.Conv2d(c, 1, 3, padding=1, bias=False)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2.0 / n))

    def forward(self, x):
        out = F.relu(self.input(x))
        out = self.residual_layer(out)
        return self.output(out) + x


def psnr(a, b):
    return 10 * torch.log10(1.0 / F.mse_loss(a, b)).item()


def main():
    train_set = SRPatches(640, seed=1)
    val_set = SRPatches(128, seed=2)
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
    model = VDSR()
    criterion = nn.MSELoss(reduction="sum")
    lr = 0.1
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)

    print(f"bicubic val PSNR {psnr(val_set.lr, val_set.hr):.2f} dB")
    step = 0
    t0 = time.time()
    for epoch in range(3):
        model.train()
        for lr_img, hr_img in train_loader:
            sr = model(lr_img)
            loss = criterion(sr, hr_img)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            val = psnr(model(val_set.lr), val_set.hr)
        print(f"epoch {epoch} val PSNR {val:.2f} dB ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
