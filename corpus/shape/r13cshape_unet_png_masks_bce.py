"""Binary segmentation with a small U-Net, in the style of milesial/Pytorch-UNet's early train.py
(one output channel, BCEWithLogitsLoss on the flattened masks, Dice coefficient on the
validation split).

Instead of the Carvana car images and GIF masks the script makes its own data set: 32x32
greyscale "photos" with one to three bright blobs on a textured background, and the blob masks,
both kept as the uint8 arrays that 8-bit PNG files load into.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

torch.manual_seed(0)
np.random.seed(0)


# --------------------------------------------------------------------------- data
def make_png_pair(rng, size=32):
    yy, xx = np.mgrid[0:size, 0:size]
    mask = np.zeros((size, size), dtype=bool)
    for _ in range(rng.randint(1, 4)):
        cy, cx = rng.uniform(5, size - 5, 2)
        ry, rx = rng.uniform(3, 7, 2)
        mask |= ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
    background = 90 + 25 * np.sin(xx / rng.uniform(2, 5)) * np.cos(yy / rng.uniform(2, 5))
    img = background + mask * rng.uniform(40, 80) + rng.normal(0, 18, (size, size))
    img = np.clip(img, 0, 255).astype(np.uint8)
    mask_png = (mask * 255).astype(np.uint8)
    return img, mask_png


def build_dataset(n, seed):
    rng = np.random.RandomState(seed)
    return [make_png_pair(rng) for _ in range(n)]


def normalize(x):
    return x / 255


def get_imgs_and_masks(pairs):
    """Return a list of (image, mask) pairs as float arrays, images in CHW layout."""
    imgs = [normalize(img.astype(np.float32))[None] for img, _ in pairs]
    masks = [mask.astype(np.float32) for _, mask in pairs]
    return list(zip(imgs, masks))


def batch(iterable, batch_size):
    b = []
    for i, t in enumerate(iterable):
        b.append(t)
        if (i + 1) % batch_size == 0:
            yield b
            b = []
    if len(b) > 0:
        yield b


# --------------------------------------------------------------------------- model
class double_conv(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.conv(x)


class down(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.mpconv = nn.Sequential(nn.MaxPool2d(2), double_conv(in_ch, out_ch))

    def forward(self, x):
        return self.mpconv(x)


class up(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = double_conv(in_ch, out_ch)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.inc = double_conv(n_channels, 16)
        self.down1 = down(16, 32)
        self.down2 = down(32, 32)
        self.up1 = up(64, 16)
        self.up2 = up(32, 16)
        self.outc = nn.Conv2d(16, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        return self.outc(x)


# --------------------------------------------------------------------------- eval
def dice_coeff(input, target):
    eps = 0.0001
    inter = torch.dot(input.view(-1), target.view(-1))
    union = torch.sum(input) + torch.sum(target) + eps
    return (2 * inter.float() + eps) / union.float()


def eval_net(net, dataset):
    """Evaluation without the densecrf with the dice coefficient"""
    net.eval()
    tot, fg = 0, 0
    with torch.no_grad():
        for i, b in enumerate(dataset):
            img = torch.from_numpy(b[0]).unsqueeze(0)
            true_mask = torch.from_numpy(b[1]).unsqueeze(0)
            mask_pred = net(img)[0]
            mask_pred = (torch.sigmoid(mask_pred) > 0.5).float()
            tot += dice_coeff(mask_pred, true_mask).item()
            fg += mask_pred.mean().item()
    net.train()
    return tot / (i + 1), fg / (i + 1)


# --------------------------------------------------------------------------- train
def train_net(net, epochs=4, batch_size=8, lr=0.001):
    train = get_imgs_and_masks(build_dataset(320, seed=1))
    val = get_imgs_and_masks(build_dataset(64, seed=2))
    N_train = len(train)
    print(f"Starting training: epochs {epochs}, batch size {batch_size}, lr {lr}, "
          f"training size {N_train}, validation size {len(val)}")

    optimizer = optim.Adam(net.parameters(), lr=lr)
    criterion = nn.BCEWithLogitsLoss()

    for epoch in range(epochs):
        print("Starting epoch {}/{}.".format(epoch + 1, epochs))
        net.train()
        np.random.shuffle(train)
        epoch_loss = 0

        for i, b in enumerate(batch(train, batch_size)):
            imgs = torch.from_numpy(np.array([i[0] for i in b]).astype(np.float32))
            true_masks = torch.from_numpy(np.array([i[1] for i in b]))

            masks_pred = net(imgs)
            masks_probs_flat = masks_pred.view(-1)
            true_masks_flat = true_masks.view(-1)

            loss = criterion(masks_probs_flat, true_masks_flat)
            epoch_loss += loss.item()
            if i % 10 == 0:
                print("{0:.4f} --- loss: {1:.6f}".format(i * batch_size / N_train, loss.item()))

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        print("Epoch finished ! Loss: {}".format(epoch_loss / (i + 1)))
        val_dice, val_fg = eval_net(net, val)
        print("Validation Dice Coeff: {}  (predicted foreground fraction {:.3f})".format(val_dice, val_fg))


if __name__ == "__main__":
    net = UNet(n_channels=1, n_classes=1)
    train_net(net)
