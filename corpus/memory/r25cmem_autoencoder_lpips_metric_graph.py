"""Convolutional autoencoder on 64x64 RGB patches, tracked with an LPIPS-style metric.

The metric follows the torchmetrics Metric pattern: update() adds the batch's perceptual
distances to a running sum_scores / total state, compute() returns the mean, reset() clears
it at the end of every epoch.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)


class FeatureNet(nn.Module):
    """Frozen perceptual feature extractor (stands in for the pretrained VGG/Alex backbone)."""

    def __init__(self):
        super().__init__()
        self.slice1 = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU())
        self.slice2 = nn.Sequential(nn.Conv2d(32, 48, 3, padding=1), nn.ReLU())
        self.slice3 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(48, 64, 3, padding=1), nn.ReLU())

    def forward(self, x):
        h1 = self.slice1(x)
        h2 = self.slice2(h1)
        h3 = self.slice3(h2)
        return [h1, h2, h3]


def normalize_tensor(x, eps=1e-10):
    return x / (torch.sqrt(torch.sum(x ** 2, dim=1, keepdim=True)) + eps)


class LearnedPerceptualImagePatchSimilarity:
    def __init__(self):
        self.net = FeatureNet().eval()
        for p in self.net.parameters():
            p.requires_grad_(False)
        self.reset()

    def reset(self):
        self.sum_scores = torch.tensor(0.0)
        self.total = torch.tensor(0.0)

    def _lpips(self, img1, img2):
        feats1, feats2 = self.net(2 * img1 - 1), self.net(2 * img2 - 1)
        score = 0.0
        for f1, f2 in zip(feats1, feats2):
            diff = (normalize_tensor(f1) - normalize_tensor(f2)) ** 2
            score = score + diff.sum(dim=1).mean(dim=(1, 2))
        return score

    def update(self, img1, img2):
        loss = self._lpips(img1, img2)
        self.sum_scores += loss.sum()
        self.total += img1.shape[0]

    def compute(self):
        return self.sum_scores / self.total


class ConvAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 4, stride=2, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(16, 3, 4, stride=2, padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


def make_patches(n, size=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    freqs = torch.rand(n, 3, 2, generator=g) * 6 + 1
    phase = torch.rand(n, 3, 1, 1, generator=g) * 6.28
    imgs = 0.5 + 0.4 * torch.sin(freqs[..., 0, None, None] * yy * 6.28 + freqs[..., 1, None, None] * xx * 3.14 + phase)
    return imgs.clamp(0, 1)


def main():
    data = make_patches(256)
    loader = DataLoader(TensorDataset(data), batch_size=16, shuffle=True)
    model = ConvAutoencoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    lpips = LearnedPerceptualImagePatchSimilarity()
    step = 0
    for epoch in range(3):
        model.train()
        running = 0.0
        for (x,) in loader:
            recon = model(x)
            loss = F.mse_loss(recon, x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            lpips.update(recon, x)
            running += loss.item()
            step += 1
            if step % 5 == 0:
                print(f"step {step:3d}  mse {loss.item():.4f}")
        print(f"epoch {epoch}  mse {running / len(loader):.4f}  lpips {lpips.compute().item():.4f}")
        lpips.reset()


if __name__ == "__main__":
    main()
