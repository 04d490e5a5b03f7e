"""Semi-supervised breast-ultrasound lesion segmentation (MGCC-style): a small U-Net with
three auxiliary decoders, supervised BCE-Dice on the labeled half of each batch and a
multi-level consistency loss on the unlabeled half, SGD with a poly learning rate."""
import argparse
import itertools
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset, Sampler


def seed_torch(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


seed_torch(41)

parser = argparse.ArgumentParser()
parser.add_argument('--semi_percent', type=float, default=0.5)
parser.add_argument('--max_iterations', type=int, default=200)
parser.add_argument('--total_batch_size', type=int, default=8)
parser.add_argument('--labeled_bs', type=int, default=4)
parser.add_argument('--base_lr', type=float, default=0.01)
parser.add_argument('--consistency', type=float, default=7)
parser.add_argument('--consistency_rampup', type=float, default=200.0)
args = parser.parse_args()


class SemiDataSets(Dataset):
    """Synthetic speckled ultrasound frames with one dark elliptical lesion."""

    def __init__(self, n, size=48, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing='ij')
        self.images, self.labels = [], []
        for _ in range(n):
            cy, cx = (torch.rand(2, generator=g) - 0.5).tolist()
            ry, rx = (0.2 + 0.3 * torch.rand(2, generator=g)).tolist()
            mask = (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1).float()
            speckle = torch.rand(size, size, generator=g)
            img = 0.6 * speckle + 0.4 - 0.5 * mask
            self.images.append(img[None])
            self.labels.append(mask[None])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return {'image': self.images[idx], 'label': self.labels[idx]}


def iterate_once(iterable):
    return np.random.permutation(iterable)


def iterate_eternally(indices):
    def infinite_shuffles():
        while True:
            yield np.random.permutation(indices)
    return itertools.chain.from_iterable(infinite_shuffles())


def grouper(iterable, n):
    args_ = [iter(iterable)] * n
    return zip(*args_)


class TwoStreamBatchSampler(Sampler):
    def __init__(self, primary_indices, secondary_indices, batch_size, secondary_batch_size):
        self.primary_indices = primary_indices
        self.secondary_indices = secondary_indices
        self.secondary_batch_size = secondary_batch_size
        self.primary_batch_size = batch_size - secondary_batch_size

    def __iter__(self):
        primary_iter = iterate_once(self.primary_indices)
        secondary_iter = iterate_eternally(self.secondary_indices)
        return (
            [int(i) for i in primary_batch + secondary_batch]
            for (primary_batch, secondary_batch) in zip(
                grouper(primary_iter, self.primary_batch_size),
                grouper(secondary_iter, self.secondary_batch_size))
        )

    def __len__(self):
        return len(self.primary_indices) // self.primary_batch_size


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class MGCC(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.enc1 = block(1, c)
        self.enc2 = block(c, 2 * c)
        self.enc3 = block(2 * c, 4 * c)
        self.dec2 = block(4 * c + 2 * c, 2 * c)
        self.dec1 = block(2 * c + c, c)
        self.out = nn.Conv2d(c, 1, 1)
        self.aux1 = nn.Conv2d(4 * c, 1, 1)
        self.aux2 = nn.Conv2d(2 * c, 1, 1)
        self.aux3 = nn.Conv2d(c, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(e3, scale_factor=2.0), e2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2.0), e1], 1))
        out = self.out(d1)
        if not self.training:
            return out
        size = x.shape[-2:]
        aux1 = F.interpolate(self.aux1(e3), size=size, mode='bilinear', align_corners=False)
        aux2 = F.interpolate(self.aux2(F.dropout2d(d2, 0.3)), size=size, mode='bilinear', align_corners=False)
        aux3 = self.aux3(F.dropout2d(d1, 0.5))
        return out, aux1, aux2, aux3


class BCEDiceLoss(nn.Module):
    def forward(self, input, target):
        bce = F.binary_cross_entropy_with_logits(input, target)
        smooth = 1e-5
        input = torch.sigmoid(input)
        num = target.size(0)
        input = input.view(num, -1)
        target = target.view(num, -1)
        intersection = (input * target)
        dice = (2. * intersection.sum(1) + smooth) / (input.sum(1) + target.sum(1) + smooth)
        dice = 1 - dice.sum() / num
        return 0.5 * bce + dice


def iou_score(output, target):
    output = torch.sigmoid(output).detach() > 0.5
    target = target > 0.5
    inter = (output & target).sum().item()
    union = (output | target).sum().item()
    return (inter + 1e-5) / (union + 1e-5)


def sigmoid_rampup(current, rampup_length):
    if rampup_length == 0:
        return 1.0
    current = np.clip(current, 0.0, rampup_length)
    phase = 1.0 - current / rampup_length
    return float(np.exp(-5.0 * phase * phase))


def get_current_consistency_weight(epoch):
    return args.consistency * sigmoid_rampup(epoch, args.consistency_rampup)


