"""Tiny one-stage detector (grid objectness + class + box regression) on synthetic
VOC-style images: coloured rectangles of 3 classes, annotations as [x1, y1, x2, y2, cls]."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

NUM_CLASSES = 3
RAW_SIZE = 48
IMG_SIZE = 64
GRID = 8
STRIDE = IMG_SIZE // GRID
COLORS = np.array([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.2, 0.2, 1.0]], dtype=np.float32)


def make_records(n, rng):
    records = []
    for _ in range(n):
        objects = []
        for _ in range(rng.randint(1, 4)):
            w, h = rng.randint(8, 20, size=2)
            x1, y1 = rng.randint(0, RAW_SIZE - w), rng.randint(0, RAW_SIZE - h)
            objects.append({"bbox": [x1, y1, x1 + w, y1 + h], "cls": rng.randint(NUM_CLASSES),
                            "difficult": int(rng.rand() < 0.02)})
        records.append(objects)
    return records


class VOCStyleDataset(Dataset):
    def __init__(self, records, transform=None, seed=0):
        self.records = records
        self.transform = transform
        self.seed = seed

    def __len__(self):
        return len(self.records)

    def load_image(self, idx):
        rng = np.random.RandomState(self.seed * 100000 + idx)
        img = 0.1 * rng.rand(RAW_SIZE, RAW_SIZE, 3).astype(np.float32)
        for obj in self.records[idx]:
            x1, y1, x2, y2 = obj["bbox"]
            img[y1:y2, x1:x2] = COLORS[obj["cls"]]
        return img

    def load_annotations(self, idx):
        annotations = []
        for obj in self.records[idx]:
            if obj["difficult"]:
                continue
            annotations.append(obj["bbox"] + [obj["cls"]])
        return np.array(annotations, dtype=np.float32)

    def __getitem__(self, idx):
        sample = {"img": self.load_image(idx), "annot": self.load_annotations(idx)}
        if self.transform:
            sample = self.transform(sample)
        return sample


class Resizer:
    def __init__(self, img_size=IMG_SIZE):
        self.img_size = img_size

    def __call__(self, sample):
        image, annots = sample["img"], sample["annot"]
        height, width, _ = image.shape
        scale = self.img_size / max(height, width)
        image = torch.from_numpy(image).permute(2, 0, 1).unsqueeze(0)
        image = F.interpolate(image, size=(self.img_size, self.img_size), mode="bilinear",
                              align_corners=False)[0]
        annots[:, :4] *= scale
        return {"img": image, "annot": torch.from_numpy(annots), "scale": scale}


class Augmenter:
    def __call__(self, sample, flip_x=0.5):
        if np.random.rand() < flip_x:
            image, annots = sample["img"], sample["annot"].clone()
            image = image.flip(-1)
            x1 = annots[:, 0].clone()
            annots[:, 0] = IMG_SIZE - annots[:, 2]
            annots[:, 2] = IMG_SIZE - x1
            sample = {"img": image, "annot": annots, "scale": sample["scale"]}
        return sample


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, sample):
        for t in self.transforms:
            sample = t(sample)
        return sample


def collater(data):
    imgs = torch.stack([s["img"] for s in data])
    annots = [s["annot"] for s in data]
    max_num = max(a.shape[0] for a in annots)
    padded = torch.ones(len(annots), max(max_num, 1), 5) * -1
    for i, a in enumerate(annots):
        if a.shape[0] > 0:
            padded[i, :a.shape[0]] = a
    return {"img": imgs, "annot": padded}


class TinyDet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Conv2d(32, 1 + NUM_CLASSES + 4, 1)

    def forward(self, x):
        return self.head(self.backbone(x)).permute(0, 2, 3, 1)


def build_targets(annots):
    B = annots.shape[0]
    obj = torch.zeros(B, GRID, GRID)
    cls = torch.zeros(B, GRID, GRID, dtype=torch.long)
    box = torch.zeros(B, GRID, GRID, 4)
    for b in range(B):
        for a in annots[b]:
            if a[4] < 0:
                continue
            cx = ((a[0] + a[2]) / 2 / STRIDE).long().clamp(0, GRID - 1)
            cy = ((a[1] + a[3]) / 2 / STRIDE).long().clamp(0, GRID - 1)
            obj[b, cy, cx] = 1.0
            cls[b, cy, cx] = int(a[4])
            box[b, cy, cx] = a[:4] / IMG_SIZE
    return obj, cls, box


def detection_loss(pred, annots):
    obj_t, cls_t, box_t = build_targets(annots)
    obj_loss = F.binary_cross_entropy_with_logits(pred[..., 0], obj_t)
    pos = obj_t > 0
    cls_loss = F.cross_entropy(pred[..., 1:1 + NUM_CLASSES][pos], cls_t[pos])
    box_loss = F.l1_loss(pred[..., 1 + NUM_CLASSES:].sigmoid()[pos], box_t[pos])
    return obj_loss, cls_loss, box_loss


rng = np.random.RandomState(42)
train_set = VOCStyleDataset(make_records(400, rng), transform=Compose([Resizer(), Augmenter()]), seed=1)
val_set = VOCStyleDataset(make_records(64, rng), transform=Compose([Resizer()]), seed=2)
train_loader = DataLoader(train_set, batch_size=8, shuffle=True, collate_fn=collater)
val_loader = DataLoader(val_set, batch_size=32, shuffle=False, collate_fn=collater)

model = TinyDet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

step = 0
for epoch in range(2):
    model.train()
    for data in train_loader:
        optimizer.zero_grad()
        pred = model(data["img"])
        obj_loss, cls_loss, box_loss = detection_loss(pred, data["annot"])
        loss = obj_loss + cls_loss + 5 * box_loss
        loss.backward()
        optimizer.step()
        step += 1
        if step % 5 == 0:
            print(f"epoch {epoch} step {step} obj {obj_loss.item():.4f} cls {cls_loss.item():.4f} "
                  f"box {box_loss.item():.4f} total {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        losses = [sum(l.item() for l in detection_loss(model(d["img"]), d["annot"])) for d in val_loader]
    print(f"epoch {epoch} val loss {np.mean(losses):.4f}")
