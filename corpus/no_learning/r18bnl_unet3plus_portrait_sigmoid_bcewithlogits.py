"""Portrait matting with UNet 3+ (full-scale skip connections), n_classes=1.

Synthetic 3x24x24 "portraits" (head + shoulders silhouette on a textured background) with
their binary mattes; trained with RMSprop, BCEWithLogitsLoss and a cosine LambdaLR, validated
with the Dice coefficient of the thresholded prediction.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim.lr_scheduler as lr_scheduler
from torch import optim
from torch.utils.data import DataLoader, Dataset, random_split

torch.manual_seed(0)


class BasicDataset(Dataset):
    def __init__(self, n, size=24, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(size, dtype=torch.float32),
                                torch.arange(size, dtype=torch.float32), indexing="ij")
        self.imgs, self.masks = [], []
        for _ in range(n):
            cx = size / 2 + 4 * (torch.rand(1, generator=g).item() - 0.5)
            cy = size * (0.35 + 0.1 * torch.rand(1, generator=g).item())
            rh = size * (0.14 + 0.06 * torch.rand(1, generator=g).item())
            head = ((xx - cx) / rh) ** 2 + ((yy - cy) / (1.25 * rh)) ** 2 < 1
            sw = size * (0.3 + 0.1 * torch.rand(1, generator=g).item())
            body = (((xx - cx) / sw) ** 2 + ((yy - size) / (0.45 * size)) ** 2 < 1)
            mask = (head | body).float()
            bg = torch.rand(3, 1, 1, generator=g) * 0.8 + 0.1
            fg = torch.rand(3, 1, 1, generator=g) * 0.8 + 0.1
            tex = 0.15 * torch.sin(xx / (1.5 + 3 * torch.rand(1, generator=g)) + 6 * torch.rand(1, generator=g))
            img = bg + tex + (fg - bg) * mask + 0.08 * torch.randn(3, size, size, generator=g)
            self.imgs.append(img.clamp(0, 1))
            self.masks.append(mask.unsqueeze(0))

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return {"image": self.imgs[i], "mask": self.masks[i]}


def conv_bn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class unetConv2(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = conv_bn_relu(cin, cout)
        self.conv2 = conv_bn_relu(cout, cout)

    def forward(self, x):
        return self.conv2(self.conv1(x))


class UNet3Plus(nn.Module):
    def __init__(self, n_channels=3, n_classes=1, filters=(8, 16, 32, 64)):
        super().__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.CatChannels = filters[0]
        self.UpChannels = self.CatChannels * 4

        self.conv1 = unetConv2(n_channels, filters[0])
        self.conv2 = unetConv2(filters[0], filters[1])
        self.conv3 = unetConv2(filters[1], filters[2])
        self.conv4 = unetConv2(filters[2], filters[3])
        self.maxpool = nn.MaxPool2d(2)

        # stage 3d: h1 (pool 4), h2 (pool 2), h3, hd4 (up 2)
        self.h1_PT_hd3 = conv_bn_relu(filters[0], self.CatChannels)
        self.h2_PT_hd3 = conv_bn_relu(filters[1], self.CatChannels)
        self.h3_Cat_hd3 = conv_bn_relu(filters[2], self.CatChannels)
        self.hd4_UT_hd3 = conv_bn_relu(filters[3], self.CatChannels)
        self.fusion3d = conv_bn_relu(self.UpChannels, self.UpChannels)

        # stage 2d: h1 (pool 2), h2, hd3 (up 2), hd4 (up 4)
        self.h1_PT_hd2 = conv_bn_relu(filters[0], self.CatChannels)
        self.h2_Cat_hd2 = conv_bn_relu(filters[1], self.CatChannels)
        self.hd3_UT_hd2 = conv_bn_relu(self.UpChannels, self.CatChannels)
        self.hd4_UT_hd2 = conv_bn_relu(filters[3], self.CatChannels)
        self.fusion2d = conv_bn_relu(self.UpChannels, self.UpChannels)

        # stage 1d: h1, hd2 (up 2), hd3 (up 4), hd4 (up 8)
        self.h1_Cat_hd1 = conv_bn_relu(filters[0], self.CatChannels)
        self.hd2_UT_hd1 = conv_bn_relu(self.UpChannels, self.CatChannels)
        self.hd3_UT_hd1 = conv_bn_relu(self.UpChannels, self.CatChannels)
        self.hd4_UT_hd1 = conv_bn_relu(filters[3], self.CatChannels)
        self.fusion1d = conv_bn_relu(self.UpChannels, self.UpChannels)

        self.outconv1 = nn.Conv2d(self.UpChannels, n_classes, 3, padding=1)

    @staticmethod
    def up(x, s):
        return F.interpolate(x, scale_factor=s, mode="bilinear", align_corners=True)

    def forward(self, inputs):
        h1 = self.conv1(inputs)
        h2 = self.conv2(self.maxpool(h1))
        h3 = self.conv3(self.maxpool(h2))
        hd4 = self.conv4(self.maxpool(h3))

        hd3 = self.fusion3d(torch.cat((
            self.h1_PT_hd3(F.max_pool2d(h1, 4, 4)),
            self.h2_PT_hd3(F.max_pool2d(h2, 2, 2)),
            self.h3_Cat_hd3(h3),
            self.hd4_UT_hd3(self.up(hd4, 2))), 1))
        hd2 = self.fusion2d(torch.cat((
            self.h1_PT_hd2(F.max_pool2d(h1, 2, 2)),
            self.h2_Cat_hd2(h2),
            self.hd3_UT_hd2(self.up(hd3, 2)),
            self.hd4_UT_hd2(self.up(hd4, 4))), 1))
        hd1 = self.fusion1d(torch.cat((
            self.h1_Cat_hd1(h1),
            self.hd2_UT_hd1(self.up(hd2, 2)),
            self.hd3_UT_hd1(self.up(hd3, 4)),
            self.hd4_UT_hd1(self.up(hd4, 8))), 1))

        d1 = self.outconv1(hd1)
        return F.sigmoid(d1)


def dice_coeff(pred, target, eps=1e-6):
    inter = (pred * target).sum()
    return ((2 * inter + eps) / (pred.sum() + target.sum() + eps)).item()


def eval_net(net, loader):
    net.eval()
    tot, n = 0.0, 0
    with torch.no_grad():
        for batch in loader:
            imgs, true_masks = batch["image"], batch["mask"]
            mask_pred = net(imgs)
            pred = (torch.sigmoid(mask_pred) > 0.5).float()
            for p, t in zip(pred, true_masks):
                tot += dice_coeff(p, t)
                n += 1
    net.train()
    return tot / n


def train_net(net, epochs=3, batch_size=8, lr=1e-3, val_percent=0.1):
    dataset = BasicDataset(360, seed=1)
    n_val = int(len(dataset) * val_percent)
    n_train = len(dataset) - n_val
    train, val = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train, batch_size=batch_size, shuffle=True)
    val_loader = DataLoader(val, batch_size=batch_size, shuffle=False)
    print(f"Starting training: epochs {epochs}, batch size {batch_size}, lr {lr}, "
          f"training size {n_train}, validation size {n_val}")

    optimizer = optim.RMSprop(net.parameters(), lr=lr, weight_decay=1e-8)
    lf = lambda x: (((1 + math.cos(x * math.pi / epochs)) / 2) ** 1.0) * 0.95 + 0.05
    scheduler = lr_scheduler.LambdaLR(optimizer, lr_lambda=lf)

    if net.n_classes > 1:
        criterion = nn.CrossEntropyLoss()
    else:
        criterion = nn.BCEWithLogitsLoss()

    print(f"Validation Dice Coeff before training: {eval_net(net, val_loader):.4f}")
    global_step = 0
    for epoch in range(epochs):
        net.train()
        epoch_loss = 0
        for batch in train_loader:
            imgs = batch["image"]
            true_masks = batch["mask"]

            masks_pred = net(imgs)
            loss = criterion(masks_pred, true_masks)
            epoch_loss += loss.item()

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            global_step += 1

            if global_step % 10 == 0:
                print(f"step {global_step:4d}  loss (batch) {loss.item():.4f}")
            if global_step % (n_train // (2 * batch_size)) == 0:
                val_score = eval_net(net, val_loader)
                print(f"Validation Dice Coeff: {val_score:.4f}")

        scheduler.step()
        print(f"Epoch {epoch + 1}/{epochs}  mean loss {epoch_loss / len(train_loader):.4f}  "
              f"lr {optimizer.param_groups[0]['lr']:.2e}")


if __name__ == "__main__":
    t0 = time.time()
    net = UNet3Plus(n_channels=3, n_classes=1)
    train_net(net)
    print(f"done in {time.time() - t0:.1f}s")
