"""UnitBox-style single-object detector on synthetic 32x32 scenes: a small fully
convolutional net predicts, for every pixel, a confidence score and its distances
to the four box edges (top, bottom, left, right), trained with the IoU loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

IMG = 32
STRIDE = 8


class BoxScenes(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.images, self.boxes = [], []
        for _ in range(n):
            w = int(torch.randint(8, 20, (1,), generator=g))
            h = int(torch.randint(8, 20, (1,), generator=g))
            x0 = int(torch.randint(0, IMG - w, (1,), generator=g))
            y0 = int(torch.randint(0, IMG - h, (1,), generator=g))
            img = 0.3 * torch.randn(3, IMG, IMG, generator=g)
            img[:, y0:y0 + h, x0:x0 + w] += torch.tensor([1.0, 0.5, -0.5]).view(3, 1, 1)
            self.images.append(img)
            self.boxes.append(torch.tensor([x0, y0, x0 + w, y0 + h], dtype=torch.float32))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        x0, y0, x1, y1 = self.boxes[i]
        ys = torch.arange(IMG, dtype=torch.float32).view(IMG, 1).expand(IMG, IMG) + 0.5
        xs = torch.arange(IMG, dtype=torch.float32).view(1, IMG).expand(IMG, IMG) + 0.5
        inside = (xs > x0) & (xs < x1) & (ys > y0) & (ys < y1)
        dist = torch.stack([ys - y0, y1 - ys, xs - x0, x1 - xs]) / STRIDE
        dist = dist * inside.float()
        return self.images[i], dist, inside.float().unsqueeze(0)


class UnitBoxNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU(),
            nn.Conv2d(12, 24, 3, padding=2, dilation=2), nn.BatchNorm2d(24), nn.ReLU(),
            nn.Conv2d(24, 24, 3, padding=4, dilation=4), nn.BatchNorm2d(24), nn.ReLU(),
        )
        self.score = nn.Conv2d(24, 1, 1)
        self.bbox = nn.Conv2d(24, 4, 3, padding=1)

    def forward(self, x):
        feat = self.backbone(x)
        return self.score(feat), self.bbox(feat)


def IOULoss(pred, target, weight, avg_factor):
    xt, xb, xl, xr = torch.split(pred, 1, dim=1)
    gt, gb, gl, gr = torch.split(target, 1, dim=1)

    X = (xt + xb) * (xl + xr)
    G = (gt + gb) * (gl + gr)

    Ih = torch.min(xt, gt) + torch.min(xb, gb)
    Iw = torch.min(xl, gl) + torch.min(xr, gr)

    _EPSILON = 10e-8
    I = Ih * Iw
    U = X + G - I + _EPSILON
    IoU = torch.div(I, U)

    L = torch.where(gt <= 0.01, torch.zeros_like(xt), -torch.log(IoU + _EPSILON))
    return torch.sum(L * weight) / avg_factor, IoU


train_loader = DataLoader(BoxScenes(320, 1), batch_size=8, shuffle=True)
val_loader = DataLoader(BoxScenes(64, 2), batch_size=64)

model = UnitBoxNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

step = 0
for epoch in range(5):
    model.train()
    run_loss = run_cls = run_iou = 0.0
    for images, dist, mask in train_loader:
        score, bbox = model(images)
        cls_loss = F.binary_cross_entropy_with_logits(score, mask)
        iou_loss, _ = IOULoss(bbox, dist, mask, mask.sum().clamp(min=1))
        loss = cls_loss + iou_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        run_loss += loss.item(); run_cls += cls_loss.item(); run_iou += iou_loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step:3d}  loss {run_loss / 10:.4f}  cls {run_cls / 10:.4f}  iou_loss {run_iou / 10:.4f}")
            run_loss = run_cls = run_iou = 0.0

    model.eval()
    ious, accs = [], []
    with torch.no_grad():
        for images, dist, mask in val_loader:
            score, bbox = model(images)
            _, iou = IOULoss(bbox, dist, mask, mask.sum())
            ious.append(iou[mask.bool()].mean().item())
            accs.append(((score > 0).float() == mask).float().mean().item())
    print(f"epoch {epoch} val mean pixel IoU {sum(ious) / len(ious):.4f}  score acc {sum(accs) / len(accs):.4f}")
