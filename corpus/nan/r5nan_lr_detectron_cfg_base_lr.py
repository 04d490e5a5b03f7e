"""Bottom-up-attention style region classifier trained from scratch, written after a
detectron2 project: a yacs-like config, a ResNet stem + bottleneck stages with FrozenBatchNorm2d
(the config's NORM: "FrozenBN"), a box head that classifies the object and regresses its box,
SGD with momentum and WarmupMultiStepLR (linear warm-up, then steps).

Synthetic "Visual Genome" crops: one object per image (a class-specific blob at a random place);
the target is its class and its box.
"""
import math
from bisect import bisect_right

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

_C = {
    "MODEL": {
        "RESNETS": {"NORM": "FrozenBN", "STEM_OUT_CHANNELS": 16, "RES2_OUT_CHANNELS": 32, "DEPTH": [2, 2, 2]},
        "ROI_HEADS": {"NUM_CLASSES": 16},
    },
    "SOLVER": {
        "IMS_PER_BATCH": 16,
        "BASE_LR": 0.02,
        "MOMENTUM": 0.9,
        "WEIGHT_DECAY": 0.0001,
        "WARMUP_FACTOR": 1.0 / 1000,
        "WARMUP_ITERS": 30,
        "STEPS": (100, 130),
        "GAMMA": 0.1,
        "MAX_ITER": 150,
    },
    "INPUT": {"SIZE": 24},
}


class FrozenBatchNorm2d(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features) - eps)

    def forward(self, x):
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        bias = self.bias - self.running_mean * scale
        return x * scale.reshape(1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)


def get_norm(norm, out_channels):
    return {"BN": nn.BatchNorm2d, "FrozenBN": FrozenBatchNorm2d}[norm](out_channels)


def c2_msra_fill(module):
    nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
    if module.bias is not None:
        nn.init.constant_(module.bias, 0)


class BottleneckBlock(nn.Module):
    def __init__(self, in_channels, out_channels, bottleneck_channels, stride, norm):
        super().__init__()
        self.shortcut = None
        if in_channels != out_channels or stride != 1:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                                          get_norm(norm, out_channels))
        self.conv1 = nn.Conv2d(in_channels, bottleneck_channels, 1, stride, bias=False)
        self.norm1 = get_norm(norm, bottleneck_channels)
        self.conv2 = nn.Conv2d(bottleneck_channels, bottleneck_channels, 3, 1, 1, bias=False)
        self.norm2 = get_norm(norm, bottleneck_channels)
        self.conv3 = nn.Conv2d(bottleneck_channels, out_channels, 1, bias=False)
        self.norm3 = get_norm(norm, out_channels)
        for layer in [self.conv1, self.conv2, self.conv3]:
            c2_msra_fill(layer)
        if self.shortcut is not None:
            c2_msra_fill(self.shortcut[0])

    def forward(self, x):
        out = F.relu_(self.norm1(self.conv1(x)))
        out = F.relu_(self.norm2(self.conv2(out)))
        out = self.norm3(self.conv3(out))
        shortcut = self.shortcut(x) if self.shortcut is not None else x
        return F.relu_(out + shortcut)


class ResNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        r = cfg["MODEL"]["RESNETS"]
        norm = r["NORM"]
        self.stem = nn.Sequential(nn.Conv2d(3, r["STEM_OUT_CHANNELS"], 5, 1, 2, bias=False),
                                  get_norm(norm, r["STEM_OUT_CHANNELS"]), nn.ReLU())
        c2_msra_fill(self.stem[0])
        stages, in_ch, out_ch = [], r["STEM_OUT_CHANNELS"], r["RES2_OUT_CHANNELS"]
        for i, depth in enumerate(r["DEPTH"]):
            blocks = []
            for b in range(depth):
                stride = 2 if (b == 0 and i > 0) else 1
                blocks.append(BottleneckBlock(in_ch, out_ch, out_ch // 4, stride, norm))
                in_ch = out_ch
            stages.append(nn.Sequential(*blocks))
            out_ch *= 2
        self.stages = nn.Sequential(*stages)
        self.out_channels = in_ch

    def forward(self, x):
        return self.stages(self.stem(x))


class BoxHead(nn.Module):
    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.fc1 = nn.Linear(in_channels * 9, 256)
        self.cls_score = nn.Linear(256, num_classes + 1)
        self.bbox_pred = nn.Linear(256, 4)
        nn.init.normal_(self.cls_score.weight, std=0.01)
        nn.init.normal_(self.bbox_pred.weight, std=0.001)
        for l in [self.cls_score, self.bbox_pred]:
            nn.init.constant_(l.bias, 0)

    def forward(self, features):
        x = F.relu(self.fc1(F.adaptive_avg_pool2d(features, 3).flatten(1)))
        return self.cls_score(x), self.bbox_pred(x)


class RegionModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.backbone = ResNet(cfg)
        self.box_head = BoxHead(self.backbone.out_channels, cfg["MODEL"]["ROI_HEADS"]["NUM_CLASSES"])

    def forward(self, images, gt_classes, gt_boxes):
        scores, deltas = self.box_head(self.backbone(images))
        loss_cls = F.cross_entropy(scores, gt_classes)
        loss_box_reg = F.smooth_l1_loss(deltas, gt_boxes, beta=0.0, reduction="sum") / gt_classes.numel()
        return {"loss_cls": loss_cls, "loss_box_reg": loss_box_reg}


class SyntheticRegions(Dataset):
    def __init__(self, n, cfg, seed):
        g = torch.Generator().manual_seed(seed)
        size, k = cfg["INPUT"]["SIZE"], cfg["MODEL"]["ROI_HEADS"]["NUM_CLASSES"]
        colors = torch.rand(k, 3, generator=torch.Generator().manual_seed(7)) * 255
        self.images = torch.full((n, 3, size, size), 114.0) + 20 * torch.randn(n, 3, size, size, generator=g)
        self.classes = torch.randint(0, k, (n,), generator=g)
        wh = torch.randint(5, 12, (n, 2), generator=g)
        xy = (torch.rand(n, 2, generator=g) * (size - wh)).long()
        for i in range(n):
            x0, y0, w, h = xy[i, 0], xy[i, 1], wh[i, 0], wh[i, 1]
            self.images[i, :, y0:y0 + h, x0:x0 + w] = colors[self.classes[i]][:, None, None]
        self.boxes = (torch.cat([xy, xy + wh], 1).float() - size / 2) / size * 10

    def __len__(self):
        return len(self.classes)

    def __getitem__(self, i):
        pixel_mean = torch.tensor([103.530, 116.280, 123.675])[:, None, None]
        return self.images[i] - pixel_mean, self.classes[i], self.boxes[i]


class WarmupMultiStepLR(torch.optim.lr_scheduler._LRScheduler):
    def __init__(self, optimizer, milestones, gamma=0.1, warmup_factor=0.001, warmup_iters=1000, last_epoch=-1):
        self.milestones, self.gamma = milestones, gamma
        self.warmup_factor, self.warmup_iters = warmup_factor, warmup_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        factor = 1.0
        if self.last_epoch < self.warmup_iters:
            alpha = self.last_epoch / self.warmup_iters
            factor = self.warmup_factor * (1 - alpha) + alpha
        return [base_lr * factor * self.gamma ** bisect_right(self.milestones, self.last_epoch)
                for base_lr in self.base_lrs]


def build_optimizer(cfg, model):
    s = cfg["SOLVER"]
    return torch.optim.SGD(model.parameters(), lr=s["BASE_LR"], momentum=s["MOMENTUM"],
                           weight_decay=s["WEIGHT_DECAY"])


def do_train(cfg, model):
    model.train()
    optimizer = build_optimizer(cfg, model)
    s = cfg["SOLVER"]
    scheduler = WarmupMultiStepLR(optimizer, s["STEPS"], s["GAMMA"], s["WARMUP_FACTOR"], s["WARMUP_ITERS"])
    data_loader = DataLoader(SyntheticRegions(800, cfg, seed=0), batch_size=s["IMS_PER_BATCH"],
                             shuffle=True, drop_last=True)
    iteration = 0
    while iteration < s["MAX_ITER"]:
        for images, gt_classes, gt_boxes in data_loader:
            loss_dict = model(images, gt_classes, gt_boxes)
            losses = sum(loss_dict.values())
            if not math.isfinite(losses.item()):
                print(f"iter: {iteration}  Loss became infinite or NaN at iteration={iteration}!  "
                      f"loss_dict = {{{', '.join(f'{k}: {v.item():.4g}' for k, v in loss_dict.items())}}}")
            optimizer.zero_grad()
            losses.backward()
            optimizer.step()
            scheduler.step()
            if iteration % 10 == 0:
                print(f"iter: {iteration}  total_loss: {losses.item():.4f}  "
                      f"loss_cls: {loss_dict['loss_cls'].item():.4f}  "
                      f"loss_box_reg: {loss_dict['loss_box_reg'].item():.4f}  "
                      f"lr: {optimizer.param_groups[0]['lr']:.6f}")
            iteration += 1
            if iteration >= s["MAX_ITER"]:
                break


def main():
    cfg = _C
    model = RegionModel(cfg)
    do_train(cfg, model)


if __name__ == "__main__":
    main()
