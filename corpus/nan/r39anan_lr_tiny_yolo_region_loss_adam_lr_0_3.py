"""Tiny YOLOv2-style detector (darkflow-like region loss) trained from scratch on synthetic
street-sign crops: one sign per image, 3 sign classes, 4x4 grid, 2 anchors."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

IMG = 32
GRID = 4
N_CLASSES = 3
ANCHORS = torch.tensor([[0.8, 0.8], [1.6, 1.6]])
BATCH = 64
EPOCHS = 6
LEARNING_RATE = 0.3


class SignDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.images = np.zeros((n, 3, IMG, IMG), dtype=np.float32)
        self.boxes = np.zeros((n, 4), dtype=np.float32)
        self.labels = np.zeros(n, dtype=np.int64)
        for i in range(n):
            img = rng.normal(0.3, 0.1, (3, IMG, IMG))
            w, h = rng.integers(4, 14, size=2)
            x0, y0 = rng.integers(0, IMG - w), rng.integers(0, IMG - h)
            c = rng.integers(N_CLASSES)
            img[c, y0:y0 + h, x0:x0 + w] += 0.9
            self.images[i] = img
            self.boxes[i] = [(x0 + w / 2) / IMG, (y0 + h / 2) / IMG, w / IMG, h / IMG]
            self.labels[i] = c

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i]), torch.from_numpy(self.boxes[i]), self.labels[i]


class TinyYolo(nn.Module):
    def __init__(self):
        super().__init__()
        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout),
                                 nn.LeakyReLU(0.1), nn.MaxPool2d(2))
        self.features = nn.Sequential(block(3, 16), block(16, 32), block(32, 64))
        self.detect = nn.Conv2d(64, len(ANCHORS) * (5 + N_CLASSES), 1)

    def forward(self, x):
        out = self.detect(self.features(x))
        return out.view(x.size(0), len(ANCHORS), 5 + N_CLASSES, GRID, GRID).permute(0, 3, 4, 1, 2)


def region_loss(out, boxes, labels):
    B = out.size(0)
    xy = torch.sigmoid(out[..., 0:2])
    wh = torch.exp(out[..., 2:4]) * ANCHORS / GRID
    conf = torch.sigmoid(out[..., 4])
    cls = out[..., 5:]

    gx, gy = (boxes[:, 0] * GRID).long().clamp(max=GRID - 1), (boxes[:, 1] * GRID).long().clamp(max=GRID - 1)
    best = ((boxes[:, None, 2:] - ANCHORS[None] / GRID).abs().sum(-1)).argmin(-1)
    idx = torch.arange(B)
    obj = torch.zeros_like(conf)
    obj[idx, gy, gx, best] = 1.0

    p_xy = xy[idx, gy, gx, best]
    t_xy = torch.stack([boxes[:, 0] * GRID - gx, boxes[:, 1] * GRID - gy], -1)
    p_wh = wh[idx, gy, gx, best]
    coord = 5.0 * (((p_xy - t_xy) ** 2).sum(-1) + ((p_wh.sqrt() - boxes[:, 2:].sqrt()) ** 2).sum(-1))
    noobj = 0.5 * ((1 - obj) * conf ** 2).sum((1, 2, 3))
    objl = (1.0 - conf[idx, gy, gx, best]) ** 2
    clsl = F.cross_entropy(cls[idx, gy, gx, best], labels, reduction="none")
    return (coord + noobj + objl + clsl).mean()


def box_iou(p, t):
    p1, p2 = p[:, :2] - p[:, 2:] / 2, p[:, :2] + p[:, 2:] / 2
    t1, t2 = t[:, :2] - t[:, 2:] / 2, t[:, :2] + t[:, 2:] / 2
    inter = (torch.min(p2, t2) - torch.max(p1, t1)).clamp(min=0).prod(-1)
    return inter / (p[:, 2:].prod(-1) + t[:, 2:].prod(-1) - inter)


train_dl = DataLoader(SignDataset(1024, 1), batch_size=BATCH, shuffle=True)
val_dl = DataLoader(SignDataset(256, 2), batch_size=256)

model = TinyYolo()
optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)

step = 0
for epoch in range(EPOCHS):
    model.train()
    running = 0.0
    for images, boxes, labels in train_dl:
        out = model(images)
        loss = region_loss(out, boxes, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        running += loss.item()
        if step % 10 == 0:
            print(f"step {step}  loss {loss.item():.4f}  ave loss {running / (step - epoch * len(train_dl)):.4f}")
    model.eval()
    with torch.no_grad():
        images, boxes, labels = next(iter(val_dl))
        out = model(images)
        conf = torch.sigmoid(out[..., 4]).flatten(1)
        best = conf.argmax(1)
        cell = out.flatten(1, 3)[torch.arange(len(images)), best]
        a = best % len(ANCHORS)
        gy, gx = (best // len(ANCHORS)) // GRID, (best // len(ANCHORS)) % GRID
        cx = (torch.sigmoid(cell[:, 0]) + gx) / GRID
        cy = (torch.sigmoid(cell[:, 1]) + gy) / GRID
        wh = torch.exp(cell[:, 2:4]) * ANCHORS[a] / GRID
        iou = box_iou(torch.cat([torch.stack([cx, cy], -1), wh], -1), boxes)
        acc = (cell[:, 5:].argmax(-1) == labels).float().mean()
        print(f"epoch {epoch + 1}: val loss {region_loss(out, boxes, labels).item():.4f}  mean IoU {iou.mean().item():.3f}  cls acc {acc.item():.3f}")
