"""Tennis-court keypoint detector (TrackNet-style encoder/decoder) trained on Gaussian
heatmaps with sigmoid + MSE, split into main.py / base_trainer.py / base_validator.py
style functions.  Frames are generated: a bright court-line quadrilateral whose corner
positions are the keypoints.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

IMG = 32
NUM_KPS = 4


def gaussian(h, w, cx, cy, sigma=1.5):
    ys, xs = torch.meshgrid(torch.arange(h).float(), torch.arange(w).float(), indexing="ij")
    return torch.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * sigma ** 2))


class courtDataset(Dataset):
    def __init__(self, mode, n=None):
        g = torch.Generator().manual_seed(0 if mode == "train" else 1)
        n = n or (512 if mode == "train" else 64)
        self.imgs, self.hms, self.kps = [], [], []
        for _ in range(n):
            x0, y0 = torch.randint(3, 12, (2,), generator=g).tolist()
            x1, y1 = torch.randint(20, 29, (2,), generator=g).tolist()
            kps = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
            img = 0.3 * torch.rand(3, IMG, IMG, generator=g)
            img[:, y0, x0:x1 + 1] += 0.7
            img[:, y1, x0:x1 + 1] += 0.7
            img[:, y0:y1 + 1, x0] += 0.7
            img[:, y0:y1 + 1, x1] += 0.7
            hm = torch.stack([gaussian(IMG, IMG, cx, cy) for cx, cy in kps])
            self.imgs.append(img)
            self.hms.append(hm)
            self.kps.append(torch.tensor(kps))

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return self.imgs[i], self.hms[i], self.kps[i]


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, padding=1),
                                   nn.ReLU(), nn.BatchNorm2d(out_channels))

    def forward(self, x):
        return self.block(x)


class BallTrackerNet(nn.Module):
    def __init__(self, out_channels=NUM_KPS):
        super().__init__()
        self.conv1 = ConvBlock(3, 16)
        self.conv2 = ConvBlock(16, 16)
        self.pool1 = nn.MaxPool2d(2)
        self.conv3 = ConvBlock(16, 32)
        self.conv4 = ConvBlock(32, 32)
        self.ups1 = nn.Upsample(scale_factor=2)
        self.conv5 = ConvBlock(32, 16)
        self.conv6 = ConvBlock(16, 16)
        self.conv7 = nn.Conv2d(16, out_channels, 3, padding=1)

    def forward(self, x):
        x = self.conv2(self.conv1(x))
        x = self.pool1(x)
        x = self.conv4(self.conv3(x))
        x = self.ups1(x)
        x = self.conv6(self.conv5(x))
        return self.conv7(x)


def train(model, train_loader, optimizer, criterion, device, epoch, max_iters=1000):
    model.train()
    losses = []
    max_iters = min(max_iters, len(train_loader))

    for iter_id, batch in enumerate(train_loader):
        out = model(batch[0].float().to(device))
        gt_hm_hp = batch[1].float().to(device)
        loss = criterion(F.sigmoid(out), gt_hm_hp)

        loss.backward()
        optimizer.step()
        if iter_id % 8 == 0:
            print('train, epoch = {}, iter_id = {}/{}, loss = {}'.format(epoch, iter_id, max_iters, loss.item()))
        losses.append(loss.item())
        if iter_id > max_iters:
            break

    return np.mean(losses)


def val(model, val_loader, criterion, device, epoch, max_dist=2):
    model.eval()
    losses, tp, total = [], 0, 0
    with torch.no_grad():
        for imgs, hms, kps in val_loader:
            out = F.sigmoid(model(imgs.float().to(device)))
            losses.append(criterion(out, hms.float()).item())
            flat = out.flatten(2).argmax(-1)
            pred = torch.stack([flat % IMG, flat // IMG], -1)
            ok = (pred - kps).float().norm(dim=-1) <= max_dist
            peak = out.flatten(2).max(-1).values > 0.5
            tp += (ok & peak).sum().item()
            total += ok.numel()
    return float(np.mean(losses)), tp / total


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--batch_size', type=int, default=16, help='batch size')
    parser.add_argument('--num_epochs', type=int, default=5, help='total training epochs')
    parser.add_argument('--lr', type=float, default=1e-3, help='learning rate')
    parser.add_argument('--val_intervals', type=int, default=1, help='number of epochs to run validation')
    parser.add_argument('--steps_per_epoch', type=int, default=1000, help='number of steps per one epoch')
    args = parser.parse_args()
    torch.manual_seed(0)

    train_loader = DataLoader(courtDataset('train'), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(courtDataset('val'), batch_size=args.batch_size, shuffle=False)

    model = BallTrackerNet(out_channels=NUM_KPS)
    device = 'cpu'
    model = model.to(device)

    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), args.lr, betas=(0.9, 0.999), weight_decay=0)

    val_best_accuracy = 0
    for epoch in range(args.num_epochs):
        train_loss = train(model, train_loader, optimizer, criterion, device, epoch, args.steps_per_epoch)
        print('epoch = {}, mean train loss = {:.5f}'.format(epoch, train_loss))
        if epoch % args.val_intervals == 0:
            val_loss, accuracy = val(model, val_loader, criterion, device, epoch)
            print('val loss = {:.5f}, keypoint accuracy = {:.3f}'.format(val_loss, accuracy))
            if accuracy > val_best_accuracy:
                val_best_accuracy = accuracy
