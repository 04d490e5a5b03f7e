"""CIRKD-style cross-image relational distillation for semantic segmentation.

A frozen teacher segmentation net guides a light student with pixel CE, a pixel-wise KD loss
and the mini-batch cross-image pair loss, on synthetic Voronoi "street scenes"
(6 classes).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--crop-size", type=int, default=96)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--max-iterations", type=int, default=30)
parser.add_argument("--lambda-kd", type=float, default=1.0)
parser.add_argument("--lambda-minibatch-pixel", type=float, default=1.0)
parser.add_argument("--pixel-memory-temperature", type=float, default=0.1)
parser.add_argument("--num-classes", type=int, default=6)
args = parser.parse_args()

torch.manual_seed(0)


class SyntheticCityscapes(Dataset):
    def __init__(self, n, size, num_classes):
        g = torch.Generator().manual_seed(1)
        self.images = []
        self.masks = []
        for _ in range(n):
            centers = torch.rand(num_classes, 2, generator=g) * size
            yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
            d = (yy[None] - centers[:, 0, None, None]) ** 2 + (xx[None] - centers[:, 1, None, None]) ** 2
            mask = d.argmin(0)
            palette = torch.rand(num_classes, 3, generator=g)
            img = palette[mask].permute(2, 0, 1) + 0.1 * torch.randn(3, size, size, generator=g)
            self.images.append(img)
            self.masks.append(mask)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SegNet(nn.Module):
    def __init__(self, width, num_classes):
        super().__init__()
        self.backbone = nn.Sequential(
            conv_bn(3, width, 2), conv_bn(width, width),
            conv_bn(width, 2 * width, 2), conv_bn(2 * width, 2 * width),
        )
        self.head = nn.Conv2d(2 * width, num_classes, 1)

    def forward(self, x):
        feat = self.backbone(x)
        return self.head(feat), feat


class CriterionKD(nn.Module):
    def __init__(self, temperature=1.0):
        super().__init__()
        self.temperature = temperature

    def forward(self, pred, soft):
        B, C, H, W = soft.shape
        p_s = F.log_softmax(pred.permute(0, 2, 3, 1).reshape(-1, C) / self.temperature, dim=1)
        p_t = F.softmax(soft.permute(0, 2, 3, 1).reshape(-1, C) / self.temperature, dim=1)
        return F.kl_div(p_s, p_t, reduction="batchmean") * self.temperature ** 2


class CriterionMiniBatchCrossImagePair(nn.Module):
    def __init__(self, temperature, pooling=False):
        super().__init__()
        self.temperature = temperature
        self.pooling = pooling

    def pair_wise_sim_map(self, fea_0, fea_1):
        C, H, W = fea_0.size()
        fea_0 = fea_0.reshape(C, -1).transpose(0, 1)
        fea_1 = fea_1.reshape(C, -1).transpose(0, 1)
        return torch.mm(fea_0, fea_1.transpose(0, 1))

    def forward(self, feat_S, feat_T):
        B, C, H, W = feat_S.size()
        if self.pooling:
            avg_pool = nn.AvgPool2d(kernel_size=(2, 2), stride=(2, 2), padding=0, ceil_mode=True)
            feat_S = avg_pool(feat_S)
            feat_T = avg_pool(feat_T)
        feat_S = F.normalize(feat_S, p=2, dim=1)
        feat_T = F.normalize(feat_T, p=2, dim=1)
        sim_dis = torch.tensor(0.0)
        for i in range(B):
            for j in range(B):
                s_sim_map = self.pair_wise_sim_map(feat_S[i], feat_S[j])
                t_sim_map = self.pair_wise_sim_map(feat_T[i], feat_T[j])
                p_s = F.log_softmax(s_sim_map / self.temperature, dim=1)
                p_t = F.softmax(t_sim_map / self.temperature, dim=1)
                sim_dis = sim_dis + F.kl_div(p_s, p_t, reduction="batchmean")
        return sim_dis / (B * B)


train_set = SyntheticCityscapes(96, args.crop_size, args.num_classes)
train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)

teacher = SegNet(32, args.num_classes).eval()
for p in teacher.parameters():
    p.requires_grad = False
student = SegNet(16, args.num_classes)
feat_proj = nn.Conv2d(32, 64, 1)

criterion_ce = nn.CrossEntropyLoss()
criterion_kd = CriterionKD()
criterion_minibatch = CriterionMiniBatchCrossImagePair(temperature=args.pixel_memory_temperature)

params = list(student.parameters()) + list(feat_proj.parameters())
optimizer = torch.optim.SGD(params, lr=args.lr, momentum=0.9, weight_decay=1e-4)

print(f"batch size {args.batch_size}, crop {args.crop_size}, {len(train_loader)} iterations per epoch")
iteration = 0
start = time.time()
while iteration < args.max_iterations:
    for images, targets in train_loader:
        iteration += 1
        with torch.no_grad():
            t_logits, t_feat = teacher(images)
        s_logits, s_feat = student(images)
        s_feat = feat_proj(s_feat)
        logits_up = F.interpolate(s_logits, size=targets.shape[-2:], mode="bilinear", align_corners=False)
        task_loss = criterion_ce(logits_up, targets)
        kd_loss = args.lambda_kd * criterion_kd(s_logits, t_logits)
        minibatch_pixel_loss = args.lambda_minibatch_pixel * criterion_minibatch(s_feat, t_feat)
        losses = task_loss + kd_loss + minibatch_pixel_loss
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        if iteration % 4 == 0 or iteration == 1:
            print(f"iter {iteration:3d}  task {task_loss.item():.4f}  kd {kd_loss.item():.4f}  "
                  f"minibatch_pixel {minibatch_pixel_loss.item():.4f}  {time.time() - start:.1f}s")
        if iteration >= args.max_iterations:
            break
print("done")
