"""Fine-tune a small single-object detector (balloon / no balloon + box) with an
iteration-based trainer, SGD and a warmup + cosine LR schedule, detectron2/d2go style."""
import math
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

cfg = SimpleNamespace(
    SOLVER=SimpleNamespace(
        IMS_PER_BATCH=16,
        BASE_LR=0.02,
        MOMENTUM=0.9,
        WEIGHT_DECAY=1e-4,
        MAX_ITER=200,
        WARMUP_ITERS=200,
        WARMUP_FACTOR=1.0 / 1000,
    ),
    MODEL=SimpleNamespace(NUM_CLASSES=1),
)


class BalloonDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(n, 3, 32, 32, generator=g) * 0.3
        self.labels = torch.randint(0, 2, (n,), generator=g)
        self.boxes = torch.zeros(n, 4)
        yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
        for i in range(n):
            if self.labels[i] == 1:
                cx, cy = (torch.rand(2, generator=g) * 20 + 6).tolist()
                r = float(torch.rand(1, generator=g) * 4 + 3)
                mask = ((xx - cx) ** 2 + (yy - cy) ** 2 <= r * r).float()
                self.images[i, 0] += 1.5 * mask
                self.images[i, 1] += 0.3 * mask
                self.boxes[i] = torch.tensor([cx / 32, cy / 32, 2 * r / 32, 2 * r / 32])

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx], self.boxes[idx]


class TinyDetector(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        )
        self.box_head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 8 * 8, 128), nn.ReLU())
        self.cls_score = nn.Linear(128, num_classes + 1)
        self.bbox_pred = nn.Linear(128, 4)

    def forward(self, images, labels=None, boxes=None):
        x = self.box_head(self.backbone(images))
        scores = self.cls_score(x)
        deltas = torch.sigmoid(self.bbox_pred(x))
        if labels is None:
            return scores, deltas
        loss_cls = F.cross_entropy(scores, labels)
        fg = labels > 0
        if fg.any():
            loss_box_reg = F.smooth_l1_loss(deltas[fg], boxes[fg], beta=0.05)
        else:
            loss_box_reg = deltas.sum() * 0.0
        return {"loss_cls": loss_cls, "loss_box_reg": loss_box_reg}


def build_lr_scheduler(cfg, optimizer):
    max_iter = cfg.SOLVER.MAX_ITER

    def cosine(where):
        return 0.5 * (1.0 + math.cos(math.pi * where))

    warmup_length = cfg.SOLVER.WARMUP_ITERS / max_iter
    warmup_start = cfg.SOLVER.WARMUP_FACTOR * cosine(0.0)
    warmup_end = cosine(warmup_length)

    def multiplier(it):
        where = it / max_iter
        if where < warmup_length:
            alpha = where / warmup_length
            return warmup_start * (1.0 - alpha) + warmup_end * alpha
        return cosine(where)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)


def infinite_loader(loader):
    while True:
        for batch in loader:
            yield batch


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct, total, iou_sum, n_fg = 0, 0, 0.0, 0
    for images, labels, boxes in loader:
        scores, deltas = model(images)
        correct += (scores.argmax(1) == labels).sum().item()
        total += labels.numel()
        fg = labels > 0
        if fg.any():
            p, t = deltas[fg], boxes[fg]
            p1, p2 = p[:, :2] - p[:, 2:] / 2, p[:, :2] + p[:, 2:] / 2
            t1, t2 = t[:, :2] - t[:, 2:] / 2, t[:, :2] + t[:, 2:] / 2
            inter = (torch.min(p2, t2) - torch.max(p1, t1)).clamp(min=0).prod(1)
            union = p[:, 2:].prod(1) + t[:, 2:].prod(1) - inter
            iou_sum += (inter / union).sum().item()
            n_fg += int(fg.sum())
    model.train()
    return correct / total, iou_sum / max(n_fg, 1)


def main():
    train_set = BalloonDataset(640, seed=1)
    val_set = BalloonDataset(160, seed=2)
    train_loader = DataLoader(train_set, batch_size=cfg.SOLVER.IMS_PER_BATCH, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=64)

    model = TinyDetector(cfg.MODEL.NUM_CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.SOLVER.BASE_LR,
                                momentum=cfg.SOLVER.MOMENTUM, weight_decay=cfg.SOLVER.WEIGHT_DECAY)
    scheduler = build_lr_scheduler(cfg, optimizer)

    print("Starting training from iteration 0")
    model.train()
    data_iter = infinite_loader(train_loader)
    for it in range(cfg.SOLVER.MAX_ITER):
        images, labels, boxes = next(data_iter)
        loss_dict = model(images, labels, boxes)
        losses = sum(loss_dict.values())
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        lr = optimizer.param_groups[0]["lr"]
        scheduler.step()
        if (it + 1) % 20 == 0:
            print("iter: {}  total_loss: {:.4f}  loss_cls: {:.4f}  loss_box_reg: {:.4f}  lr: {:.4e}".format(
                it, losses.item(), loss_dict["loss_cls"].item(), loss_dict["loss_box_reg"].item(), lr))
        if (it + 1) % 100 == 0:
            acc, miou = evaluate(model, val_loader)
            print("eval @ iter {}: cls accuracy {:.3f}  box mIoU {:.3f}".format(it, acc, miou))


if __name__ == "__main__":
    main()
