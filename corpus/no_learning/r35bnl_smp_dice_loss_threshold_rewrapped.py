# Binary segmentation of bright blobs with a small encoder-decoder, trained with the
# Dice loss from segmentation_models.pytorch's utils (copied here), extended with a
# `threshold` option so the loss matches the thresholded IoU metric used for validation.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


# ---------------------------------------------------------------- smp utils (functional)
def _threshold(x, threshold=None):
    if threshold is not None:
        return torch.tensor((x > threshold).type(x.dtype), requires_grad=True)
    else:
        return x


def f_score(pr, gt, beta=1, eps=1e-7, threshold=None):
    pr = _threshold(pr, threshold=threshold)
    tp = torch.sum(gt * pr)
    fp = torch.sum(pr) - tp
    fn = torch.sum(gt) - tp
    score = ((1 + beta ** 2) * tp + eps) / ((1 + beta ** 2) * tp + beta ** 2 * fn + fp + eps)
    return score


def iou(pr, gt, eps=1e-7, threshold=None):
    pr = _threshold(pr, threshold=threshold)
    intersection = torch.sum(gt * pr)
    union = torch.sum(gt) + torch.sum(pr) - intersection + eps
    return (intersection + eps) / union


# ---------------------------------------------------------------- smp utils (losses/metrics)
class DiceLoss(nn.Module):
    __name__ = "dice_loss"

    def __init__(self, eps=1.0, beta=1.0, activation=None, threshold=None):
        super().__init__()
        self.eps = eps
        self.beta = beta
        self.activation = torch.sigmoid if activation == "sigmoid" else (lambda x: x)
        self.threshold = threshold

    def forward(self, y_pr, y_gt):
        y_pr = self.activation(y_pr)
        return 1 - f_score(y_pr, y_gt, beta=self.beta, eps=self.eps, threshold=self.threshold)


class IoU(nn.Module):
    __name__ = "iou_score"

    def __init__(self, threshold=0.5):
        super().__init__()
        self.threshold = threshold

    def forward(self, y_pr, y_gt):
        return iou(torch.sigmoid(y_pr), y_gt, threshold=self.threshold)


# ---------------------------------------------------------------- data
class BlobDataset(Dataset):
    def __init__(self, n, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        self.images, self.masks = [], []
        for _ in range(n):
            mask = torch.zeros(size, size)
            for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
                cy, cx = torch.randint(4, size - 4, (2,), generator=g).tolist()
                r = float(torch.randint(3, 8, (1,), generator=g))
                mask[((yy - cy) ** 2 + (xx - cx) ** 2) <= r * r] = 1.0
            img = 0.6 * mask + 0.35 * torch.randn(size, size, generator=g)
            self.images.append(img.unsqueeze(0))
            self.masks.append(mask.unsqueeze(0))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


# ---------------------------------------------------------------- model
def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallUNet(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.enc1 = block(1, ch)
        self.enc2 = block(ch, ch * 2)
        self.mid = block(ch * 2, ch * 2)
        self.dec2 = block(ch * 4, ch)
        self.dec1 = block(ch * 2, ch)
        self.head = nn.Conv2d(ch, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(m, scale_factor=2), e2], 1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2), e1], 1))
        return self.head(d1)


train_loader = DataLoader(BlobDataset(480, seed=1), batch_size=16, shuffle=True)
valid_loader = DataLoader(BlobDataset(96, seed=2), batch_size=32)

model = SmallUNet()
loss_fn = DiceLoss(activation="sigmoid", threshold=0.5)
metric = IoU(threshold=0.5)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(5):
    model.train()
    total, n = 0.0, 0
    for images, masks in train_loader:
        optimizer.zero_grad()
        logits = model(images)
        loss = loss_fn(logits, masks)
        loss.backward()
        optimizer.step()
        total += loss.item() * images.size(0)
        n += images.size(0)

    model.eval()
    with torch.no_grad():
        scores = [metric(model(images), masks).item() for images, masks in valid_loader]
    print(f"epoch {epoch + 1}: train dice_loss {total / n:.4f}  valid iou_score {sum(scores) / len(scores):.4f}")
