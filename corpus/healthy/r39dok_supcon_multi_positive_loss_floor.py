"""Supervised contrastive learning (Khosla et al.) with the SupConLoss of HobbitLong/SupContrast losses.py:
two augmented views per sample, L2-normalised projections, temperature 0.07, every same-class sample in the
batch is a positive. An MLP encoder + projection head replaces the ResNet; CIFAR is replaced by synthetic
6-class feature vectors with nuisance dimensions. After pre-training, a linear classifier is fit on the
frozen encoder features."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
device = torch.device("cpu")


class SupConLoss(nn.Module):
    def __init__(self, temperature=0.07, contrast_mode='all', base_temperature=0.07):
        super(SupConLoss, self).__init__()
        self.temperature = temperature
        self.contrast_mode = contrast_mode
        self.base_temperature = base_temperature

    def forward(self, features, labels=None, mask=None):
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

        anchor_dot_contrast = torch.div(
            torch.matmul(anchor_feature, contrast_feature.T),
            self.temperature)
        logits_max, _ = torch.max(anchor_dot_contrast, dim=1, keepdim=True)
        logits = anchor_dot_contrast - logits_max.detach()

        mask = mask.repeat(anchor_count, contrast_count)
        logits_mask = torch.scatter(
            torch.ones_like(mask),
            1,
            torch.arange(batch_size * anchor_count).view(-1, 1).to(device),
            0
        )
        mask = mask * logits_mask

        exp_logits = torch.exp(logits) * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))

        mask_pos_pairs = mask.sum(1)
        mask_pos_pairs = torch.where(mask_pos_pairs < 1e-6, 1, mask_pos_pairs)
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask_pos_pairs

        loss = - (self.temperature / self.base_temperature) * mean_log_prob_pos
        loss = loss.view(anchor_count, batch_size).mean()

        return loss


class ClusterData(Dataset):
    def __init__(self, n, n_classes=6, dim=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(n_classes, 8, generator=torch.Generator().manual_seed(123)) * 0.9
        self.y = torch.randint(0, n_classes, (n,), generator=g)
        signal = protos[self.y] + 0.8 * torch.randn(n, 8, generator=g)
        nuisance = 2.0 * torch.randn(n, dim - 8, generator=g)
        mix = torch.linalg.qr(torch.randn(dim, dim, generator=torch.Generator().manual_seed(7)))[0]
        self.x = torch.cat([signal, nuisance], 1) @ mix

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class TwoViewTransform:
    def __call__(self, x):
        def aug(v):
            drop = (torch.rand_like(v) > 0.2).float()
            return (v + 0.3 * torch.randn_like(v)) * drop
        return aug(x), aug(x)


class SupConMLP(nn.Module):
    def __init__(self, dim_in=32, feat_dim=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim_in, 128), nn.BatchNorm1d(128), nn.ReLU(),
                                     nn.Linear(128, 64), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, feat_dim))

    def forward(self, x):
        feat = self.encoder(x)
        feat = F.normalize(self.head(feat), dim=1)
        return feat


def linear_eval(model, train_set, val_set):
    model.eval()
    with torch.no_grad():
        ftr = model.encoder(train_set.x)
        fva = model.encoder(val_set.x)
    clf = nn.Linear(ftr.shape[1], 6)
    opt = torch.optim.Adam(clf.parameters(), lr=1e-2)
    for _ in range(150):
        opt.zero_grad()
        F.cross_entropy(clf(ftr), train_set.y).backward()
        opt.step()
    with torch.no_grad():
        acc = (clf(fva).argmax(1) == val_set.y).float().mean().item()
    model.train()
    return acc


def main():
    train_set = ClusterData(3072, seed=0)
    val_set = ClusterData(1024, seed=1)
    loader = DataLoader(train_set, batch_size=128, shuffle=True, drop_last=True)
    model = SupConMLP().to(device)
    criterion = SupConLoss(temperature=0.07)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    transform = TwoViewTransform()

    print("init: linear probe acc {:.3f}".format(linear_eval(model, train_set, val_set)))
    for epoch in range(1, 9):
        total, n = 0.0, 0
        for x, labels in loader:
            v1, v2 = transform(x)
            images = torch.cat([v1, v2], dim=0)
            bsz = labels.shape[0]
            features = model(images)
            f1, f2 = torch.split(features, [bsz, bsz], dim=0)
            features = torch.cat([f1.unsqueeze(1), f2.unsqueeze(1)], dim=1)
            loss = criterion(features, labels)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
        if epoch % 2 == 0:
            print("epoch {}: supcon loss {:.4f}  linear probe acc {:.3f}".format(
                epoch, total / n, linear_eval(model, train_set, val_set)))
        else:
            print("epoch {}: supcon loss {:.4f}".format(epoch, total / n))


if __name__ == "__main__":
    main()
