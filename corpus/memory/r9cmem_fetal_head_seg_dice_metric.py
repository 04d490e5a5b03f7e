"""Single-object segmentation of the fetal head in ultrasound-like frames.

A small encoder-decoder (SegNet-style) predicts a one-channel mask; it is trained with
BCE-with-logits plus a soft Dice loss, and the Dice coefficient is tracked as the metric
for every epoch (train and validation histories are kept for plotting at the end).
"""
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

H, W = 128, 192


class FetalHeadDataset(Dataset):
    """Synthetic frames: a speckled background with one bright elliptical skull contour."""

    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        self.params = [(rng.uniform(40, W - 40), rng.uniform(35, H - 35), rng.uniform(18, 34),
                        rng.uniform(14, 28), rng.uniform(0, math.pi)) for _ in range(n)]
        self.seeds = rng.randint(0, 2**31 - 1, size=n)
        yy, xx = np.mgrid[0:H, 0:W]
        self.yy, self.xx = yy.astype(np.float32), xx.astype(np.float32)

    def __len__(self):
        return len(self.params)

    def __getitem__(self, idx):
        cx, cy, a, b, th = self.params[idx]
        rng = np.random.RandomState(self.seeds[idx])
        dx, dy = self.xx - cx, self.yy - cy
        u = (dx * math.cos(th) + dy * math.sin(th)) / a
        v = (-dx * math.sin(th) + dy * math.cos(th)) / b
        r = np.sqrt(u ** 2 + v ** 2)
        mask = (r <= 1.0).astype(np.float32)
        img = 0.25 * rng.rand(H, W).astype(np.float32)
        img += 0.8 * np.exp(-((r - 1.0) ** 2) / 0.004) + 0.15 * mask
        img = (img - img.mean()) / img.std()
        return torch.from_numpy(img)[None], torch.from_numpy(mask)[None]


class SegNet(nn.Module):
    def __init__(self, params):
        super().__init__()
        C_in, _, _ = params["input_shape"]
        init_f = params["initial_filters"]
        num_outputs = params["num_outputs"]
        self.conv1 = nn.Conv2d(C_in, init_f, kernel_size=3, stride=1, padding=1)
        self.conv2 = nn.Conv2d(init_f, 2 * init_f, kernel_size=3, stride=1, padding=1)
        self.conv3 = nn.Conv2d(2 * init_f, 4 * init_f, kernel_size=3, padding=1)
        self.conv4 = nn.Conv2d(4 * init_f, 8 * init_f, kernel_size=3, padding=1)
        self.upsample = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv_up1 = nn.Conv2d(8 * init_f, 4 * init_f, kernel_size=3, padding=1)
        self.conv_up2 = nn.Conv2d(4 * init_f, 2 * init_f, kernel_size=3, padding=1)
        self.conv_up3 = nn.Conv2d(2 * init_f, init_f, kernel_size=3, padding=1)
        self.conv_out = nn.Conv2d(init_f, num_outputs, kernel_size=3, padding=1)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, 2, 2)
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2, 2)
        x = F.relu(self.conv3(x))
        x = F.max_pool2d(x, 2, 2)
        x = F.relu(self.conv4(x))
        x = self.upsample(x)
        x = F.relu(self.conv_up1(x))
        x = self.upsample(x)
        x = F.relu(self.conv_up2(x))
        x = self.upsample(x)
        x = F.relu(self.conv_up3(x))
        return self.conv_out(x)


def dice_loss(pred, target, smooth=1e-5):
    intersection = (pred * target).sum(dim=(2, 3))
    union = pred.sum(dim=(2, 3)) + target.sum(dim=(2, 3))
    dice = 2.0 * (intersection + smooth) / (union + smooth)
    loss = 1.0 - dice
    return loss.sum(), dice.sum()


def loss_func(pred, target):
    bce = F.binary_cross_entropy_with_logits(pred, target, reduction="sum")
    pred = torch.sigmoid(pred)
    dlv, _ = dice_loss(pred, target)
    return bce / (pred.shape[2] * pred.shape[3]) + dlv


def loss_batch(loss_func, output, target, opt=None):
    loss = loss_func(output, target)
    pred = torch.sigmoid(output)
    _, metric_b = dice_loss(pred, target)
    if opt is not None:
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item(), metric_b


def loss_epoch(model, loss_func, dataset_dl, opt=None):
    running_loss = 0.0
    running_metric = 0.0
    len_data = len(dataset_dl.dataset)
    for xb, yb in dataset_dl:
        output = model(xb)
        loss_b, metric_b = loss_batch(loss_func, output, yb, opt)
        running_loss += loss_b
        if metric_b is not None:
            running_metric += metric_b
    return running_loss / float(len_data), running_metric / float(len_data)


def train_val(model, params):
    num_epochs = params["num_epochs"]
    opt = params["optimizer"]
    train_dl, val_dl = params["train_dl"], params["val_dl"]
    loss_history = {"train": [], "val": []}
    metric_history = {"train": [], "val": []}
    best_loss = float("inf")
    best_model_wts = copy.deepcopy(model.state_dict())
    for epoch in range(num_epochs):
        model.train()
        train_loss, train_metric = loss_epoch(model, loss_func, train_dl, opt)
        loss_history["train"].append(train_loss)
        metric_history["train"].append(train_metric)
        model.eval()
        with torch.no_grad():
            val_loss, val_metric = loss_epoch(model, loss_func, val_dl)
        loss_history["val"].append(val_loss)
        metric_history["val"].append(val_metric)
        if val_loss < best_loss:
            best_loss = val_loss
            best_model_wts = copy.deepcopy(model.state_dict())
        print(f"Epoch {epoch}/{num_epochs - 1}: train loss {train_loss:.4f} dice {float(train_metric):.3f} "
              f"| val loss {val_loss:.4f} dice {float(val_metric):.3f}")
    model.load_state_dict(best_model_wts)
    return model, loss_history, metric_history


if __name__ == "__main__":
    train_ds = FetalHeadDataset(480, seed=1)
    val_ds = FetalHeadDataset(64, seed=2)
    train_dl = DataLoader(train_ds, batch_size=8, shuffle=True)
    val_dl = DataLoader(val_ds, batch_size=32, shuffle=False)

    model = SegNet({"input_shape": (1, H, W), "initial_filters": 4, "num_outputs": 1})
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    params_train = {"num_epochs": 4, "optimizer": opt, "train_dl": train_dl, "val_dl": val_dl}
    model, loss_hist, metric_hist = train_val(model, params_train)
    print("best val dice:", max(float(m) for m in metric_hist["val"]))
