"""Binary attribute classifier on CelebA-style aligned face crops (the "Smiling" attribute).

The data folder follows the CelebA layout: img_align_celeba/ holds one file per image
(000001.npy, 000002.npy, ...) and list_attr_celeba.csv holds one row per image with the
-1/1 attributes, in image-id order. For this script a small synthetic copy of that layout is
written into a temporary directory first: a "smiling" face has a bright curved band in the
lower half of the crop.
"""
import argparse
import csv
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def make_fake_celeba(root, n_images, seed=0):
    rng = np.random.RandomState(seed)
    img_dir = os.path.join(root, "img_align_celeba", "img_align_celeba")
    os.makedirs(img_dir)
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32)
    rows = []
    for i in range(1, n_images + 1):
        smiling = rng.rand() < 0.5
        face = np.exp(-(((xx - 16) / 11) ** 2 + ((yy - 15) / 14) ** 2)) * (0.6 + 0.4 * rng.rand())
        eyes = np.exp(-(((xx - 11) ** 2 + (yy - 11) ** 2) / 4)) + np.exp(-(((xx - 21) ** 2 + (yy - 11) ** 2) / 4))
        face = face - 0.5 * eyes
        if smiling:
            curve = 21 + 0.04 * (xx - 16) ** 2
            face = face + 0.8 * np.exp(-((yy - curve) ** 2) / 2.0) * (np.abs(xx - 16) < 8)
        else:
            face = face + 0.8 * np.exp(-((yy - 23) ** 2) / 2.0) * (np.abs(xx - 16) < 4)
        img = np.stack([face * c for c in (1.0, 0.85, 0.7)]) + 0.15 * rng.randn(3, 32, 32)
        name = "%06d.npy" % i
        np.save(os.path.join(img_dir, name), img.astype(np.float32))
        rows.append([name.replace(".npy", ".jpg"), 1 if smiling else -1, 1 if rng.rand() < 0.4 else -1])
    with open(os.path.join(root, "list_attr_celeba.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", "Smiling", "Male"])
        w.writerows(rows)


class CelebA(Dataset):
    def __init__(self, celeb_dir, split, attribute="Smiling", n_train=1600):
        image_path = os.path.join(celeb_dir, "img_align_celeba", "img_align_celeba")
        self.images = [os.path.join(image_path, file) for file in os.listdir(image_path) if file.endswith(".npy")]

        with open(os.path.join(celeb_dir, "list_attr_celeba.csv")) as f:
            reader = csv.DictReader(f)
            self.labels = [(int(row[attribute]) + 1) // 2 for row in reader]

        if split == "train":
            self.images, self.labels = self.images[:n_train], self.labels[:n_train]
        else:
            self.images, self.labels = self.images[n_train:], self.labels[n_train:]

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        img = torch.from_numpy(np.load(self.images[idx]))
        return img, torch.tensor(self.labels[idx], dtype=torch.float32)


class AttributeClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(64, 1)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1)).squeeze(1)


def evaluate(model, loader, criterion):
    model.eval()
    total_loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            total_loss += criterion(logits, y).item() * len(y)
            correct += ((logits > 0).float() == y).sum().item()
            n += len(y)
    model.train()
    return total_loss / n, correct / n


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--num_workers", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)

    with tempfile.TemporaryDirectory() as celeb_dir:
        make_fake_celeba(celeb_dir, n_images=2000)
        train_set = CelebA(celeb_dir, "train")
        val_set = CelebA(celeb_dir, "val")
        train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.num_workers)
        val_loader = DataLoader(val_set, batch_size=200, num_workers=args.num_workers)

        model = AttributeClassifier()
        criterion = nn.BCEWithLogitsLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

        step = 0
        for epoch in range(args.epochs):
            for x, y in train_loader:
                logits = model(x)
                loss = criterion(logits, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
                if step % 25 == 0:
                    acc = ((logits > 0).float() == y).float().mean().item()
                    print(f"epoch {epoch} step {step} train_loss {loss.item():.4f} train_acc {acc:.3f}")
            val_loss, val_acc = evaluate(model, val_loader, criterion)
            print(f"epoch {epoch} val_loss {val_loss:.4f} val_acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
