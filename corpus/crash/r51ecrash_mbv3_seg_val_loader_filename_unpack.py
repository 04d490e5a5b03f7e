"""MobileNetV3-small segmentation (LR-ASPP style head) trained on Cityscapes-like
street scenes, following Tramac/mobilenetv3-segmentation: Trainer with SGD,
WarmupPolyLR, SegmentationMetric, validation every epoch that also saves the
predicted masks next to the checkpoint.

Offline stand-in for the Cityscapes folders: 64x64 synthetic scenes (sky, road,
buildings, cars) with per-pixel labels."""
import argparse
import os
import tempfile
import time
import datetime

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data as data


def parse_args():
    parser = argparse.ArgumentParser(description='MobileNetV3 for Segmentation Training with Pytorch')
    parser.add_argument('--model', type=str, default='mobilenetv3_small')
    parser.add_argument('--dataset', type=str, default='citys')
    parser.add_argument('--crop-size', type=int, default=64)
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--lr', type=float, default=0.04)
    parser.add_argument('--momentum', type=float, default=0.9)
    parser.add_argument('--weight-decay', type=float, default=1e-4)
    parser.add_argument('--save-dir', default=os.path.join(tempfile.gettempdir(), 'mbv3_seg_runs'))
    parser.add_argument('--log-iter', type=int, default=5)
    parser.add_argument('--val-epoch', type=int, default=1)
    args = parser.parse_args()
    args.lr = args.lr / 4 * args.batch_size
    return args


