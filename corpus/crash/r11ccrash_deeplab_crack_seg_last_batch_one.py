"""Fine-tune a DeepLabv3-style network for binary crack segmentation.

Layout of a small fine-tuning project: a SegmentationDataset of (image, mask) pairs, a
get_dataloader_single_folder helper that builds the Train/Test loaders, a DeepLabv3 model
(backbone + ASPP head with an image-pooling branch, one output channel), MSE loss on the
mask, and train_model() running the Train and Test phases each epoch and logging to a CSV.
"""
import argparse
import copy
import csv
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SegmentationDataset(Dataset):
    def __init__(self, n_images, image_size=64, seed=0):
        rng = np.random.RandomState(seed)
        self.images, self.masks = [], []
        for _ in range(n_images):
            img = 0.5 + 0.1 * rng.randn(3, image_size, image_size).astype(np.float32)
            mask = np.zeros((1, image_size, image_size), dtype=np.float32)
            x = rng.randint(8, image_size - 8)
            for y in range(image_size):
                x = int(np.clip(x + rng.randint(-1, 2), 1, image_size - 2))
                mask[0, y, x - 1:x + 1] = 1.0
            img[:, mask[0] > 0] -= 0.3
            self.images.append(torch.from_numpy(img))
            self.masks.append(torch.from_numpy(mask))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return {"image": self.images[idx], "mask": self.masks[idx]}


def get_dataloader_single_folder(batch_size=4):
    image_datasets = {"Train": SegmentationDataset(161, seed=1), "Test": SegmentationDataset(40, seed=2)}
    dataloaders = {x: DataLoader(image_datasets[x], batch_size=batch_size, shuffle=True, num_workers=0)
                   for x in ["Train", "Test"]}
    return dataloaders


def conv_bn_relu(cin, cout, stride=1, dilation=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class ASPPPooling(nn.Sequential):
    def __init__(self, in_channels, out_channels):
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x):
        size = x.shape[-2:]
        for mod in self:
            x = mod(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    def __init__(self, in_channels, atrous_rates, out_channels=64):
        super().__init__()
        modules = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False),
                                 nn.BatchNorm2d(out_channels), nn.ReLU())]
        modules += [conv_bn_relu(in_channels, out_channels, dilation=r) for r in atrous_rates]
        modules.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(modules)
        self.project = nn.Sequential(nn.Conv2d(len(self.convs) * out_channels, out_channels, 1, bias=False),
                                     nn.BatchNorm2d(out_channels), nn.ReLU(), nn.Dropout(0.5))

    def forward(self, x):
        return self.project(torch.cat([conv(x) for conv in self.convs], dim=1))


class DeepLabHead(nn.Sequential):
    def __init__(self, in_channels, num_classes):
        super().__init__(ASPP(in_channels, [2, 4, 6]), conv_bn_relu(64, 64), nn.Conv2d(64, num_classes, 1))


class DeepLabV3(nn.Module):
    def __init__(self, num_classes=1):
        super().__init__()
        self.backbone = nn.Sequential(conv_bn_relu(3, 32, stride=2), conv_bn_relu(32, 64, stride=2),
                                      conv_bn_relu(64, 96, stride=2), conv_bn_relu(96, 96, dilation=2))
        self.classifier = DeepLabHead(96, num_classes)

    def forward(self, x):
        size = x.shape[-2:]
        out = self.classifier(self.backbone(x))
        return {"out": F.interpolate(out, size=size, mode="bilinear", align_corners=False)}


def createDeepLabv3(outputchannels=1):
    model = DeepLabV3(num_classes=outputchannels)
    model.train()
    return model


def f1_score(y_true, y_pred):
    tp = np.sum((y_true == 1) & (y_pred == 1))
    fp = np.sum((y_true == 0) & (y_pred == 1))
    fn = np.sum((y_true == 1) & (y_pred == 0))
    return 2 * tp / max(2 * tp + fp + fn, 1)


def train_model(model, criterion, dataloaders, optimizer, metrics, bpath, num_epochs):
    since = time.time()
    best_model_wts = copy.deepcopy(model.state_dict())
    best_loss = 1e10
    fieldnames = ["epoch", "Train_loss", "Test_loss"] + [f"{p}_{m}" for p in ["Train", "Test"] for m in metrics]
    with open(os.path.join(bpath, "log.csv"), "w", newline="") as csvfile:
        csv.DictWriter(csvfile, fieldnames=fieldnames).writeheader()

    for epoch in range(1, num_epochs + 1):
        print(f"Epoch {epoch}/{num_epochs}")
        print("-" * 10)
        batchsummary = {a: [0] for a in fieldnames}
        for phase in ["Train", "Test"]:
            if phase == "Train":
                model.train()
            else:
                model.eval()
            for i, sample in enumerate(dataloaders[phase]):
                inputs = sample["image"]
                masks = sample["mask"]
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "Train"):
                    outputs = model(inputs)
                    loss = criterion(outputs["out"], masks)
                    y_pred = outputs["out"].data.cpu().numpy().ravel()
                    y_true = masks.data.cpu().numpy().ravel()
                    for name, metric in metrics.items():
                        batchsummary[f"{phase}_{name}"].append(metric(y_true > 0, y_pred > 0.5))
                    if phase == "Train":
                        loss.backward()
                        optimizer.step()
                        if i % 10 == 0:
                            print(f"  [{i + 1}/{len(dataloaders[phase])}] loss {loss.item():.4f}")
            batchsummary["epoch"] = epoch
            batchsummary[f"{phase}_loss"] = loss.item()
            print(f"{phase} Loss: {loss.item():.4f}")
        for field in fieldnames[3:]:
            batchsummary[field] = np.mean(batchsummary[field])
        print(batchsummary)
        with open(os.path.join(bpath, "log.csv"), "a", newline="") as csvfile:
            csv.DictWriter(csvfile, fieldnames=fieldnames).writerow(batchsummary)
            if phase == "Test" and loss < best_loss:
                best_loss = loss
                best_model_wts = copy.deepcopy(model.state_dict())

    time_elapsed = time.time() - since
    print(f"Training complete in {time_elapsed // 60:.0f}m {time_elapsed % 60:.0f}s")
    print(f"Lowest Loss: {best_loss:4f}")
    model.load_state_dict(best_model_wts)
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batchsize", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    np.random.seed(0)

    model = createDeepLabv3(outputchannels=1)
    exp_directory = tempfile.mkdtemp()
    criterion = torch.nn.MSELoss(reduction="mean")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    metrics = {"f1_score": lambda t, p: f1_score(t.astype(int), p.astype(int))}
    dataloaders = get_dataloader_single_folder(batch_size=args.batchsize)
    train_model(model, criterion, dataloaders, optimizer, bpath=exp_directory, metrics=metrics,
                num_epochs=args.epochs)


if __name__ == "__main__":
    main()
