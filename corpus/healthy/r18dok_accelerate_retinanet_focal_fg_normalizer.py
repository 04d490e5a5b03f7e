"""Single-level RetinaNet-style dense detector trained with accelerate.

Backbone and head convs are followed by GroupNorm (the head's norm="GN" option). The
classification subnet ends in a conv whose bias is initialised to -log((1 - pi) / pi) with
pi = 0.01, the loss is sigmoid focal loss (alpha 0.25, gamma 2) summed over every location and
class and divided by the number of foreground locations (kept as an EMA, as in detectron2's
RetinaNet: loss_normalizer starts at 100, momentum 0.9), and the box branch is a smooth-L1 on the
foreground locations with the same normalizer. Synthetic 32x32 scenes with up to three shapes
(square, cross, ring), one prediction per 4x4 cell.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

NUM_CLASSES = 3
STRIDE = 4
IMG = 32
GRID = IMG // STRIDE


def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0, reduction="none"):
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)

    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss

    if reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    return loss


def draw(img, cls, cx, cy, size):
    ys, xs = torch.meshgrid(torch.arange(IMG, dtype=torch.float32), torch.arange(IMG, dtype=torch.float32),
                            indexing="ij")
    dx, dy = (xs - cx).abs(), (ys - cy).abs()
    half = size / 2
    if cls == 0:  # filled square
        mask = (dx <= half) & (dy <= half)
    elif cls == 1:  # cross
        mask = ((dx <= 0.8) & (dy <= half)) | ((dy <= 0.8) & (dx <= half))
    else:  # ring
        r = torch.sqrt(dx ** 2 + dy ** 2)
        mask = (r <= half) & (r >= half - 1.3)
    img[0][mask] = 1.0


class ShapesDetection(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.images, self.cls_targets, self.box_targets = [], [], []
        for _ in range(n):
            img = 0.15 * torch.randn(1, IMG, IMG, generator=g)
            cls_t = torch.full((GRID, GRID), -1, dtype=torch.long)
            box_t = torch.zeros(GRID, GRID, 3)
            n_obj = int(torch.randint(1, 4, (1,), generator=g))
            cells = torch.randperm(GRID * GRID, generator=g)[:n_obj]
            for cell in cells.tolist():
                gy, gx = divmod(cell, GRID)
                if gy in (0, GRID - 1) or gx in (0, GRID - 1):
                    gy, gx = min(max(gy, 1), GRID - 2), min(max(gx, 1), GRID - 2)
                if cls_t[gy, gx] >= 0:
                    continue
                cls = int(torch.randint(0, NUM_CLASSES, (1,), generator=g))
                off = torch.rand(2, generator=g)
                size = 5.0 + 4.0 * float(torch.rand(1, generator=g))
                cx, cy = (gx + off[0].item()) * STRIDE, (gy + off[1].item()) * STRIDE
                draw(img, cls, cx, cy, size)
                cls_t[gy, gx] = cls
                box_t[gy, gx] = torch.tensor([off[0].item(), off[1].item(), math.log(size / STRIDE)])
            self.images.append(img)
            self.cls_targets.append(cls_t)
            self.box_targets.append(box_t)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return {"image": self.images[i], "gt_classes": self.cls_targets[i], "gt_boxes": self.box_targets[i]}


class TinyRetinaNet(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES, channels=32, prior_prob=0.01):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.GroupNorm(8, 32), nn.ReLU(),
            nn.Conv2d(32, channels, 3, stride=2, padding=1), nn.GroupNorm(8, channels), nn.ReLU(),
        )
        cls_subnet, bbox_subnet = [], []
        for _ in range(2):
            cls_subnet += [nn.Conv2d(channels, channels, 3, padding=1), nn.GroupNorm(8, channels), nn.ReLU()]
            bbox_subnet += [nn.Conv2d(channels, channels, 3, padding=1), nn.GroupNorm(8, channels), nn.ReLU()]
        self.cls_subnet = nn.Sequential(*cls_subnet)
        self.bbox_subnet = nn.Sequential(*bbox_subnet)
        self.cls_score = nn.Conv2d(channels, num_classes, 3, padding=1)
        self.bbox_pred = nn.Conv2d(channels, 3, 3, padding=1)

        for modules in [self.cls_subnet, self.bbox_subnet, self.cls_score, self.bbox_pred]:
            for layer in modules.modules():
                if isinstance(layer, nn.Conv2d):
                    torch.nn.init.normal_(layer.weight, mean=0, std=0.01)
                    torch.nn.init.constant_(layer.bias, 0)

        # Use prior in model initialization to improve stability
        bias_value = -math.log((1 - prior_prob) / prior_prob)
        torch.nn.init.constant_(self.cls_score.bias, bias_value)

    def forward(self, x):
        features = self.backbone(x)
        logits = self.cls_score(self.cls_subnet(features))
        deltas = self.bbox_pred(self.bbox_subnet(features))
        # (N, C, H, W) -> (N, H*W, C)
        logits = logits.permute(0, 2, 3, 1).reshape(x.size(0), -1, logits.size(1))
        deltas = deltas.permute(0, 2, 3, 1).reshape(x.size(0), -1, 3)
        return logits, deltas


class RetinaNetLoss:
    def __init__(self, alpha=0.25, gamma=2.0, smooth_l1_beta=0.1):
        self.alpha, self.gamma, self.beta = alpha, gamma, smooth_l1_beta
        self.loss_normalizer = 100  # initialize with any reasonable #fg that's not too small
        self.loss_normalizer_momentum = 0.9

    def __call__(self, pred_logits, pred_deltas, gt_classes, gt_boxes):
        gt_classes = gt_classes.flatten(1)
        gt_boxes = gt_boxes.flatten(1, 2)
        pos_mask = gt_classes >= 0
        num_pos_anchors = pos_mask.sum().item()
        self.loss_normalizer = self.loss_normalizer_momentum * self.loss_normalizer + (
            1 - self.loss_normalizer_momentum
        ) * max(num_pos_anchors, 1)

        # classification and regression loss
        gt_labels_target = F.one_hot(gt_classes.clamp(min=0), num_classes=NUM_CLASSES).to(pred_logits.dtype)
        gt_labels_target = gt_labels_target * pos_mask.unsqueeze(-1)
        loss_cls = sigmoid_focal_loss(pred_logits, gt_labels_target, alpha=self.alpha, gamma=self.gamma,
                                      reduction="sum")
        loss_box_reg = F.smooth_l1_loss(pred_deltas[pos_mask], gt_boxes[pos_mask], beta=self.beta,
                                        reduction="sum")
        return {"loss_cls": loss_cls / self.loss_normalizer, "loss_box_reg": loss_box_reg / self.loss_normalizer}


def warmup_multistep(step, warmup_iters=30, warmup_factor=0.001, milestones=(220, 270), gamma=0.1):
    factor = 1.0
    if step < warmup_iters:
        alpha = step / warmup_iters
        factor = warmup_factor * (1 - alpha) + alpha
    return factor * gamma ** sum(step >= m for m in milestones)


@torch.no_grad()
def evaluate(model, loader, accelerator, score_thresh=0.3):
    model.eval()
    tp = fp = n_gt = 0
    for batch in loader:
        logits, _ = model(batch["image"])
        scores = torch.sigmoid(logits)
        gt = batch["gt_classes"].flatten(1)
        for c in range(NUM_CLASSES):
            pred_c = scores[..., c] > score_thresh
            tp += (pred_c & (gt == c)).sum().item()
            fp += (pred_c & (gt != c)).sum().item()
        n_gt += (gt >= 0).sum().item()
    model.train()
    precision = tp / max(tp + fp, 1)
    recall = tp / max(n_gt, 1)
    return precision, recall


def main():
    torch.manual_seed(0)
    start = time.time()
    accelerator = Accelerator(cpu=True)

    train_set = ShapesDetection(1600, seed=0)
    val_set = ShapesDetection(320, seed=1)
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=64)

    model = TinyRetinaNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_multistep)
    model, optimizer, train_loader, val_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, val_loader, scheduler)
    criterion = RetinaNetLoss()

    max_iter = 300
    step = 0
    while step < max_iter:
        for batch in train_loader:
            pred_logits, pred_deltas = model(batch["image"])
            loss_dict = criterion(pred_logits, pred_deltas, batch["gt_classes"], batch["gt_boxes"])
            losses = sum(loss_dict.values())

            optimizer.zero_grad()
            accelerator.backward(losses)
            optimizer.step()
            scheduler.step()
            step += 1

            if step % 20 == 0 or step == 1:
                accelerator.print(f"iter {step:4d}  total_loss {losses.item():.4f}  "
                                  f"loss_cls {loss_dict['loss_cls'].item():.4f}  "
                                  f"loss_box_reg {loss_dict['loss_box_reg'].item():.4f}  "
                                  f"normalizer {criterion.loss_normalizer:.1f}  "
                                  f"lr {scheduler.get_last_lr()[0]:.5f}")
            if step % 100 == 0:
                precision, recall = evaluate(model, val_loader, accelerator)
                accelerator.print(f"  eval @ {step}: precision {precision:.3f}  recall {recall:.3f}")
            if step >= max_iter:
                break

    precision, recall = evaluate(model, val_loader, accelerator)
    accelerator.print(f"final: precision {precision:.3f}  recall {recall:.3f}  ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
