"""Basic U-Net (U_Net from a 'nest of U-Nets' repo) for binary cell segmentation.

Images are loaded at their native 100x100 size, the network goes four poolings deep,
BCEWithLogits + Dice loss, Adam, per-epoch validation dice.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

IMG_SIZE = 100


class CellImages(Dataset):
    def __init__(self, n, size=IMG_SIZE, seed=0):
        rng = np.random.RandomState(seed)
        yy, xx = np.mgrid[0:size, 0:size]
        self.items = []
        for _ in range(n):
            mask = np.zeros((size, size), dtype=np.float32)
            for _ in range(rng.randint(2, 5)):
                cy, cx = rng.randint(10, size - 10, size=2)
                r = rng.randint(5, 10)
                mask[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = 1.0
            img = 0.6 * mask + 0.25 * rng.randn(size, size).astype(np.float32)
            self.items.append((img[None].astype(np.float32), mask[None]))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        img, mask = self.items[i]
        return torch.from_numpy(img), torch.from_numpy(mask)


class conv_block(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
            nn.Conv2d(out_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.conv(x)


class up_conv(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.up = nn.Sequential(
            nn.Upsample(scale_factor=2), nn.Conv2d(in_ch, out_ch, 3, padding=1),
            nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.up(x)


class U_Net(nn.Module):
    def __init__(self, in_ch=1, out_ch=1):
        super().__init__()
        n1 = 8
        filters = [n1, n1 * 2, n1 * 4, n1 * 8, n1 * 16]
        self.Maxpool1 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.Maxpool2 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.Maxpool3 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.Maxpool4 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.Conv1 = conv_block(in_ch, filters[0])
        self.Conv2 = conv_block(filters[0], filters[1])
        self.Conv3 = conv_block(filters[1], filters[2])
        self.Conv4 = conv_block(filters[2], filters[3])
        self.Conv5 = conv_block(filters[3], filters[4])
        self.Up5 = up_conv(filters[4], filters[3])
        self.Up_conv5 = conv_block(filters[4], filters[3])
        self.Up4 = up_conv(filters[3], filters[2])
        self.Up_conv4 = conv_block(filters[3], filters[2])
        self.Up3 = up_conv(filters[2], filters[1])
        self.Up_conv3 = conv_block(filters[2], filters[1])
        self.Up2 = up_conv(filters[1], filters[0])
        self.Up_conv2 = conv_block(filters[1], filters[0])
        self.Conv = nn.Conv2d(filters[0], out_ch, kernel_size=1)

    def forward(self, x):
        e1 = self.Conv1(x)
        e2 = self.Conv2(self.Maxpool1(e1))
        e3 = self.Conv3(self.Maxpool2(e2))
        e4 = self.Conv4(self.Maxpool3(e3))
        e5 = self.Conv5(self.Maxpool4(e4))
        d5 = self.Up5(e5)
        d5 = torch.cat((e4, d5), dim=1)
        d5 = self.Up_conv5(d5)
        d4 = self.Up4(d5)
        d4 = torch.cat((e3, d4), dim=1)
        d4 = self.Up_conv4(d4)
        d3 = self.Up3(d4)
        d3 = torch.cat((e2, d3), dim=1)
        d3 = self.Up_conv3(d3)
        d2 = self.Up2(d3)
        d2 = torch.cat((e1, d2), dim=1)
        d2 = self.Up_conv2(d2)
        return self.Conv(d2)


def dice_coeff(logits, target):
    p = torch.sigmoid(logits)
    inter = (p * target).sum()
    return (2 * inter + 1) / (p.sum() + target.sum() + 1)


def main():
    train_set, valid_set = CellImages(64, seed=0), CellImages(16, seed=1)
    train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
    valid_loader = DataLoader(valid_set, batch_size=8)
    model = U_Net(1, 1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    bce = nn.BCEWithLogitsLoss()
    for epoch in range(5):
        model.train()
        train_loss = 0.0
        for x, y in train_loader:
            opt.zero_grad()
            y_pred = model(x)
            loss = bce(y_pred, y) + (1 - dice_coeff(y_pred, y))
            loss.backward()
            opt.step()
            train_loss += loss.item() * x.size(0)
        model.eval()
        dices = []
        with torch.no_grad():
            for x, y in valid_loader:
                dices.append(dice_coeff(model(x), y).item())
        print("Epoch: {} \tTraining Loss: {:.6f} \tValid dice: {:.4f}".format(
            epoch + 1, train_loss / len(train_set), float(np.mean(dices))))


if __name__ == "__main__":
    main()
