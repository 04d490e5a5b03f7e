"""Grid-anchor image cropping (GAIC-style): a small conv backbone scores candidate crops of
each image; trained with smooth L1 against the crops' mean opinion scores."""
import time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

# candidate crops on the 8x8 feature grid: (top, left, bottom, right)
ANCHORS = [(0, 0, 6, 6), (0, 2, 6, 8), (2, 0, 8, 6), (2, 2, 8, 8),
           (1, 1, 7, 7), (0, 0, 8, 5), (0, 3, 8, 8), (0, 0, 5, 8),
           (3, 0, 8, 8), (1, 0, 7, 8), (0, 1, 8, 7), (2, 1, 6, 7)]


class CropDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.images = 0.5 + 0.25 * torch.rand(n, 3, 32, 32, generator=g)
        self.scores = torch.zeros(n, len(ANCHORS))
        for i in range(n):
            cy, cx = torch.randint(4, 28, (2,), generator=g).tolist()
            r = 5
            self.images[i, 0, max(cy - r, 0):cy + r, max(cx - r, 0):cx + r] += 0.8
            self.images[i, 2, :, : cx // 2] += 0.3
            sal = self.images[i, 0] - 0.5
            for k, (t, l, b, rr) in enumerate(ANCHORS):
                inside = sal[4 * t:4 * b, 4 * l:4 * rr].sum()
                area = (b - t) * (rr - l) / 64.0
                self.scores[i, k] = inside / sal.sum() - 0.5 * area
        self.scores = (self.scores - self.scores.mean()) / self.scores.std()

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.scores[i]


def conv_bn(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class CropNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(conv_bn(3, 16, 1), conv_bn(16, 32, 2), conv_bn(32, 32, 1),
                                      conv_bn(32, 64, 2), conv_bn(64, 64, 1))
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 1))

    def forward(self, x):
        f = self.backbone(x)
        pooled = [f[:, :, t:b, l:r].mean(dim=(2, 3)) for (t, l, b, r) in ANCHORS]
        pooled = torch.stack(pooled, dim=1)
        return self.head(pooled).squeeze(-1)


train_set = CropDataset(200, seed=1)
test_set = CropDataset(64, seed=2)
train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
test_loader = DataLoader(test_set, batch_size=16, shuffle=False)

net = CropNet()
optimizer = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)


def srcc(a, b):
    ra = a.argsort(dim=1).argsort(dim=1).float()
    rb = b.argsort(dim=1).argsort(dim=1).float()
    ra = ra - ra.mean(dim=1, keepdim=True)
    rb = rb - rb.mean(dim=1, keepdim=True)
    return ((ra * rb).sum(1) / (ra.norm(dim=1) * rb.norm(dim=1) + 1e-8)).mean().item()


def test():
    net.eval()
    preds, gts = [], []
    with torch.no_grad():
        for images, scores in test_loader:
            preds.append(net(images))
            gts.append(scores)
    preds, gts = torch.cat(preds), torch.cat(gts)
    return F.smooth_l1_loss(preds, gts).item(), srcc(preds, gts)


net.train()
for epoch in range(8):
    t0 = time.time()
    running = 0.0
    for images, scores in train_loader:
        optimizer.zero_grad()
        preds = net(images)
        loss = F.smooth_l1_loss(preds, scores)
        loss.backward()
        optimizer.step()
        running += loss.item()
    test_loss, test_srcc = test()
    print(f"epoch {epoch + 1} train loss {running / len(train_loader):.4f} test loss {test_loss:.4f} "
          f"test SRCC {test_srcc:.3f} ({time.time() - t0:.1f}s)")
