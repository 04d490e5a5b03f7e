"""Tiny Faces (Hu & Ramanan) detector training in the style of tiny-faces-pytorch on the CPU:
a ResNet trunk cut after layer3, two 1x1 score heads (res3 and res4, 25 templates x
(1 class + 4 box offsets)), a bilinear ConvTranspose2d upsampling of the res4 scores, and the
DetectionCriterion (SoftMarginLoss on the template class maps + SmoothL1 on the box
regression, masked by balanced sampling). Training uses 500x500 crops as in the WIDER FACE
loader. The trunk here is a slim ResNet (no pretrained weights offline) and the crops are
synthetic: bright elliptical "faces" of random sizes on cluttered backgrounds.
"""
import argparse
import time

import numpy as np
import torch
from torch import nn, optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

CROP = 500
STRIDE = 8
NUM_TEMPLATES = 25
TEMPLATE_SIZES = np.geomspace(12, 160, NUM_TEMPLATES)


class WIDERFaceCrops(Dataset):
    def __init__(self, n, seed=0):
        self.n = n
        self.seed = seed
        self.out = (CROP + STRIDE - 1) // STRIDE

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        rng = np.random.RandomState(self.seed + idx)
        img = rng.uniform(0, 0.4, (3, CROP, CROP)).astype(np.float32)
        class_map = -np.ones((NUM_TEMPLATES, self.out, self.out), dtype=np.float32)
        regression_map = np.zeros((4 * NUM_TEMPLATES, self.out, self.out), dtype=np.float32)
        yy, xx = np.mgrid[0:CROP, 0:CROP]
        for _ in range(rng.randint(2, 6)):
            size = rng.uniform(14, 150)
            cy, cx = rng.uniform(size / 2, CROP - size / 2, 2)
            face = ((yy - cy) / (0.6 * size)) ** 2 + ((xx - cx) / (0.45 * size)) ** 2 < 1
            img[:, face] = np.array([0.9, 0.7, 0.6], dtype=np.float32)[:, None]
            t = int(np.argmin(np.abs(TEMPLATE_SIZES - size)))
            gy, gx = int(cy // STRIDE), int(cx // STRIDE)
            class_map[t, gy, gx] = 1
            regression_map[4 * t:4 * t + 4, gy, gx] = [(cx % STRIDE) / STRIDE - 0.5, (cy % STRIDE) / STRIDE - 0.5,
                                                       np.log(size / TEMPLATE_SIZES[t]), np.log(size / TEMPLATE_SIZES[t])]
        img = (img - 0.45) / 0.25
        return torch.from_numpy(img), torch.from_numpy(class_map), torch.from_numpy(regression_map)


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNetTrunk(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(width, width), BasicBlock(width, width))
        self.layer2 = nn.Sequential(BasicBlock(width, 2 * width, 2), BasicBlock(2 * width, 2 * width))
        self.layer3 = nn.Sequential(BasicBlock(2 * width, 4 * width, 2), BasicBlock(4 * width, 4 * width))


class DetectionModel(nn.Module):
    """Hybrid Model from Tiny Faces paper"""

    def __init__(self, num_templates=1, num_objects=1, width=32):
        super().__init__()
        output = (num_objects + 4) * num_templates
        self.model = ResNetTrunk(width)
        self.score_res3 = nn.Conv2d(2 * width, output, kernel_size=1, padding=0)
        self.score_res4 = nn.Conv2d(4 * width, output, kernel_size=1, padding=0)
        self.score4_upsample = nn.ConvTranspose2d(output, output, kernel_size=4, stride=2, padding=1, bias=False)
        self._init_bilinear()

    def _init_bilinear(self):
        k = self.score4_upsample.kernel_size[0]
        factor = np.floor((k + 1) / 2)
        center = factor if k % 2 == 1 else factor + 0.5
        C = np.arange(1, 5)
        f = np.zeros((self.score4_upsample.in_channels, self.score4_upsample.out_channels, k, k))
        for i in range(self.score4_upsample.out_channels):
            f[i, i, :, :] = (np.ones((1, k)) - (np.abs(C - center) / factor)).T @ \
                            (np.ones((1, k)) - (np.abs(C - center) / factor))
        self.score4_upsample.weight = torch.nn.Parameter(data=torch.Tensor(f))

    def learnable_parameters(self, lr):
        return [{'params': self.model.parameters(), 'lr': lr},
                {'params': self.score_res3.parameters(), 'lr': 0.1 * lr},
                {'params': self.score_res4.parameters(), 'lr': 1 * lr},
                {'params': self.score4_upsample.parameters(), 'lr': 0}]

    def forward(self, x):
        x = self.model.maxpool(self.model.relu(self.model.bn1(self.model.conv1(x))))
        x = self.model.layer1(x)
        x = self.model.layer2(x)
        res3 = x
        x = self.model.layer3(x)
        res4 = x
        score_res3 = self.score_res3(res3)
        score4 = self.score4_upsample(self.score_res4(res4))
        score4 = score4[:, :, 0:score_res3.size(2), 0:score_res3.size(3)]
        return score_res3 + score4


class AvgMeter:
    def __init__(self):
        self.average, self.num_averaged = 0, 0

    def update(self, loss, size):
        n, m = self.num_averaged, self.num_averaged + size
        self.average = ((n * self.average) + float(loss)) / m
        self.num_averaged = m


def balance_sampling(label_cls, pos_fraction, sample_size=256):
    pos_maxnum = sample_size * pos_fraction
    pos_idx = np.flatnonzero(label_cls == 1)
    if pos_idx.size > pos_maxnum:
        label_cls.flat[np.random.choice(pos_idx, int(pos_idx.size - pos_maxnum), replace=False)] = 0
    neg_maxnum = pos_maxnum * (1 - pos_fraction) / pos_fraction
    neg_idx = np.flatnonzero(label_cls == -1)
    if neg_idx.size > neg_maxnum:
        label_cls.flat[np.random.choice(neg_idx, int(neg_idx.size - neg_maxnum), replace=False)] = 0
    return label_cls


class DetectionCriterion(nn.Module):
    def __init__(self, n_templates=25, reg_weight=2):
        super().__init__()
        self.regression_criterion = nn.SmoothL1Loss(reduction='none')
        self.classification_criterion = nn.SoftMarginLoss(reduction='none')
        self.n_templates = n_templates
        self.reg_weight = reg_weight
        self.cls_average = AvgMeter()
        self.reg_average = AvgMeter()

    def balance_sample(self, class_map):
        label_cls_np = class_map.cpu().numpy()
        for idx in range(label_cls_np.shape[0]):
            label_cls_np[idx, ...] = balance_sampling(label_cls_np[idx, ...], pos_fraction=0.5)
        return torch.from_numpy(label_cls_np)

    def hard_negative_mining(self, classification, class_map):
        loss_class_map = nn.functional.soft_margin_loss(classification.detach(), class_map, reduction='none')
        class_map[loss_class_map < 0.03] = 0
        return class_map

    def forward(self, output, class_map, regression_map):
        classification = output[:, 0:self.n_templates, :, :]
        regression = output[:, self.n_templates:, :, :]
        class_map = self.hard_negative_mining(classification, class_map)
        class_map = self.balance_sample(class_map)
        cls_mask = (class_map != 0).type(output.dtype)
        masked_cls_loss = cls_mask * self.classification_criterion(classification, class_map)
        reg_mask = (class_map > 0).repeat_interleave(4, dim=1).type(output.dtype)
        masked_reg_loss = reg_mask * self.regression_criterion(regression, regression_map)
        total_loss = masked_cls_loss.sum() + self.reg_weight * masked_reg_loss.sum()
        self.cls_average.update(masked_cls_loss.sum().item(), output.size(0))
        self.reg_average.update(masked_reg_loss.sum().item(), output.size(0))
        return total_loss


def train(model, loss_fn, optimizer, dataloader, epoch, device):
    model = model.train().to(device)
    start = time.time()
    for idx, (img, class_map, regression_map) in enumerate(dataloader):
        x = img.float().to(device)
        optimizer.zero_grad()
        output = model(x)
        loss = loss_fn(output, class_map.float().to(device), regression_map.float().to(device))
        loss.backward()
        optimizer.step()
        print("Epoch: [{0}][{1}/{2}]\tloss_cls: {3:.6f}\tloss_reg: {4:.6f}\t{5:.1f}s".format(
            epoch, idx, len(dataloader), loss_fn.cls_average.average, loss_fn.reg_average.average,
            time.time() - start))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", default=1e-4, type=float)
    parser.add_argument("--weight-decay", default=0.0005, type=float)
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--batch-size", default=12, type=int)
    parser.add_argument("--workers", default=0, type=int)
    parser.add_argument("--epochs", default=1, type=int)
    args = parser.parse_args()

    device = torch.device('cuda:0') if torch.cuda.is_available() else torch.device('cpu')
    train_loader = DataLoader(WIDERFaceCrops(18), batch_size=args.batch_size, shuffle=True,
                              num_workers=args.workers)
    model = DetectionModel(num_objects=1, num_templates=NUM_TEMPLATES)
    loss_fn = DetectionCriterion(NUM_TEMPLATES)
    optimizer = optim.SGD(model.learnable_parameters(args.lr), lr=args.lr,
                          momentum=args.momentum, weight_decay=args.weight_decay)
    for epoch in range(args.epochs):
        train(model, loss_fn, optimizer, train_loader, epoch, device=device)


if __name__ == '__main__':
    main()
