"""Cloud masking for 4-band satellite tiles: a small encoder-decoder CNN predicts a per-pixel cloud
probability, trained with a binary focal loss (kornia's binary_focal_loss_with_logits, copied in)."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(3)
rng = np.random.default_rng(3)

TILE = 32


def binary_focal_loss_with_logits(input, target, alpha=0.25, gamma=2.0, reduction="none", eps=1e-8):
    probs = torch.sigmoid(input)
    loss_tmp = -alpha * torch.pow((1. - probs), gamma) * target * torch.log(probs + eps) \
               - (1 - alpha) * torch.pow(probs, gamma) * (1. - target) * torch.log(1. - probs + eps)
    if reduction == "none":
        loss = loss_tmp
    elif reduction == "mean":
        loss = torch.mean(loss_tmp)
    elif reduction == "sum":
        loss = torch.sum(loss_tmp)
    else:
        raise NotImplementedError(f"Invalid reduction mode: {reduction}")
    return loss


def smooth_field(size, scale):
    noise = torch.tensor(rng.normal(size=(1, 1, size // scale + 1, size // scale + 1)))
    return F.interpolate(noise, size=(size, size), mode="bilinear", align_corners=False)[0, 0].numpy()


class CloudTiles(Dataset):
    """Top-of-atmosphere reflectance tiles (blue, green, red, NIR) with a cloud mask."""

    def __init__(self, n):
        self.x, self.y = [], []
        for _ in range(n):
            land = 0.08 + 0.12 * (smooth_field(TILE, 8) > 0)
            veg = np.clip(smooth_field(TILE, 4), 0, None) * 0.3
            bands = np.stack([land, land * 1.1, land * 1.2 - 0.3 * veg, land + veg])
            cover = rng.uniform(-1.0, 1.0)
            density = smooth_field(TILE, 8) + cover
            thick = density > 0.6
            thin = (density > 0.2) & ~thick
            opacity = np.where(thick, rng.uniform(0.85, 1.0), np.where(thin, 0.35, 0.0))
            cloud_refl = np.array([0.9, 0.88, 0.86, 0.8])[:, None, None]
            img = bands * (1 - opacity) + cloud_refl * opacity + rng.normal(0, 0.01, bands.shape)
            self.x.append(torch.tensor(img, dtype=torch.float32))
            self.y.append(torch.tensor((thick | thin)[None], dtype=torch.float32))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(inplace=True))


class CloudNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = block(4, 8)
        self.enc2 = block(8, 16)
        self.mid = block(16, 16)
        self.dec2 = block(32, 8)
        self.dec1 = block(16, 8)
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(m, scale_factor=2), e2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2), e1], 1))
        return self.head(d1)


def main():
    train_loader = DataLoader(CloudTiles(320), batch_size=16, shuffle=True)
    val_set = CloudTiles(64)
    model = CloudNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    criterion_kwargs = {"alpha": 0.25, "gamma": 0.5, "reduction": "mean"}

    step = 0
    for epoch in range(7):
        model.train()
        for img, mask in train_loader:
            logits = model(img)
            loss = binary_focal_loss_with_logits(logits, mask, **criterion_kwargs)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:3d}  focal loss {loss.item():.5f}")
        model.eval()
        with torch.no_grad():
            xv = torch.stack(val_set.x)
            yv = torch.stack(val_set.y)
            pred = model(xv) > 0
            inter = (pred & (yv > 0.5)).sum().item()
            union = (pred | (yv > 0.5)).sum().item()
        print(f"epoch {epoch}  val cloud IoU {inter / max(union, 1):.3f}")


if __name__ == "__main__":
    main()
