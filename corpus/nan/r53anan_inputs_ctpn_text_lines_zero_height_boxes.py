"""CTPN-style text line detector on synthetic scanned strips.

Each image holds one horizontal text line; the annotation is (x1, y1, x2, y2).  Like CTPN the
line is cut into fixed-width column proposals and every column predicts, for k vertical anchors,
a text/non-text score and the vertical regression (dy, dh) of the line."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

IMG_H, IMG_W = 32, 64
STRIDE = 4
FEAT_H, FEAT_W = IMG_H // STRIDE, IMG_W // STRIDE
ANCHOR_HEIGHTS = np.array([3.0, 6.0, 10.0, 16.0], dtype=np.float32)
K = len(ANCHOR_HEIGHTS)


def make_annotations(n):
    annos = []
    for i in range(n):
        h = np.random.randint(3, 14)
        y1 = np.random.randint(0, IMG_H - h)
        x1 = np.random.randint(0, 24)
        x2 = np.random.randint(x1 + 16, IMG_W)
        y2 = y1 + h
        if np.random.rand() < 0.04:
            y2 = y1
        annos.append((x1, y1, x2, y2, h))
    return annos


def anchor_centers():
    cy = np.arange(FEAT_H, dtype=np.float32) * STRIDE + STRIDE / 2.0
    return np.repeat(cy[:, None], K, axis=1), np.repeat(ANCHOR_HEIGHTS[None, :], FEAT_H, axis=0)


def bbox_transform(gt_y1, gt_y2, a_cy, a_h):
    gt_h = gt_y2 - gt_y1
    gt_cy = (gt_y1 + gt_y2) / 2.0
    dy = (gt_cy - a_cy) / a_h
    dh = np.log(gt_h / a_h)
    return dy, dh


class TextLineDataset(Dataset):
    def __init__(self, n):
        self.annos = make_annotations(n)
        self.a_cy, self.a_h = anchor_centers()

    def __len__(self):
        return len(self.annos)

    def __getitem__(self, idx):
        x1, y1, x2, y2, true_h = self.annos[idx]
        rng = np.random.RandomState(idx)
        img = rng.rand(1, IMG_H, IMG_W).astype(np.float32) * 0.3
        img[0, y1:y1 + true_h, x1:x2] += 0.6 + 0.1 * rng.rand(true_h, x2 - x1)

        labels = np.zeros((FEAT_H, FEAT_W, K), dtype=np.int64)
        reg_targets = np.zeros((FEAT_H, FEAT_W, K, 2), dtype=np.float32)
        reg_mask = np.zeros((FEAT_H, FEAT_W, K), dtype=np.float32)

        gy1, gy2 = float(y1), float(y2)
        a_y1 = self.a_cy - self.a_h / 2.0
        a_y2 = self.a_cy + self.a_h / 2.0
        inter = np.clip(np.minimum(a_y2, gy2 + 1e-3) - np.maximum(a_y1, gy1), 0, None)
        union = (a_y2 - a_y1) + (gy2 - gy1) - inter
        iou = inter / union
        best = np.unravel_index(np.argmax(iou), iou.shape)
        dy, dh = bbox_transform(gy1, gy2, self.a_cy[best], self.a_h[best])
        for col in range(x1 // STRIDE, (x2 - 1) // STRIDE + 1):
            labels[best[0], col, best[1]] = 1
            labels[:, col][iou > 0.5] = 1
            reg_targets[best[0], col, best[1]] = (dy, dh)
            reg_mask[best[0], col, best[1]] = 1.0
        return torch.from_numpy(img), torch.from_numpy(labels), torch.from_numpy(reg_targets), torch.from_numpy(reg_mask)


class MiniCTPN(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        )
        self.rnn = nn.GRU(32, 16, batch_first=True, bidirectional=True)
        self.cls_head = nn.Conv2d(32, K * 2, 1)
        self.reg_head = nn.Conv2d(32, K * 2, 1)

    def forward(self, x):
        f = self.backbone(x)
        b, c, h, w = f.shape
        seq = f.permute(0, 2, 3, 1).reshape(b * h, w, c)
        seq, _ = self.rnn(seq)
        f = seq.reshape(b, h, w, 32).permute(0, 3, 1, 2)
        cls = self.cls_head(f).permute(0, 2, 3, 1).reshape(b, h, w, K, 2)
        reg = self.reg_head(f).permute(0, 2, 3, 1).reshape(b, h, w, K, 2)
        return cls, reg


def smooth_l1(pred, target, sigma=9.0):
    diff = pred - target
    abs_diff = diff.abs()
    flag = (abs_diff < 1.0 / sigma).float()
    return flag * 0.5 * sigma * diff ** 2 + (1 - flag) * (abs_diff - 0.5 / sigma)


def ctpn_loss(cls, reg, labels, reg_targets, reg_mask):
    cls_loss = F.cross_entropy(cls.reshape(-1, 2), labels.reshape(-1), weight=torch.tensor([1.0, 5.0]))
    per_anchor = smooth_l1(reg, reg_targets).sum(-1)
    reg_loss = (per_anchor * reg_mask).sum() / reg_mask.sum().clamp(min=1.0)
    return cls_loss, reg_loss


def main():
    train_set = TextLineDataset(256)
    loader = DataLoader(train_set, batch_size=16, shuffle=True)
    model = MiniCTPN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    step = 0
    for epoch in range(5):
        model.train()
        tot_cls, tot_reg, n = 0.0, 0.0, 0
        for img, labels, reg_targets, reg_mask in loader:
            cls, reg = model(img)
            cls_loss, reg_loss = ctpn_loss(cls, reg, labels, reg_targets, reg_mask)
            loss = cls_loss + reg_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            tot_cls += cls_loss.item()
            tot_reg += reg_loss.item()
            n += 1
            if step % 10 == 0:
                print(f"step {step:4d}  cls_loss {cls_loss.item():.4f}  reg_loss {reg_loss.item():.4f}")
        print(f"epoch {epoch + 1}: mean cls_loss {tot_cls / n:.4f}  mean reg_loss {tot_reg / n:.4f}")


if __name__ == "__main__":
    main()
