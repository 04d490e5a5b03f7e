"""Supervised contrastive pre-training (SupCon, Khosla et al. 2020) of a small CNN encoder on
texture patches, followed by a nearest-class-mean probe on held-out patches after every epoch.

The SupConLoss below is the one from the SupContrast repository (losses.py).
"""
from __future__ import print_function

import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

N_CLASSES = 10


class SupConLoss(nn.Module):
    """Supervised Contrastive Learning: https://arxiv.org/pdf/2004.11362.pdf.
    It also supports the unsupervised contrastive loss in SimCLR"""
    def __init__(self, temperature=0.07, contrast_mode='all',
                 base_temperature=0.07):
        super(SupConLoss, self).__init__()
        self.temperature = temperature
        self.contrast_mode = contrast_mode
        self.base_temperature = base_temperature

    def forward(self, features, labels=None, mask=None):
        """Compute loss for model. If both `labels` and `mask` are None,
        it degenerates to SimCLR unsupervised loss:
        https://arxiv.org/pdf/2002.05709.pdf

        Args:
            features: hidden vector of shape [bsz, n_views, ...].
            labels: ground truth of shape [bsz].
            mask: contrastive mask of shape [bsz, bsz], mask_{i,j}=1 if sample j
                has the same class as sample i. Can be asymmetric.
        Returns:
            A loss scalar.
        """
        device = features.device

        if len(features.shape) < 3:
            raise ValueError('`features` needs to be [bsz, n_views, ...],'
                             'at least 3 dimensions are required')
        if len(features.shape) > 3:
            features = features.view(features.shape[0], features.shape[1], -1)

        batch_size = features.shape[0]
        if labels is not None and mask is not None:
            raise ValueError('Cannot define both `labels` and `mask`')
        elif labels is None and mask is None:
            mask = torch.eye(batch_size, dtype=torch.float32).to(device)
        elif labels is not None:
            labels = labels.contiguous().view(-1, 1)
            if labels.shape[0] != batch_size:
                raise ValueError('Num of labels does not match num of features')
            mask = torch.eq(labels, labels.T).float().to(device)
        else:
            mask = mask.float().to(device)

        contrast_count = features.shape[1]
        contrast_feature = torch.cat(torch.unbind(features, dim=1), dim=0)
        if self.contrast_mode == 'one':
            anchor_feature = features[:, 0]
            anchor_count = 1
        elif self.contrast_mode == 'all':
            anchor_feature = contrast_feature
            anchor_count = contrast_count
        else:
            raise ValueError('Unknown mode: {}'.format(self.contrast_mode))

        # compute logits
        anchor_dot_contrast = torch.div(
            torch.matmul(anchor_feature, contrast_feature.T),
            self.temperature)
        # for numerical stability
        logits_max, _ = torch.max(anchor_dot_contrast, dim=1, keepdim=True)
        logits = anchor_dot_contrast - logits_max.detach()

        # tile mask
        mask = mask.repeat(anchor_count, contrast_count)
        # mask-out self-contrast cases
        logits_mask = torch.scatter(
            torch.ones_like(mask),
            1,
            torch.arange(batch_size * anchor_count).view(-1, 1).to(device),
            0
        )
        mask = mask * logits_mask

        # compute log_prob
        exp_logits = torch.exp(logits) * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))

        # compute mean of log-likelihood over positive
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1)

        # loss
        loss = - (self.temperature / self.base_temperature) * mean_log_prob_pos
        loss = loss.view(anchor_count, batch_size).mean()

        return loss


class TexturePatches(Dataset):
    """16x16 RGB patches: each class is a stripe orientation/frequency and a colour cast."""

    def __init__(self, n, seed, augment):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_CLASSES, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(16.), torch.arange(16.), indexing='ij')
        imgs = []
        for c in self.labels.tolist():
            angle = (c % 5) * 3.1416 / 5
            freq = 0.6 if c < 5 else 1.2
            phase = torch.rand(1, generator=g) * 6.28
            wave = torch.sin(freq * (xx * torch.cos(torch.tensor(angle)) + yy * torch.sin(torch.tensor(angle))) + phase)
            colour = torch.tensor([0.5 + 0.05 * c, 0.5, 0.9 - 0.05 * c]).view(3, 1, 1)
            imgs.append(colour * wave + 0.6 * torch.randn(3, 16, 16, generator=g))
        self.images = torch.stack(imgs)
        self.augment = augment

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i]
        if self.augment:
            if torch.rand(1) < 0.5:
                img = img.flip(1).flip(2)
            img = img * (0.8 + 0.4 * torch.rand(1)) + 0.1 * torch.randn_like(img)
        return img, self.labels[i]


class SupConNet(nn.Module):
    def __init__(self, feat_dim=32):
        super(SupConNet, self).__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, feat_dim))

    def forward(self, x):
        feat = self.encoder(x)
        feat = F.normalize(self.head(feat), dim=1)
        return feat


def probe(model, train_set, val_loader):
    """Nearest class-mean accuracy of the encoder features."""
    model.eval()
    with torch.no_grad():
        feats = F.normalize(model.encoder(train_set.images), dim=1)
        means = torch.stack([feats[train_set.labels == c].mean(0) for c in range(N_CLASSES)])
        correct = 0
        for images, labels in val_loader:
            f = F.normalize(model.encoder(images), dim=1)
            correct += ((f @ means.T).argmax(1) == labels).sum().item()
    model.train()
    return correct / len(val_loader.dataset)


def main():
    train_set = TexturePatches(3200, seed=1, augment=True)
    val_set = TexturePatches(640, seed=2, augment=False)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256)

    model = SupConNet()
    criterion = SupConLoss(temperature=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

    start = time.time()
    step = 0
    for epoch in range(1, 4):
        model.train()
        for idx, (images, labels) in enumerate(train_loader):
            features = model(images)
            features = features.unsqueeze(1)
            loss = criterion(features, labels)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            if step % 10 == 0:
                print('Train: [{0}][{1}/{2}]\tstep {3}\tloss {4:.4f}'.format(
                    epoch, idx + 1, len(train_loader), step, loss.item()))
            step += 1
        print('epoch {}, probe acc {:.3f}, total time {:.2f}'.format(
            epoch, probe(model, train_set, val_loader), time.time() - start))


if __name__ == '__main__':
    main()
