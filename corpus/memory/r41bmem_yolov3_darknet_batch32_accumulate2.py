"""YOLOv3-style detector training in the ultralytics train.py layout: a small Darknet
backbone (conv/BatchNorm/LeakyReLU with residual blocks), one YOLO output layer with
three anchors, SGD with momentum, gradient accumulation over `--accumulate` batches.

Offline stand-in for the COCO-format image folder: 256x256 images with one to three
coloured boxes (2 classes) on a noisy background, labels as normalised xywh."""
import argparse
import math
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

hyp = {'xy': 0.2,  # xy loss gain
       'wh': 0.1,  # wh loss gain
       'cls': 0.04,  # cls loss gain
       'conf': 1.6,  # conf loss gain
       'lr0': 0.01,  # initial learning rate
       'momentum': 0.9,  # SGD momentum
       'weight_decay': 0.0005}  # optimizer weight decay

ANCHORS = [(1.5, 1.5), (3.0, 1.6), (1.6, 3.0)]  # in grid cells
NC = 2


class LoadImagesAndLabels(Dataset):
    def __init__(self, n, img_size, seed=0):
        self.n, self.img_size, self.seed = n, img_size, seed

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(self.seed * 100003 + index)
        s = self.img_size
        img = 0.35 + 0.1 * torch.rand(3, s, s, generator=g)
        labels = []
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            cls = int(torch.randint(0, NC, (1,), generator=g))
            w, h = [int(v) for v in torch.randint(s // 10, s // 4, (2,), generator=g)]
            x0 = int(torch.randint(0, s - w, (1,), generator=g))
            y0 = int(torch.randint(0, s - h, (1,), generator=g))
            img[cls * 2, y0:y0 + h, x0:x0 + w] = 0.9
            img[1, y0:y0 + h, x0:x0 + w] = 0.2
            labels.append([cls, (x0 + w / 2) / s, (y0 + h / 2) / s, w / s, h / s])
        return img, torch.tensor(labels)

    @staticmethod
    def collate_fn(batch):
        imgs, labels = zip(*batch)
        targets = [torch.cat([torch.full((len(l), 1), float(i)), l], 1) for i, l in enumerate(labels)]
        return torch.stack(imgs, 0), torch.cat(targets, 0)


def conv_bn_leaky(c1, c2, k=3, s=1):
    return nn.Sequential(nn.Conv2d(c1, c2, k, s, k // 2, bias=False), nn.BatchNorm2d(c2, momentum=0.1),
                         nn.LeakyReLU(0.1, inplace=True))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.cv1 = conv_bn_leaky(c, c // 2, 1)
        self.cv2 = conv_bn_leaky(c // 2, c, 3)

    def forward(self, x):
        return x + self.cv2(self.cv1(x))


class Darknet(nn.Module):
    def __init__(self, nc=NC, na=len(ANCHORS)):
        super().__init__()
        self.na, self.no = na, nc + 5
        self.module_list = nn.Sequential(
            conv_bn_leaky(3, 8), conv_bn_leaky(8, 16, s=2), Residual(16),
            conv_bn_leaky(16, 32, s=2), Residual(32),
            conv_bn_leaky(32, 64, s=2), Residual(64),
            conv_bn_leaky(64, 128, s=2), Residual(128),
            nn.Conv2d(128, na * self.no, 1))

    def forward(self, x):
        p = self.module_list(x)
        bs, _, ny, nx = p.shape
        return p.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()


def compute_loss(p, targets):
    bs, na, ny, nx, no = p.shape
    anchors = torch.tensor(ANCHORS)
    # build targets
    gxy = targets[:, 2:4] * torch.tensor([nx, ny])
    gwh = targets[:, 4:6] * torch.tensor([nx, ny])
    inter = torch.min(gwh[:, None], anchors[None]).prod(2)
    iou = inter / (gwh.prod(1)[:, None] + anchors.prod(1)[None] - inter)
    a = iou.argmax(1)
    b = targets[:, 0].long()
    gi, gj = gxy[:, 0].long().clamp(0, nx - 1), gxy[:, 1].long().clamp(0, ny - 1)
    tconf = torch.zeros(bs, na, ny, nx)
    tconf[b, a, gj, gi] = 1.0
    ps = p[b, a, gj, gi]
    bce = nn.BCEWithLogitsLoss()
    lxy = bce(ps[:, 0:2], gxy - gxy.floor())
    lwh = nn.functional.mse_loss(ps[:, 2:4], torch.log(gwh / anchors[a]))
    tcls = nn.functional.one_hot(targets[:, 1].long(), NC).float()
    lcls = bce(ps[:, 5:], tcls)
    lconf = bce(p[..., 4], tconf)
    lxy, lwh, lcls, lconf = hyp['xy'] * lxy, hyp['wh'] * lwh, hyp['cls'] * lcls, hyp['conf'] * lconf
    loss = lxy + lwh + lconf + lcls
    return loss, torch.stack((lxy, lwh, lconf, lcls, loss)).detach()


def train(img_size=256, epochs=3, batch_size=32, accumulate=2):
    torch.manual_seed(0)
    model = Darknet()
    optimizer = torch.optim.SGD(model.parameters(), lr=hyp['lr0'], momentum=hyp['momentum'],
                                weight_decay=hyp['weight_decay'], nesterov=True)
    dataset = LoadImagesAndLabels(64, img_size)
    dataloader = DataLoader(dataset, batch_size=batch_size, shuffle=True, collate_fn=dataset.collate_fn)
    nb = len(dataloader)
    t0 = time.time()
    for epoch in range(epochs):
        model.train()
        print(('\n%8s%12s' + '%10s' * 7) % ('Epoch', 'Batch', 'xy', 'wh', 'conf', 'cls', 'total', 'targets', 'time'))
        mloss = torch.zeros(5)
        for i, (imgs, targets) in enumerate(dataloader):
            # Run model
            pred = model(imgs)

            # Compute loss
            loss, loss_items = compute_loss(pred, targets)
            if not torch.isfinite(loss):
                print('WARNING: non-finite loss, ending training ', loss_items)
                return
            loss *= batch_size / 64  # scale loss

            # Compute gradient
            loss.backward()

            # Accumulate gradient for x batches before optimizing
            if (i + 1) % accumulate == 0 or (i + 1) == nb:
                optimizer.step()
                optimizer.zero_grad()

            # Print batch results
            mloss = (mloss * i + loss_items) / (i + 1)  # update mean losses
            s = ('%8s%12s' + '%10.3g' * 7) % ('%g/%g' % (epoch, epochs - 1), '%g/%g' % (i, nb - 1), *mloss,
                                              len(targets), time.time() - t0)
            print(s)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--epochs', type=int, default=3, help='number of epochs')
    parser.add_argument('--batch-size', type=int, default=32, help='batch size')
    parser.add_argument('--accumulate', type=int, default=2, help='number of batches to accumulate before optimizing')
    parser.add_argument('--img-size', type=int, default=256, help='train image size (pixels)')
    opt = parser.parse_args()
    print(opt)
    train(img_size=opt.img_size, epochs=opt.epochs, batch_size=opt.batch_size, accumulate=opt.accumulate)
