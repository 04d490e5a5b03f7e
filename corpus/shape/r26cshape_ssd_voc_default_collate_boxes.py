"""Tiny single-shot detector on VOC-style synthetic images.

Each image holds one to three coloured squares; the annotation of an image is an
array of [xmin, ymin, xmax, ymax, label] rows (fractions of the image size), as
VOCDetection.pull_item returns it. A 4x4 grid head predicts objectness, class and
box per cell.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

IMG = 64
GRID = 4
NUM_CLASSES = 3
COLORS = np.array([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.2, 0.2, 1.0]], dtype=np.float32)


class VOCDetection(Dataset):
    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        self.items = []
        for _ in range(n):
            img = 0.1 * rng.rand(3, IMG, IMG).astype(np.float32)
            boxes = []
            cells = rng.choice(GRID * GRID, size=rng.randint(1, 4), replace=False)
            for cell in cells:
                cy, cx = divmod(cell, GRID)
                size = rng.randint(8, 15)
                x0 = cx * 16 + rng.randint(0, 16 - size // 2) - size // 4
                y0 = cy * 16 + rng.randint(0, 16 - size // 2) - size // 4
                x0, y0 = int(np.clip(x0, 0, IMG - size)), int(np.clip(y0, 0, IMG - size))
                label = rng.randint(NUM_CLASSES)
                img[:, y0:y0 + size, x0:x0 + size] = COLORS[label][:, None, None]
                boxes.append([x0 / IMG, y0 / IMG, (x0 + size) / IMG, (y0 + size) / IMG, label])
            self.items.append((img, np.array(boxes, dtype=np.float32)))

    def __len__(self):
        return len(self.items)

    def pull_item(self, index):
        img, target = self.items[index]
        return torch.from_numpy(img), target

    def __getitem__(self, index):
        im, gt = self.pull_item(index)
        return im, gt


def detection_collate(batch):
    imgs, targets = [], []
    for img, target in batch:
        imgs.append(img)
        targets.append(torch.as_tensor(target))
    return torch.stack(imgs, 0), targets


class TinySSD(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Conv2d(64, 1 + NUM_CLASSES + 4, 1)

    def forward(self, x):
        return self.head(self.features(x)).permute(0, 2, 3, 1)


def encode_targets(targets):
    obj = torch.zeros(len(targets), GRID, GRID)
    cls = torch.full((len(targets), GRID, GRID), -1, dtype=torch.long)
    loc = torch.zeros(len(targets), GRID, GRID, 4)
    for b, t in enumerate(targets):
        for x0, y0, x1, y1, label in t.tolist():
            cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
            gx, gy = min(int(cx * GRID), GRID - 1), min(int(cy * GRID), GRID - 1)
            obj[b, gy, gx] = 1.0
            cls[b, gy, gx] = int(label)
            loc[b, gy, gx] = torch.tensor([cx * GRID - gx, cy * GRID - gy, (x1 - x0) * GRID, (y1 - y0) * GRID])
    return obj, cls, loc


class MultiBoxLoss(nn.Module):
    def forward(self, pred, targets):
        obj, cls, loc = encode_targets(targets)
        loss_obj = F.binary_cross_entropy_with_logits(pred[..., 0], obj)
        pos = obj > 0
        loss_cls = F.cross_entropy(pred[..., 1:1 + NUM_CLASSES][pos], cls[pos])
        loss_loc = F.smooth_l1_loss(pred[..., 1 + NUM_CLASSES:][pos], loc[pos])
        return loss_obj + loss_cls + loss_loc


def main():
    dataset = VOCDetection(640, seed=1)
    data_loader = DataLoader(dataset, batch_size=16, shuffle=True)
    net = TinySSD()
    criterion = MultiBoxLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

    for epoch in range(4):
        running = 0.0
        for iteration, (images, targets) in enumerate(data_loader):
            out = net(images)
            optimizer.zero_grad()
            loss = criterion(out, targets)
            loss.backward()
            optimizer.step()
            running += loss.item()
            if iteration % 10 == 0:
                print(f"epoch {epoch} iter {iteration} loss {loss.item():.4f}")
        print(f"epoch {epoch} mean loss {running / len(data_loader):.4f}")


if __name__ == "__main__":
    main()
