"""Small ResNet-style backbone + FPN neck + a foreground segmentation head, trained with
multi-scale input sizes (random scale per batch) as in the detection configs.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(2)

IMG_SCALES = [(64, 96), (96, 64), (80, 80), (64, 104)]
BATCH_SIZE = 8


def make_batch(h, w, n, g):
    yy = torch.arange(h).view(1, h, 1).float()
    xx = torch.arange(w).view(1, 1, w).float()
    cy = torch.randint(12, h - 12, (n, 1, 1), generator=g).float()
    cx = torch.randint(12, w - 12, (n, 1, 1), generator=g).float()
    r = torch.randint(6, 12, (n, 1, 1), generator=g).float()
    mask = (((yy - cy) ** 2 + (xx - cx) ** 2) <= r ** 2).float().unsqueeze(1)
    img = mask.repeat(1, 3, 1, 1) * torch.tensor([0.8, 0.3, 0.5]).view(1, 3, 1, 1)
    img = img + 0.3 * torch.randn(n, 3, h, w, generator=g)
    return img, mask


def conv_bn(in_ch, out_ch, stride):
    return nn.Sequential(nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False), nn.BatchNorm2d(out_ch), nn.ReLU(inplace=True))


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 16, 2)
        self.layer1 = conv_bn(16, 16, 1)
        self.layer2 = conv_bn(16, 32, 2)
        self.layer3 = conv_bn(32, 48, 2)
        self.layer4 = conv_bn(48, 64, 2)

    def forward(self, x):
        c1 = self.layer1(self.stem(x))
        c2 = self.layer2(c1)
        c3 = self.layer3(c2)
        c4 = self.layer4(c3)
        return [c1, c2, c3, c4]


class FPN(nn.Module):
    def __init__(self, in_channels, out_channels=32):
        super().__init__()
        self.lateral_convs = nn.ModuleList([nn.Conv2d(c, out_channels, 1) for c in in_channels])
        self.fpn_convs = nn.ModuleList([nn.Conv2d(out_channels, out_channels, 3, padding=1) for _ in in_channels])

    def forward(self, inputs):
        laterals = [lateral_conv(inputs[i]) for i, lateral_conv in enumerate(self.lateral_convs)]
        used_backbone_levels = len(laterals)
        for i in range(used_backbone_levels - 1, 0, -1):
            laterals[i - 1] = laterals[i - 1] + F.interpolate(laterals[i], scale_factor=2, mode="nearest")
        return [self.fpn_convs[i](laterals[i]) for i in range(used_backbone_levels)]


class SegDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Backbone()
        self.neck = FPN([16, 32, 48, 64])
        self.head = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(32, 1, 1))

    def forward(self, x):
        feats = self.neck(self.backbone(x))
        logits = self.head(feats[0])
        return F.interpolate(logits, size=x.shape[-2:], mode="bilinear", align_corners=False)


model = SegDetector()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
g = torch.Generator().manual_seed(1)

for it in range(50):
    h, w = random.choice(IMG_SCALES)
    img, mask = make_batch(h, w, BATCH_SIZE, g)
    logits = model(img)
    loss = F.binary_cross_entropy_with_logits(logits, mask)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if it % 2 == 0:
        with torch.no_grad():
            pred = (logits > 0).float()
            iou = (pred * mask).sum() / ((pred + mask) > 0).float().sum().clamp(min=1)
        print(f"iter {it} scale {h}x{w}: loss {loss.item():.4f} iou {iou.item():.3f}")
