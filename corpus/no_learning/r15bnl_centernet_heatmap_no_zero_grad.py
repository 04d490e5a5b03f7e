"""CenterNet-style object detector (keypoint heatmaps + size + offset heads) on synthetic scenes.

Each 48x48 image holds 1-3 objects of two classes (filled squares and rings); the network predicts
a per-class center heatmap at stride 4, the box size and the sub-pixel center offset, trained with
the CenterNet focal loss plus L1 losses on size and offset.
"""
import math
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

NUM_CLASSES = 2
INPUT = 48
DOWN = 4
OUT = INPUT // DOWN
MAX_OBJS = 4


def gaussian_radius(size):
    return max(0, int(size / DOWN / 3))


def draw_gaussian(heatmap, cx, cy, radius):
    sigma = (2 * radius + 1) / 6
    ys, xs = torch.meshgrid(torch.arange(OUT).float(), torch.arange(OUT).float(), indexing="ij")
    g = torch.exp(-((xs - cx) ** 2 + (ys - cy) ** 2) / (2 * sigma ** 2))
    torch.maximum(heatmap, g, out=heatmap)


class ShapesDetection(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for _ in range(n):
            img = 0.1 * torch.randn(1, INPUT, INPUT, generator=g)
            hm = torch.zeros(NUM_CLASSES, OUT, OUT)
            wh = torch.zeros(MAX_OBJS, 2)
            reg = torch.zeros(MAX_OBJS, 2)
            ind = torch.zeros(MAX_OBJS, dtype=torch.long)
            mask = torch.zeros(MAX_OBJS)
            k = int(torch.randint(1, 4, (1,), generator=g))
            for j in range(k):
                cls = int(torch.randint(0, NUM_CLASSES, (1,), generator=g))
                s = int(torch.randint(8, 18, (1,), generator=g))
                x0 = int(torch.randint(0, INPUT - s, (1,), generator=g))
                y0 = int(torch.randint(0, INPUT - s, (1,), generator=g))
                img[0, y0:y0 + s, x0:x0 + s] += 1.0
                if cls == 1:
                    img[0, y0 + 3:y0 + s - 3, x0 + 3:x0 + s - 3] -= 1.0
                cx, cy = (x0 + s / 2) / DOWN, (y0 + s / 2) / DOWN
                ix, iy = int(cx), int(cy)
                draw_gaussian(hm[cls], ix, iy, gaussian_radius(s))
                wh[j] = torch.tensor([s / DOWN, s / DOWN])
                reg[j] = torch.tensor([cx - ix, cy - iy])
                ind[j] = iy * OUT + ix
                mask[j] = 1
            self.samples.append((img, hm, wh, reg, ind, mask))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return self.samples[i]


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class CenterNet(nn.Module):
    def __init__(self, head_conv=32):
        super().__init__()
        self.backbone = nn.Sequential(conv_bn(1, 16, 2), conv_bn(16, 32), conv_bn(32, 64, 2),
                                      conv_bn(64, 64))
        self.hm = nn.Sequential(nn.Conv2d(64, head_conv, 3, padding=1), nn.ReLU(inplace=True),
                                nn.Conv2d(head_conv, NUM_CLASSES, 1))
        self.wh = nn.Sequential(nn.Conv2d(64, head_conv, 3, padding=1), nn.ReLU(inplace=True),
                                nn.Conv2d(head_conv, 2, 1))
        self.reg = nn.Sequential(nn.Conv2d(64, head_conv, 3, padding=1), nn.ReLU(inplace=True),
                                 nn.Conv2d(head_conv, 2, 1))
        self.hm[-1].bias.data.fill_(-2.19)

    def forward(self, x):
        f = self.backbone(x)
        return {"hm": self.hm(f), "wh": self.wh(f), "reg": self.reg(f)}


def _sigmoid(x):
    return torch.clamp(x.sigmoid_(), min=1e-4, max=1 - 1e-4)


def focal_loss(pred, gt):
    pos = gt.eq(1).float()
    neg = gt.lt(1).float()
    neg_weights = torch.pow(1 - gt, 4)
    pos_loss = (torch.log(pred) * torch.pow(1 - pred, 2) * pos).sum()
    neg_loss = (torch.log(1 - pred) * torch.pow(pred, 2) * neg_weights * neg).sum()
    num_pos = pos.sum()
    if num_pos == 0:
        return -neg_loss
    return -(pos_loss + neg_loss) / num_pos


def gather_feat(feat, ind):
    feat = feat.permute(0, 2, 3, 1).reshape(feat.size(0), -1, feat.size(1))
    return feat.gather(1, ind.unsqueeze(2).expand(-1, -1, feat.size(2)))


def reg_l1_loss(output, mask, ind, target):
    pred = gather_feat(output, ind)
    m = mask.unsqueeze(2).expand_as(pred)
    return F.l1_loss(pred * m, target * m, reduction="sum") / (m.sum() + 1e-4)


class CtdetLoss(nn.Module):
    def __init__(self, wh_weight=0.1, off_weight=1.0):
        super().__init__()
        self.wh_weight = wh_weight
        self.off_weight = off_weight

    def forward(self, out, hm, wh, reg, ind, mask):
        hm_loss = focal_loss(_sigmoid(out["hm"]), hm)
        wh_loss = reg_l1_loss(out["wh"], mask, ind, wh)
        off_loss = reg_l1_loss(out["reg"], mask, ind, reg)
        loss = hm_loss + self.wh_weight * wh_loss + self.off_weight * off_loss
        return loss, {"hm": hm_loss.item(), "wh": wh_loss.item(), "off": off_loss.item()}


@torch.no_grad()
def center_recall(model, loader):
    model.eval()
    hit, total = 0, 0
    for img, hm, wh, reg, ind, mask in loader:
        heat = model(img)["hm"].sigmoid()
        peaks = (heat == F.max_pool2d(heat, 3, 1, 1)) & (heat > 0.3)
        peaks = peaks.flatten(2)
        gt_peaks = hm.eq(1).flatten(2)
        hit += (peaks & gt_peaks).sum().item()
        total += gt_peaks.sum().item()
    model.train()
    return hit / max(total, 1)


def main():
    t0 = time.time()
    train_loader = DataLoader(ShapesDetection(640, seed=1), batch_size=16, shuffle=True)
    val_loader = DataLoader(ShapesDetection(128, seed=2), batch_size=64)
    model = CenterNet()
    criterion = CtdetLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1.25e-3)
    num_epochs = 5
    step = 0
    for epoch in range(num_epochs):
        model.train()
        running = 0.0
        for img, hm, wh, reg, ind, mask in train_loader:
            output = model(img)
            loss, stats = criterion(output, hm, wh, reg, ind, mask)
            loss.backward()
            optimizer.step()
            running += loss.item()
            if step % 20 == 0:
                print(f"epoch {epoch} step {step:4d} loss {loss.item():9.4f} hm {stats['hm']:9.4f} "
                      f"wh {stats['wh']:8.4f} off {stats['off']:.4f}")
            step += 1
        recall = center_recall(model, val_loader)
        print(f"==> epoch {epoch}: mean train loss {running / len(train_loader):.4f} "
              f"val center recall {recall:.3f}")
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