class CitySegmentation(data.Dataset):
    NUM_CLASS = 4

    def __init__(self, split='train', mode=None, crop_size=64):
        self.split = split
        self.mode = mode if mode is not None else split
        self.crop_size = crop_size
        n = 240 if split == 'train' else 40
        self.images = ['{}/frame_{:05d}_leftImg8bit.png'.format(split, i) for i in range(n)]
        self.seed = 0 if split == 'train' else 1

    def _render(self, index):
        g = torch.Generator().manual_seed(self.seed * 100003 + index)
        s = self.crop_size
        mask = torch.zeros(s, s, dtype=torch.long)
        horizon = int(torch.randint(s // 4, s // 2, (1,), generator=g))
        mask[horizon:] = 1
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            x0 = int(torch.randint(0, s - 12, (1,), generator=g))
            w = int(torch.randint(6, 14, (1,), generator=g))
            h = int(torch.randint(8, horizon + 4, (1,), generator=g))
            mask[max(0, horizon + 4 - h):horizon + 4, x0:x0 + w] = 2
        for _ in range(int(torch.randint(0, 3, (1,), generator=g))):
            y0 = int(torch.randint(horizon + 2, s - 6, (1,), generator=g))
            x0 = int(torch.randint(0, s - 10, (1,), generator=g))
            mask[y0:y0 + 5, x0:x0 + 9] = 3
        palette = torch.tensor([[0.45, 0.65, 0.95], [0.35, 0.35, 0.38], [0.7, 0.55, 0.45], [0.85, 0.1, 0.1]])
        img = palette[mask].permute(2, 0, 1) + 0.08 * torch.randn(3, s, s, generator=g)
        return img, mask

    def _normalize(self, img):
        mean = torch.tensor([.485, .456, .406]).view(3, 1, 1)
        std = torch.tensor([.229, .224, .225]).view(3, 1, 1)
        return (img - mean) / std

    def __getitem__(self, index):
        img, mask = self._render(index)
        if self.mode == 'train':
            if torch.rand(1).item() < 0.5:
                img, mask = img.flip(-1), mask.flip(-1)
        img = self._normalize(img)
        if self.mode == 'testval':
            return img, mask, os.path.basename(self.images[index])
        return img, mask

    def __len__(self):
        return len(self.images)

    @property
    def num_class(self):
        return self.NUM_CLASS


class Hswish(nn.Module):
    def forward(self, x):
        return x * F.relu6(x + 3.) / 6.


class SEModule(nn.Module):
    def __init__(self, in_channels, reduction=4):
        super(SEModule, self).__init__()
        self.fc = nn.Sequential(
            nn.Linear(in_channels, in_channels // reduction, bias=False),
            nn.ReLU(True),
            nn.Linear(in_channels // reduction, in_channels, bias=False),
            nn.Hardsigmoid(True))

    def forward(self, x):
        n, c, _, _ = x.size()
        out = F.adaptive_avg_pool2d(x, 1).view(n, c)
        out = self.fc(out).view(n, c, 1, 1)
        return x * out.expand_as(x)


class Bottleneck(nn.Module):
    def __init__(self, in_channels, out_channels, exp_size, kernel_size, stride, se=False, nl='RE'):
        super(Bottleneck, self).__init__()
        self.use_res_connect = stride == 1 and in_channels == out_channels
        act = nn.ReLU if nl == 'RE' else Hswish
        layers = [nn.Conv2d(in_channels, exp_size, 1, bias=False), nn.BatchNorm2d(exp_size), act(),
                  nn.Conv2d(exp_size, exp_size, kernel_size, stride, kernel_size // 2, groups=exp_size, bias=False),
                  nn.BatchNorm2d(exp_size)]
        if se:
            layers.append(SEModule(exp_size))
        layers += [act(), nn.Conv2d(exp_size, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV3Seg(nn.Module):
    def __init__(self, nclass, width=16):
        super(MobileNetV3Seg, self).__init__()
        self.first = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), Hswish())
        self.layer1 = nn.Sequential(Bottleneck(16, 16, 16, 3, 2, True, 'RE'))
        self.layer2 = nn.Sequential(Bottleneck(16, 24, 72, 3, 2, False, 'RE'),
                                    Bottleneck(24, 24, 88, 3, 1, False, 'RE'))
        self.layer3 = nn.Sequential(Bottleneck(24, 40, 96, 5, 1, True, 'HS'),
                                    Bottleneck(40, 48, 120, 5, 1, True, 'HS'))
        self.head_b0 = nn.Sequential(nn.Conv2d(48, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(True))
        self.head_b1 = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(48, 64, 1, bias=False), nn.Sigmoid())
        self.project = nn.Conv2d(64, nclass, 1)
        self.low_classifier = nn.Conv2d(16, nclass, 1)

    def forward(self, x):
        size = x.size()[2:]
        c1 = self.layer1(self.first(x))
        c4 = self.layer3(self.layer2(c1))
        feat = self.head_b0(c4) * self.head_b1(c4)
        feat = F.interpolate(feat, c1.size()[2:], mode='bilinear', align_corners=True)
        out = self.project(feat) + self.low_classifier(c1)
        out = F.interpolate(out, size, mode='bilinear', align_corners=True)
        return tuple([out])


class MixSoftmaxCrossEntropyLoss(nn.CrossEntropyLoss):
    def __init__(self, ignore_index=-1, **kwargs):
        super(MixSoftmaxCrossEntropyLoss, self).__init__(ignore_index=ignore_index)

    def forward(self, *inputs, **kwargs):
        preds, target = tuple(inputs)
        return dict(loss=super(MixSoftmaxCrossEntropyLoss, self).forward(preds[0], target))


class WarmupPolyLR(torch.optim.lr_scheduler._LRScheduler):
    def __init__(self, optimizer, max_iters, power=0.9, last_epoch=-1):
        self.max_iters = max_iters
        self.power = power
        super(WarmupPolyLR, self).__init__(optimizer, last_epoch)

    def get_lr(self):
        factor = pow(1 - self.last_epoch / self.max_iters, self.power)
        return [base_lr * factor for base_lr in self.base_lrs]


class SegmentationMetric(object):
    def __init__(self, nclass):
        self.nclass = nclass
        self.reset()

    def update(self, preds, labels):
        predict = torch.argmax(preds, 1)
        self.total_correct += (predict == labels).sum().item()
        self.total_label += labels.numel()
        for c in range(self.nclass):
            p, t = predict == c, labels == c
            self.total_inter[c] += (p & t).sum().item()
            self.total_union[c] += (p | t).sum().item()

    def get(self):
        pixAcc = self.total_correct / max(self.total_label, 1)
        IoU = self.total_inter / np.maximum(self.total_union, 1)
        return pixAcc, IoU.mean()

    def reset(self):
        self.total_inter = np.zeros(self.nclass)
        self.total_union = np.zeros(self.nclass)
        self.total_correct = 0
        self.total_label = 0


class Trainer(object):
    def __init__(self, args):
        self.args = args
        self.device = torch.device('cpu')

        trainset = CitySegmentation(split='train', mode='train', crop_size=args.crop_size)
        args.iters_per_epoch = len(trainset) // args.batch_size
        args.max_iters = args.epochs * args.iters_per_epoch
        self.train_loader = data.DataLoader(dataset=trainset, batch_size=args.batch_size,
                                            shuffle=True, drop_last=True)

        valset = CitySegmentation(split='val', mode='val', crop_size=args.crop_size)
        self.val_loader = data.DataLoader(dataset=valset, batch_size=1, shuffle=False)

        self.model = MobileNetV3Seg(trainset.num_class).to(self.device)
        self.criterion = MixSoftmaxCrossEntropyLoss(ignore_index=-1).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=args.momentum,
                                         weight_decay=args.weight_decay)
        self.lr_scheduler = WarmupPolyLR(self.optimizer, max_iters=args.max_iters, power=0.9)
        self.metric = SegmentationMetric(trainset.num_class)
        self.best_pred = 0.0

    def train(self):
        epochs, max_iters = self.args.epochs, self.args.max_iters
        log_per_iters, val_per_iters = self.args.log_iter, self.args.val_epoch * self.args.iters_per_epoch
        start_time = time.time()
        print('Start training, Total Epochs: {:d} = Total Iterations {:d}'.format(epochs, max_iters))

        iteration = 0
        self.model.train()
        for epoch in range(epochs):
            for images, targets in self.train_loader:
                iteration += 1
                images = images.to(self.device)
                targets = targets.to(self.device)

                outputs = self.model(images)
                loss_dict = self.criterion(outputs, targets)
                losses = sum(loss for loss in loss_dict.values())

                self.optimizer.zero_grad()
                losses.backward()
                self.optimizer.step()
                self.lr_scheduler.step()

                if iteration % log_per_iters == 0:
                    print("Iters: {:d}/{:d} || Lr: {:.6f} || Loss: {:.4f} || Cost Time: {}".format(
                        iteration, max_iters, self.optimizer.param_groups[0]['lr'], losses.item(),
                        str(datetime.timedelta(seconds=int(time.time() - start_time)))))

                if iteration % val_per_iters == 0:
                    self.validation()
                    self.model.train()

    def validation(self):
        is_best = False
        self.metric.reset()
        model = self.model
        model.eval()
        outdir = os.path.join(os.path.expanduser(self.args.save_dir), 'val_masks')
        os.makedirs(outdir, exist_ok=True)
        for i, (image, target, filename) in enumerate(self.val_loader):
            image = image.to(self.device)
            target = target.to(self.device)

            with torch.no_grad():
                outputs = model(image)
            self.metric.update(outputs[0], target)
            pixAcc, mIoU = self.metric.get()

            predict = torch.argmax(outputs[0], 1).squeeze(0).numpy().astype('uint8')
            np.save(os.path.join(outdir, os.path.splitext(filename[0])[0] + '.npy'), predict)
        print("Validation pixAcc: {:.3f}, mIoU: {:.3f}".format(pixAcc, mIoU))

        new_pred = (pixAcc + mIoU) / 2
        if new_pred > self.best_pred:
            is_best = True
            self.best_pred = new_pred
        save_checkpoint(self.model, self.args, is_best)


def save_checkpoint(model, args, is_best=False):
    directory = os.path.expanduser(args.save_dir)
    os.makedirs(directory, exist_ok=True)
    filename = os.path.join(directory, '{}_{}.pth'.format(args.model, args.dataset))
    torch.save(model.state_dict(), filename)
    if is_best:
        torch.save(model.state_dict(), os.path.join(directory, '{}_{}_best_model.pth'.format(args.model, args.dataset)))


if __name__ == '__main__':
    torch.manual_seed(0)
    np.random.seed(0)
    args = parse_args()
    print(args)
    trainer = Trainer(args)
    trainer.train()
