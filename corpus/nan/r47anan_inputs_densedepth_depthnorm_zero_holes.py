"""Monocular depth estimation on my own RGB-D captures (DenseDepth-style training).

Encoder-decoder CNN predicts a half-resolution depth map from an RGB frame; targets are
DepthNorm'ed (maxDepth / depth) and the loss is 0.1 * L1 + SSIM + edge loss, Adam 1e-4.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

MIN_DEPTH = 10.0
MAX_DEPTH = 1000.0


def DepthNorm(depth, maxDepth=MAX_DEPTH):
    return maxDepth / depth


class RGBDCaptures(Dataset):
    """Synthetic stand-in for the Kinect captures: a tilted floor plane plus a box."""

    def __init__(self, n, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        ys = torch.linspace(0, 1, size).view(size, 1).expand(size, size)
        xs = torch.linspace(0, 1, size).view(1, size).expand(size, size)
        self.rgb, self.depth = [], []
        for _ in range(n):
            slope = 0.5 + torch.rand(1, generator=g).item()
            base = 100.0 + 400.0 * slope * (1.0 - ys)
            cx, cy = torch.randint(6, size - 6, (2,), generator=g).tolist()
            box = ((xs * size - cx).abs() < 5) & ((ys * size - cy).abs() < 5)
            depth = torch.where(box, base * 0.5, base)
            shade = (depth / 500.0).clamp(0, 1)
            rgb = torch.stack([shade, 1 - shade, 0.5 * shade + 0.25 * xs])
            rgb = rgb + 0.05 * torch.randn(3, size, size, generator=g)
            holes = torch.rand(size, size, generator=g) < 0.03
            depth = depth.masked_fill(holes, 0.0)
            self.rgb.append(rgb.clamp(0, 1))
            self.depth.append(depth.unsqueeze(0))

    def __len__(self):
        return len(self.rgb)

    def __getitem__(self, i):
        depth = F.interpolate(self.depth[i].unsqueeze(0), scale_factor=0.5, mode="nearest")[0]
        depth = depth.clamp(max=MAX_DEPTH)
        return {"image": self.rgb[i], "depth": depth}


class UpSample(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.convA = nn.Conv2d(cin, cout, 3, padding=1)
        self.convB = nn.Conv2d(cout, cout, 3, padding=1)
        self.act = nn.LeakyReLU(0.2)

    def forward(self, x, skip):
        x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=True)
        return self.act(self.convB(self.act(self.convA(torch.cat([x, skip], 1)))))


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.enc3 = nn.Sequential(nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU())
        self.conv2 = nn.Conv2d(64, 64, 1)
        self.up1 = UpSample(64 + 32, 32)
        self.up2 = UpSample(32 + 16, 16)
        self.conv3 = nn.Conv2d(16, 1, 3, padding=1)

    def forward(self, x):
        f1 = self.enc1(x)
        f2 = self.enc2(f1)
        f3 = self.enc3(f2)
        x = self.conv2(f3)
        x = self.up1(x, f2)
        x = self.up2(x, f1)
        return self.conv3(x)


def gaussian(window_size, sigma):
    g = torch.tensor([math.exp(-(x - window_size // 2) ** 2 / (2 * sigma ** 2)) for x in range(window_size)])
    return g / g.sum()


def ssim(img1, img2, val_range, window_size=7):
    w1 = gaussian(window_size, 1.5).unsqueeze(1)
    window = (w1 @ w1.t()).unsqueeze(0).unsqueeze(0)
    pad = window_size // 2
    mu1 = F.conv2d(img1, window, padding=pad)
    mu2 = F.conv2d(img2, window, padding=pad)
    mu1_sq, mu2_sq, mu1_mu2 = mu1 * mu1, mu2 * mu2, mu1 * mu2
    sigma1_sq = F.conv2d(img1 * img1, window, padding=pad) - mu1_sq
    sigma2_sq = F.conv2d(img2 * img2, window, padding=pad) - mu2_sq
    sigma12 = F.conv2d(img1 * img2, window, padding=pad) - mu1_mu2
    C1 = (0.01 * val_range) ** 2
    C2 = (0.03 * val_range) ** 2
    ssim_map = ((2 * mu1_mu2 + C1) * (2 * sigma12 + C2)) / ((mu1_sq + mu2_sq + C1) * (sigma1_sq + sigma2_sq + C2))
    return ssim_map.mean()


def image_gradients(img):
    dy = img[:, :, 1:, :] - img[:, :, :-1, :]
    dx = img[:, :, :, 1:] - img[:, :, :, :-1]
    return dy, dx


def edge_loss(pred, target):
    dy_p, dx_p = image_gradients(pred)
    dy_t, dx_t = image_gradients(target)
    return (dy_p - dy_t).abs().mean() + (dx_p - dx_t).abs().mean()


def main():
    train_set = RGBDCaptures(320, seed=1)
    val_set = RGBDCaptures(64, seed=2)
    train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=16)

    model = DepthNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    l1_criterion = nn.L1Loss()

    step = 0
    for epoch in range(5):
        model.train()
        running = 0.0
        for batch in train_loader:
            image = batch["image"]
            depth_n = DepthNorm(batch["depth"])

            output = model(image)
            l_depth = l1_criterion(output, depth_n)
            l_ssim = torch.clamp((1 - ssim(output, depth_n, val_range=MAX_DEPTH / MIN_DEPTH)) * 0.5, 0, 1)
            l_edges = edge_loss(output, depth_n)
            loss = (1.0 * l_ssim) + (1.0 * l_edges) + (0.1 * l_depth)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {running / 20:.4f}")
                running = 0.0

        model.eval()
        with torch.no_grad():
            err = 0.0
            for batch in val_loader:
                pred = DepthNorm(model(batch["image"]))
                err += (pred - batch["depth"]).abs().mean().item()
        print(f"epoch {epoch} val abs depth error {err / len(val_loader):.2f}")


if __name__ == "__main__":
    main()
