"""Train a small 2D segmentation net on synapse-style CT slices (9 organ classes).

Mirrors a trainer_synapse loop: a Synapse_dataset of (image, label) slices, a
DataLoader, CE + Dice loss, poly learning-rate decay, and every 20 iterations a
slice of the batch, its prediction and its label are written to the summary log.
"""
import math
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(1234)
np.random.seed(1234)


class Synapse_dataset(Dataset):
    def __init__(self, n_slices, img_size=32, num_classes=9, seed=0):
        rng = np.random.RandomState(seed)
        self.samples = []
        yy, xx = np.mgrid[0:img_size, 0:img_size]
        for _ in range(n_slices):
            label = np.zeros((img_size, img_size), dtype=np.int64)
            image = 0.1 * rng.randn(img_size, img_size).astype(np.float32)
            for c in rng.choice(np.arange(1, num_classes), size=3, replace=False):
                cy, cx = rng.randint(6, img_size - 6, size=2)
                r = rng.randint(3, 6)
                blob = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
                label[blob] = c
                image[blob] += 0.15 * c
            self.samples.append((image[None], label))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        image, label = self.samples[idx]
        return {"image": torch.from_numpy(image), "label": torch.from_numpy(label)}


class DiceLoss(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.n_classes = n_classes

    def forward(self, inputs, target, softmax=False):
        if softmax:
            inputs = torch.softmax(inputs, dim=1)
        target = F.one_hot(target, self.n_classes).permute(0, 3, 1, 2).float()
        loss = 0.0
        for i in range(1, self.n_classes):
            inter = (inputs[:, i] * target[:, i]).sum()
            union = inputs[:, i].sum() + target[:, i].sum()
            loss += 1 - (2 * inter + 1e-5) / (union + 1e-5)
        return loss / (self.n_classes - 1)


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SegNet(nn.Module):
    def __init__(self, num_classes=9):
        super().__init__()
        self.enc1 = conv_block(1, 16)
        self.enc2 = conv_block(16, 32)
        self.dec = conv_block(48, 16)
        self.head = nn.Conv2d(16, num_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        up = F.interpolate(e2, scale_factor=2, mode="bilinear", align_corners=False)
        return self.head(self.dec(torch.cat([up, e1], dim=1)))


class SummaryLog:
    def __init__(self, logdir):
        self.path = os.path.join(logdir, "log.txt")

    def add_image(self, tag, img, step):
        with open(self.path, "a") as f:
            f.write(f"{step} {tag} {tuple(img.shape)} {float(img.float().mean()):.4f}\n")

    def add_scalar(self, tag, value, step):
        with open(self.path, "a") as f:
            f.write(f"{step} {tag} {value:.5f}\n")


def trainer_synapse(base_lr=0.05, num_classes=9, batch_size=8, max_epochs=6):
    snapshot_path = tempfile.mkdtemp()
    db_train = Synapse_dataset(n_slices=153)
    print("The length of train set is: {}".format(len(db_train)))
    trainloader = DataLoader(db_train, batch_size=batch_size, shuffle=True, num_workers=0)
    model = SegNet(num_classes)
    model.train()
    ce_loss = nn.CrossEntropyLoss()
    dice_loss = DiceLoss(num_classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9, weight_decay=0.0001)
    writer = SummaryLog(snapshot_path)
    iter_num = 0
    max_iterations = max_epochs * len(trainloader)
    print("{} iterations per epoch. {} max iterations".format(len(trainloader), max_iterations))
    for epoch_num in range(max_epochs):
        epoch_loss = 0.0
        for i_batch, sampled_batch in enumerate(trainloader):
            image_batch, label_batch = sampled_batch["image"], sampled_batch["label"]
            outputs = model(image_batch)
            loss_ce = ce_loss(outputs, label_batch)
            loss_dice = dice_loss(outputs, label_batch, softmax=True)
            loss = 0.4 * loss_ce + 0.6 * loss_dice
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            lr_ = base_lr * (1.0 - iter_num / max_iterations) ** 0.9
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr_

            iter_num = iter_num + 1
            epoch_loss += loss.item()
            writer.add_scalar("info/total_loss", loss.item(), iter_num)
            if iter_num % 10 == 0:
                print("iteration %d : loss : %f, loss_ce: %f" % (iter_num, loss.item(), loss_ce.item()))
            if iter_num % 20 == 0:
                image = image_batch[1, 0:1, :, :]
                image = (image - image.min()) / (image.max() - image.min())
                writer.add_image("train/Image", image, iter_num)
                outputs = torch.argmax(torch.softmax(outputs, dim=1), dim=1, keepdim=True)
                writer.add_image("train/Prediction", outputs[1, ...] * 50, iter_num)
                labs = label_batch[1, ...].unsqueeze(0) * 50
                writer.add_image("train/GroundTruth", labs, iter_num)
        print("epoch %d : mean loss %.4f" % (epoch_num, epoch_loss / len(trainloader)))

    with torch.no_grad():
        model.eval()
        correct, fg = 0, 0
        for sampled_batch in DataLoader(db_train, batch_size=32):
            pred = model(sampled_batch["image"]).argmax(1)
            m = sampled_batch["label"] > 0
            correct += (pred[m] == sampled_batch["label"][m]).sum().item()
            fg += m.sum().item()
    print("foreground pixel accuracy %.3f" % (correct / fg))
    return "Training Finished!"


if __name__ == "__main__":
    print(trainer_synapse())