def getDataloader(args):
    db_train = SemiDataSets(64, seed=0)
    db_val = SemiDataSets(16, seed=1)
    total_slices = len(db_train)
    labeled_idxs = list(range(0, int(args.semi_percent * total_slices)))
    unlabeled_idxs = list(range(int(args.semi_percent * total_slices), total_slices))
    print("label num:{}, unlabel num:{} percent:{}".format(len(labeled_idxs), len(unlabeled_idxs), args.semi_percent))
    batch_sampler = TwoStreamBatchSampler(labeled_idxs, unlabeled_idxs, args.total_batch_size, args.labeled_bs)
    trainloader = DataLoader(db_train, batch_sampler=batch_sampler)
    valloader = DataLoader(db_val, batch_size=1, shuffle=False)
    return trainloader, valloader


def train(args):
    base_lr = args.base_lr
    max_iterations = int(args.max_iterations * args.semi_percent)
    trainloader, valloader = getDataloader(args)
    model = MGCC()
    optimizer = optim.SGD(model.parameters(), lr=base_lr, momentum=0.9, weight_decay=0.0001)
    criterion = BCEDiceLoss()

    print("{} iterations per epoch".format(len(trainloader)))
    best_iou = 0
    iter_num = 0
    max_epoch = max_iterations // len(trainloader) + 1

    for epoch_num in range(max_epoch):
        meters = {'total_loss': [], 'supervised_loss': [], 'consistency_loss': [], 'train_iou': []}
        model.train()
        for i_batch, sampled_batch in enumerate(trainloader):
            volume_batch, label_batch = sampled_batch['image'], sampled_batch['label']
            outputs, outputs_aux1, outputs_aux2, outputs_aux3 = model(volume_batch)
            outputs_soft = torch.sigmoid(outputs)
            outputs_aux1_soft = torch.sigmoid(outputs_aux1)
            outputs_aux2_soft = torch.sigmoid(outputs_aux2)
            outputs_aux3_soft = torch.sigmoid(outputs_aux3)

            loss_ce = criterion(outputs[:args.labeled_bs], label_batch[:args.labeled_bs])
            loss_ce_aux1 = criterion(outputs_aux1[:args.labeled_bs], label_batch[:args.labeled_bs])
            loss_ce_aux2 = criterion(outputs_aux2[:args.labeled_bs], label_batch[:args.labeled_bs])
            loss_ce_aux3 = criterion(outputs_aux3[:args.labeled_bs], label_batch[:args.labeled_bs])
            supervised_loss = (loss_ce + loss_ce_aux1 + loss_ce_aux2 + loss_ce_aux3) / 4

            consistency_weight = get_current_consistency_weight(iter_num // 150)
            consistency_loss_aux1 = torch.mean((outputs_soft[args.labeled_bs:] - outputs_aux1_soft[args.labeled_bs:]) ** 2)
            consistency_loss_aux2 = torch.mean((outputs_soft[args.labeled_bs:] - outputs_aux2_soft[args.labeled_bs:]) ** 2)
            consistency_loss_aux3 = torch.mean((outputs_soft[args.labeled_bs:] - outputs_aux3_soft[args.labeled_bs:]) ** 2)
            consistency_loss = (consistency_loss_aux1 + consistency_loss_aux2 + consistency_loss_aux3) / 3
            loss = supervised_loss + consistency_weight * consistency_loss
            iou = iou_score(outputs[:args.labeled_bs], label_batch[:args.labeled_bs])

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            lr_ = base_lr * (1.0 - iter_num / max_iterations) ** 0.9
            for param_group in optimizer.param_groups:
                param_group['lr'] = lr_

            iter_num = iter_num + 1

            meters['total_loss'].append(loss.item())
            meters['supervised_loss'].append(supervised_loss.item())
            meters['consistency_loss'].append(consistency_loss.item())
            meters['train_iou'].append(iou)

        model.eval()
        val_loss, val_iou = [], []
        with torch.no_grad():
            for sampled_batch in valloader:
                output = model(sampled_batch['image'])
                val_loss.append(criterion(output, sampled_batch['label']).item())
                val_iou.append(iou_score(output, sampled_batch['label']))

        print('epoch [%3d/%d] iter %d  train_loss %.4f supervised_loss %.4f consistency_loss %.4f train_iou: %.4f '
              '- val_loss %.4f - val_iou %.4f'
              % (epoch_num, max_epoch, iter_num, np.mean(meters['total_loss']), np.mean(meters['supervised_loss']),
                 np.mean(meters['consistency_loss']), np.mean(meters['train_iou']),
                 np.mean(val_loss), np.mean(val_iou)))
        if np.mean(val_iou) > best_iou:
            best_iou = float(np.mean(val_iou))
            print("=> best val_iou %.4f" % best_iou)

    return "Training Finished!"


if __name__ == "__main__":
    print(train(args))
