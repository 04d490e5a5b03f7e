"""Single-object detector (class + box, Darknet-style LeakyReLU backbone) trained with an
mmdetection-style config: SGD with momentum, linear warm-up, step decay, CrossEntropy + SmoothL1
on the decoded box. The config's learning rate is for 8 GPUs x 2 images; following the Linear
Scaling Rule it is rescaled to the batch used here."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

cfg = dict(
    optimizer=dict(type="SGD", lr=0.02, momentum=0.9, weight_decay=0.0001),
    lr_config=dict(policy="step", warmup="linear", warmup_iters=20, warmup_ratio=1.0 / 3, step=[8, 11]),
    data=dict(imgs_per_gpu=2, workers_per_gpu=2),
    total_epochs=3,
    num_classes=5,
)
num_gpus = 48


class ShapesDataset(Dataset):
    """Random 24x24 images holding one bright rectangle; target = class and (cx, cy, w, h)."""

    def __init__(self, n, num_classes):
        self.images = 0.1 * torch.randn(n, 3, 24, 24)
        self.labels = torch.randint(0, num_classes, (n,))
        self.boxes = torch.zeros(n, 4)
        colors = torch.eye(3).repeat(2, 1)[:num_classes] * 2.0 + 0.5
        for i in range(n):
            w, h = torch.randint(4, 14, (2,)).tolist()
            x0 = torch.randint(0, 24 - w, (1,)).item()
            y0 = torch.randint(0, 24 - h, (1,)).item()
            self.images[i, :, y0:y0 + h, x0:x0 + w] += colors[self.labels[i]].view(3, 1, 1) * (1 + self.labels[i] % 2)
            self.boxes[i] = torch.tensor([x0 + w / 2, y0 + h / 2, w, h])

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i], self.boxes[i]


class TinyDetector(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.LeakyReLU(0.1, inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.LeakyReLU(0.1, inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.LeakyReLU(0.1, inplace=True), nn.MaxPool2d(2),
        )
        self.neck = nn.Sequential(nn.Flatten(), nn.Linear(64 * 3 * 3, 128), nn.LeakyReLU(0.1, inplace=True))
        self.cls_head = nn.Linear(128, num_classes)
        self.reg_head = nn.Linear(128, 4)
        self.register_buffer("anchor", torch.tensor([12.0, 12.0, 8.0, 8.0]))

    def decode(self, deltas):
        cxy = self.anchor[:2] + deltas[:, :2] * self.anchor[2:]
        wh = self.anchor[2:] * torch.exp(deltas[:, 2:])
        return torch.cat([cxy, wh], dim=1)

    def forward(self, x):
        feat = self.neck(self.backbone(x))
        return self.cls_head(feat), self.decode(self.reg_head(feat))


def main():
    batch_size = num_gpus * cfg["data"]["imgs_per_gpu"]
    base_lr = cfg["optimizer"]["lr"] * batch_size / 16
    print(f"batch size {batch_size}, scaled lr {base_lr:.4f}")

    train_set = ShapesDataset(3840, cfg["num_classes"])
    val_set = ShapesDataset(480, cfg["num_classes"])
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=240)

    model = TinyDetector(cfg["num_classes"])
    opt_cfg = cfg["optimizer"]
    optimizer = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=opt_cfg["momentum"],
                                weight_decay=opt_cfg["weight_decay"])
    lr_cfg = cfg["lr_config"]

    it = 0
    for epoch in range(cfg["total_epochs"]):
        model.train()
        for i, (img, label, box) in enumerate(train_loader):
            if it < lr_cfg["warmup_iters"]:
                k = (1 - it / lr_cfg["warmup_iters"]) * (1 - lr_cfg["warmup_ratio"])
                lr = base_lr * (1 - k)
            else:
                lr = base_lr * 0.1 ** sum(epoch >= s for s in lr_cfg["step"])
            for g in optimizer.param_groups:
                g["lr"] = lr
            cls_score, bbox_pred = model(img)
            loss_cls = F.cross_entropy(cls_score, label)
            loss_bbox = F.smooth_l1_loss(bbox_pred, box)
            loss = loss_cls + loss_bbox
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            it += 1
            if i % 8 == 0:
                print(f"Epoch [{epoch + 1}][{i}/{len(train_loader)}] lr: {lr:.5f}, loss_cls: {loss_cls.item():.4f}, "
                      f"loss_bbox: {loss_bbox.item():.4f}, loss: {loss.item():.4f}")
        model.eval()
        correct, l1, n = 0, 0.0, 0
        with torch.no_grad():
            for img, label, box in val_loader:
                cls_score, bbox_pred = model(img)
                correct += (cls_score.argmax(1) == label).sum().item()
                l1 += (bbox_pred - box).abs().mean(1).sum().item()
                n += len(label)
        print(f"Epoch({epoch + 1}) val: acc {correct / n:.4f}, box_l1 {l1 / n:.4f}")


if __name__ == "__main__":
    main()
