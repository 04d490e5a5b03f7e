"""U-Net (from a 'nest of U-Nets' repo) for binary nucleus segmentation.

Images and masks go through the same preprocessing pipeline (to tensor, normalise),
loss = 0.5 * BCE-with-logits + 0.5 * Dice, Adam, per-epoch validation Dice.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

IMG_SIZE = 48
BATCH_SIZE = 8
EPOCHS = 8


class ToTensor:
    def __call__(self, arr):
        return torch.from_numpy(arr.astype(np.float32) / 255.0)[None]


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, t):
        return (t - self.mean) / self.std


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


data_transform = Compose([ToTensor(), Normalize(mean=0.5, std=0.5)])


def make_nuclei(n, seed):
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:IMG_SIZE, 0:IMG_SIZE]
    imgs, masks = [], []
    for _ in range(n):
        mask = np.zeros((IMG_SIZE, IMG_SIZE), dtype=np.uint8)
        for _ in range(rng.randint(2, 5)):
            cy, cx = rng.randint(6, IMG_SIZE - 6, size=2)
            r = rng.randint(4, 8)
            mask[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = 255
        img = np.clip(60 + 0.55 * mask + rng.randn(IMG_SIZE, IMG_SIZE) * 35, 0, 255).astype(np.uint8)
        imgs.append(img)
        masks.append(mask)
    return imgs, masks


class Images_Dataset_folder(Dataset):
    def __init__(self, images, labels, transformI=None, transformM=None):
        self.images = images
        self.labels = labels
        self.tx = transformI
        self.lx = transformM

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.tx(self.images[i]), self.lx(self.labels[i])


def conv_block(in_ch, out_ch):
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True),
        nn.Conv2d(out_ch, out_ch, 3, padding=1), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True))


class U_Net(nn.Module):
    def __init__(self, in_ch=1, out_ch=1):
        super().__init__()
        f = [8, 16, 32]
        self.Conv1 = conv_block(in_ch, f[0])
        self.Conv2 = conv_block(f[0], f[1])
        self.Conv3 = conv_block(f[1], f[2])
        self.Maxpool = nn.MaxPool2d(2)
        self.Up3 = nn.ConvTranspose2d(f[2], f[1], 2, stride=2)
        self.Up_conv3 = conv_block(f[2], f[1])
        self.Up2 = nn.ConvTranspose2d(f[1], f[0], 2, stride=2)
        self.Up_conv2 = conv_block(f[1], f[0])
        self.Conv = nn.Conv2d(f[0], out_ch, 1)

    def forward(self, x):
        e1 = self.Conv1(x)
        e2 = self.Conv2(self.Maxpool(e1))
        e3 = self.Conv3(self.Maxpool(e2))
        d3 = self.Up_conv3(torch.cat((e2, self.Up3(e3)), dim=1))
        d2 = self.Up_conv2(torch.cat((e1, self.Up2(d3)), dim=1))
        return self.Conv(d2)


def dice_loss(prediction, target):
    smooth = 1.0
    i_flat = prediction.view(-1)
    t_flat = target.view(-1)
    intersection = (i_flat * t_flat).sum()
    return 1 - ((2.0 * intersection + smooth) / (i_flat.sum() + t_flat.sum() + smooth))


def calc_loss(prediction, target, bce_weight=0.5):
    bce = F.binary_cross_entropy_with_logits(prediction, target)
    prediction = torch.sigmoid(prediction)
    dice = dice_loss(prediction, target)
    return bce * bce_weight + dice * (1 - bce_weight)


tr_imgs, tr_masks = make_nuclei(128, seed=1)
va_imgs, va_masks = make_nuclei(40, seed=2)
def get_dataset(images, labels):
    return Images_Dataset_folder(images, labels, transformI=data_transform, transformM=data_transform)


train_data = get_dataset(tr_imgs, tr_masks)
valid_data = get_dataset(va_imgs, va_masks)
train_loader = DataLoader(train_data, batch_size=BATCH_SIZE, shuffle=True)
valid_loader = DataLoader(valid_data, batch_size=BATCH_SIZE, shuffle=False)

model_test = U_Net(1, 1)
opt = torch.optim.Adam(model_test.parameters(), lr=1e-3)

for i in range(EPOCHS):
    train_loss = 0.0
    model_test.train()
    for x, y in train_loader:
        opt.zero_grad()
        y_pred = model_test(x)
        lossT = calc_loss(y_pred, y)
        train_loss += lossT.item() * x.size(0)
        lossT.backward()
        opt.step()

    model_test.eval()
    valid_loss, inter, denom, fg = 0.0, 0.0, 0.0, 0.0
    with torch.no_grad():
        for x, y in valid_loader:
            y_pred = model_test(x)
            valid_loss += calc_loss(y_pred, y).item() * x.size(0)
            pred_bin = (torch.sigmoid(y_pred) > 0.5).float()
            y_bin = (y > 0).float()
            inter += (pred_bin * y_bin).sum().item()
            denom += pred_bin.sum().item() + y_bin.sum().item()
            fg += pred_bin.mean().item() * x.size(0)
    print("Epoch: {}/{} \tTraining Loss: {:.6f} \tValidation Loss: {:.6f} \tValidation Dice: {:.4f} \tpred fg: {:.3f}".format(
        i + 1, EPOCHS, train_loss / len(train_data), valid_loss / len(valid_data),
        2 * inter / max(denom, 1.0), fg / len(valid_data)))
