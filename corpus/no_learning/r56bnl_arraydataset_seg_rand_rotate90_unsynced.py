"""Train a small 2D U-Net on synthetic lesion slices with rotation/flip augmentation,
image and segmentation loaded through an ArrayDataset (MONAI-style randomizable transforms)."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)


class Randomizable:
    def __init__(self):
        self.R = np.random.RandomState()

    def set_random_state(self, seed=None):
        self.R = np.random.RandomState(seed)
        return self


class RandRotate90(Randomizable):
    def __init__(self, prob=1.0, max_k=3):
        super().__init__()
        self.prob, self.max_k = prob, max_k

    def __call__(self, img):
        k = self.R.randint(self.max_k) + 1 if self.R.rand() < self.prob else 0
        return torch.rot90(img, k, dims=(1, 2))


class RandFlip(Randomizable):
    def __init__(self, prob=0.5, spatial_axis=0):
        super().__init__()
        self.prob, self.axis = prob, spatial_axis

    def __call__(self, img):
        return torch.flip(img, dims=(self.axis + 1,)) if self.R.rand() < self.prob else img


class Compose(Randomizable):
    def __init__(self, transforms):
        super().__init__()
        self.transforms = transforms

    def set_random_state(self, seed=None):
        for t in self.transforms:
            t.set_random_state(seed)
        return self

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ArrayDataset(Dataset):
    def __init__(self, img, img_transform=None, seg=None, seg_transform=None):
        self.img, self.seg = img, seg
        self.img_transform, self.seg_transform = img_transform, seg_transform

    def __len__(self):
        return len(self.img)

    def __getitem__(self, index):
        img, seg = self.img[index], self.seg[index]
        if self.img_transform is not None:
            img = self.img_transform(img)
        if self.seg_transform is not None:
            seg = self.seg_transform(seg)
        return img, seg


def make_slices(n, rng, size=32):
    yy, xx = np.mgrid[:size, :size]
    imgs = np.zeros((n, 1, size, size), np.float32)
    segs = np.zeros((n, 1, size, size), np.float32)
    for i in range(n):
        cy, cx = rng.uniform(6, size - 6, 2)
        ry, rx = rng.uniform(3, 7, 2)
        mask = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
        img = rng.normal(0, 0.35, (size, size)) + 0.3 * np.sin(xx / rng.uniform(3, 8))
        img[mask] += rng.uniform(0.8, 1.4)
        imgs[i, 0], segs[i, 0] = img, mask
    return torch.from_numpy(imgs), torch.from_numpy(segs)


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, ch=(8, 16, 32)):
        super().__init__()
        self.enc1, self.enc2, self.mid = block(1, ch[0]), block(ch[0], ch[1]), block(ch[1], ch[2])
        self.up2 = nn.ConvTranspose2d(ch[2], ch[1], 2, stride=2)
        self.dec2 = block(2 * ch[1], ch[1])
        self.up1 = nn.ConvTranspose2d(ch[1], ch[0], 2, stride=2)
        self.dec1 = block(2 * ch[0], ch[0])
        self.out = nn.Conv2d(ch[0], 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.out(d1)


def dice_loss(logits, target, eps=1e-5):
    p = torch.sigmoid(logits)
    inter = (p * target).sum((1, 2, 3))
    return (1 - (2 * inter + eps) / (p.sum((1, 2, 3)) + target.sum((1, 2, 3)) + eps)).mean()


def dice_metric(logits, target):
    p = (torch.sigmoid(logits) > 0.5).float()
    inter = (p * target).sum((1, 2, 3))
    return ((2 * inter) / (p.sum((1, 2, 3)) + target.sum((1, 2, 3)) + 1e-8)).mean().item()


def main():
    rng = np.random.default_rng(0)
    train_img, train_seg = make_slices(256, rng)
    val_img, val_seg = make_slices(64, rng)

    train_transforms = Compose([RandRotate90(prob=1.0, max_k=3), RandFlip(prob=0.5, spatial_axis=0)])
    train_ds = ArrayDataset(train_img, train_transforms, train_seg, train_transforms)
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=True)
    val_ds = ArrayDataset(val_img, None, val_seg, None)
    val_loader = DataLoader(val_ds, batch_size=64)

    model = UNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    bce = nn.BCEWithLogitsLoss()

    step = 0
    for epoch in range(8):
        model.train()
        epoch_loss = 0.0
        for img, seg in train_loader:
            optimizer.zero_grad()
            out = model(img)
            loss = bce(out, seg) + dice_loss(out, seg)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            step += 1
        model.eval()
        with torch.no_grad():
            dices, vlosses = [], []
            for img, seg in val_loader:
                out = model(img)
                vlosses.append((bce(out, seg) + dice_loss(out, seg)).item())
                dices.append(dice_metric(out, seg))
        print(f"epoch {epoch + 1} step {step} train loss {epoch_loss / len(train_loader):.4f} "
              f"val loss {np.mean(vlosses):.4f} val mean dice {np.mean(dices):.4f}")


if __name__ == "__main__":
    main()
