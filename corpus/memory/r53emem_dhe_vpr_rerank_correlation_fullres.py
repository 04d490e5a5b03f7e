"""Re-ranking for visual place recognition, DHE-VPR style: a shared CNN backbone extracts
dense feature maps of a query and a database image, a correlation volume between the two maps
is fed to a small homography regressor that predicts the 4 corner offsets (8 numbers)."""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

img_size = 96
feat_size = 48
batch_size = 16
epochs = 5
lr = 1e-3


class PairDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.query = torch.rand(n, 3, img_size, img_size, generator=g)
        move = (torch.rand(n, 2, generator=g) - 0.5) * 2.0
        shift = (move * 6).round().long()
        self.offsets = (shift.float() / 6).repeat(1, 4)
        self.db = torch.stack([torch.roll(q, (int(s[0]), int(s[1])), (1, 2)) for q, s in zip(self.query, shift)])
        self.db = self.db + 0.05 * torch.randn(self.db.shape, generator=g)

    def __len__(self):
        return len(self.query)

    def __getitem__(self, i):
        return self.query[i], self.db[i], self.offsets[i]


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return F.adaptive_avg_pool2d(self.layers(x), feat_size)


def compute_similarity(features_a, features_b):
    b, c, h, w = features_a.shape
    features_a = features_a.transpose(2, 3).contiguous().view(b, c, h * w)
    features_b = features_b.view(b, c, h * w).transpose(1, 2)
    features_mul = torch.bmm(features_b, features_a)
    correlation_tensor = features_mul.view(b, h, w, h * w).transpose(2, 3).transpose(1, 2)
    correlation_tensor = F.normalize(F.relu(correlation_tensor), p=2, dim=1)
    return correlation_tensor


class HomographyRegression(nn.Module):
    def __init__(self, in_ch):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(in_ch, 64, 3, padding=1), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(4),
        )
        self.fc = nn.Linear(64 * 16, 8)

    def forward(self, corr):
        return self.fc(self.conv(corr).flatten(1))


class RerankNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = Backbone()
        self.reg = HomographyRegression(feat_size * feat_size)

    def forward(self, query, db):
        fq = F.normalize(self.backbone(query), dim=1)
        fd = F.normalize(self.backbone(db), dim=1)
        corr = compute_similarity(fq, fd)
        return self.reg(corr)


train_loader = DataLoader(PairDataset(160, 1), batch_size=batch_size, shuffle=True)
val_loader = DataLoader(PairDataset(32, 2), batch_size=batch_size)

model = RerankNet()
optimizer = torch.optim.Adam(model.parameters(), lr=lr)
criterion = nn.SmoothL1Loss()
print(f"params: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")

start = time.time()
step = 0
for epoch in range(epochs):
    model.train()
    running = 0.0
    for query, db, offsets in train_loader:
        pred = model(query, db)
        loss = criterion(pred, offsets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 5 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.5f}")
    model.eval()
    val = 0.0
    with torch.no_grad():
        for query, db, offsets in val_loader:
            val += criterion(model(query, db), offsets).item()
    print(f"epoch {epoch} train loss {running / len(train_loader):.5f} val loss {val / len(val_loader):.5f} ({time.time() - start:.1f}s)")
