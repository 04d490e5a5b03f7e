"""Skin-lesion segmentation (ISIC-style) with a light U-Net.

prepare_data() exports the dermoscopy crops and the annotators' masks to
<root>/{train,val}/{images,masks}/ as .npy files, the layout the dataset class expects
(images ISIC_xxxxxxx.npy, masks ISIC_xxxxxxx_segmentation.npy).  Training uses BCE + Dice,
validation reports mIoU and DSC at threshold 0.5.
"""
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class config:
    batch_size = 8
    epochs = 8
    lr = 1e-2
    threshold = 0.5
    print_interval = 10
    size = 48


def synth_lesion(rng, size):
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    cy, cx = rng.uniform(10, size - 10, size=2)
    ry, rx = rng.uniform(4, 10, size=2)
    theta = rng.uniform(0, np.pi)
    dy, dx = yy - cy, xx - cx
    u = dx * np.cos(theta) + dy * np.sin(theta)
    v = -dx * np.sin(theta) + dy * np.cos(theta)
    mask = ((u / rx) ** 2 + (v / ry) ** 2 <= 1.0).astype(np.float32)
    skin = np.array([0.85, 0.65, 0.55], dtype=np.float32)[:, None, None]
    lesion = np.array([0.45, 0.30, 0.22], dtype=np.float32)[:, None, None]
    img = skin * (1 - mask) + lesion * mask
    img = img + rng.normal(0, 0.08, size=(3, size, size)).astype(np.float32)
    return img.astype(np.float32), mask[None]


def prepare_data(root, n_train=200, n_val=64, size=48, seed=0):
    rng = np.random.default_rng(seed)
    for split, n, offset in (("train", n_train, 0), ("val", n_val, 100000)):
        os.makedirs(os.path.join(root, split, "images"))
        os.makedirs(os.path.join(root, split, "masks"))
        ids = [f"ISIC_{offset + i:07d}" for i in range(n)]
        masks = {}
        for isic_id in ids:
            img, msk = synth_lesion(rng, size)
            np.save(os.path.join(root, split, "images", isic_id + ".npy"), img)
            masks[isic_id] = msk
        # the annotation tool exports masks in the order the annotators finished them
        export_order = list(ids)
        random.Random(seed + n).shuffle(export_order)
        for isic_id in export_order:
            np.save(os.path.join(root, split, "masks", isic_id + "_segmentation.npy"), masks[isic_id])


class NPY_datasets(Dataset):
    def __init__(self, path_Data, config, train=True):
        super(NPY_datasets, self).__init__()
        split = "train/" if train else "val/"
        images_list = os.listdir(path_Data + split + "images/")
        masks_list = os.listdir(path_Data + split + "masks/")
        self.data = []
        for i in range(len(images_list)):
            img_path = path_Data + split + "images/" + images_list[i]
            mask_path = path_Data + split + "masks/" + masks_list[i]
            self.data.append([img_path, mask_path])
        self.train = train

    def __getitem__(self, indx):
        img_path, msk_path = self.data[indx]
        img = torch.from_numpy(np.load(img_path))
        msk = torch.from_numpy(np.load(msk_path))
        if self.train and random.random() < 0.5:
            img, msk = img.flip(-1), msk.flip(-1)
        return img, msk

    def __len__(self):
        return len(self.data)


def conv_block(cin, cout):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
    )


class LightUNet(nn.Module):
    def __init__(self, in_ch=3, c=(8, 16, 24, 32)):
        super().__init__()
        self.enc1 = conv_block(in_ch, c[0])
        self.enc2 = conv_block(c[0], c[1])
        self.enc3 = conv_block(c[1], c[2])
        self.bott = conv_block(c[2], c[3])
        self.dec3 = conv_block(c[3] + c[2], c[2])
        self.dec2 = conv_block(c[2] + c[1], c[1])
        self.dec1 = conv_block(c[1] + c[0], c[0])
        self.final = nn.Conv2d(c[0], 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        b = self.bott(F.max_pool2d(e3, 2))
        d3 = self.dec3(torch.cat([F.interpolate(b, scale_factor=2), e3], 1))
        d2 = self.dec2(torch.cat([F.interpolate(d3, scale_factor=2), e2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2), e1], 1))
        return torch.sigmoid(self.final(d1))


class BceDiceLoss(nn.Module):
    def forward(self, pred, target):
        bce = F.binary_cross_entropy(pred, target)
        inter = (pred * target).sum((1, 2, 3))
        dice = 1 - (2 * inter + 1) / (pred.sum((1, 2, 3)) + target.sum((1, 2, 3)) + 1)
        return bce + dice.mean()


def train_one_epoch(train_loader, model, criterion, optimizer, scheduler, epoch, step):
    model.train()
    loss_list = []
    for it, (images, targets) in enumerate(train_loader):
        step += 1
        optimizer.zero_grad()
        out = model(images.float())
        loss = criterion(out, targets.float())
        loss.backward()
        optimizer.step()
        loss_list.append(loss.item())
        if it % config.print_interval == 0:
            print(f"train: epoch {epoch}, iter:{it}, loss: {np.mean(loss_list):.4f}, "
                  f"lr: {optimizer.param_groups[0]['lr']:.5f}")
    scheduler.step()
    return step


def val_one_epoch(val_loader, model, criterion, epoch):
    model.eval()
    tp = fp = fn = 0.0
    loss_list = []
    with torch.no_grad():
        for img, msk in val_loader:
            out = model(img.float())
            loss_list.append(criterion(out, msk.float()).item())
            pred = (out >= config.threshold).float()
            tp += (pred * msk).sum().item()
            fp += (pred * (1 - msk)).sum().item()
            fn += ((1 - pred) * msk).sum().item()
    miou = tp / (tp + fp + fn) if tp + fp + fn else 0.0
    dsc = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    print(f"val epoch: {epoch}, loss: {np.mean(loss_list):.4f}, miou: {miou:.4f}, f1_or_dsc: {dsc:.4f}")
    return np.mean(loss_list)


def main():
    torch.manual_seed(42)
    random.seed(42)
    with tempfile.TemporaryDirectory() as tmp:
        data_path = tmp + "/isic2018/"
        prepare_data(data_path, size=config.size)

        train_loader = DataLoader(NPY_datasets(data_path, config, train=True),
                                  batch_size=config.batch_size, shuffle=True, drop_last=True)
        val_loader = DataLoader(NPY_datasets(data_path, config, train=False), batch_size=16)

        model = LightUNet()
        criterion = BceDiceLoss()
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=1e-2)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=50)

        step = 0
        for epoch in range(1, config.epochs + 1):
            step = train_one_epoch(train_loader, model, criterion, optimizer, scheduler, epoch, step)
            val_one_epoch(val_loader, model, criterion, epoch)


if __name__ == "__main__":
    main()
