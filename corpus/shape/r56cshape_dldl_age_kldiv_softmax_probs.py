"""Label distribution learning (DLDL-style) for age estimation from face embeddings.

Each face embedding is mapped to a distribution over 60 age bins; the target is a
Gaussian label distribution centred on the true age. Trained with KL divergence.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

NUM_AGES = 60
EMB_DIM = 32
SIGMA = 2.0


class FaceAgeDataset(Dataset):
    def __init__(self, n, proj):
        self.ages = torch.randint(0, NUM_AGES, (n,))
        a = self.ages.float() / NUM_AGES
        basis = torch.stack([torch.sin(a * math.pi * k) for k in range(1, 5)]
                            + [torch.cos(a * math.pi * k) for k in range(1, 5)], dim=1)
        self.x = basis @ proj + 0.05 * torch.randn(n, EMB_DIM)
        bins = torch.arange(NUM_AGES).float()
        d = torch.exp(-(bins[None, :] - self.ages[:, None].float()) ** 2 / (2 * SIGMA ** 2))
        self.dist = d / d.sum(dim=1, keepdim=True)

    def __len__(self):
        return len(self.ages)

    def __getitem__(self, i):
        return self.x[i], self.dist[i], self.ages[i]


class AgeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(EMB_DIM, 128), nn.ReLU(),
            nn.Linear(128, 128), nn.ReLU(),
        )
        self.head = nn.Linear(128, NUM_AGES)

    def forward(self, x):
        return F.softmax(self.head(self.backbone(x)), dim=1)


proj = torch.randn(8, EMB_DIM)
train_ds = FaceAgeDataset(3200, proj)
val_ds = FaceAgeDataset(800, proj)
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=200)

model = AgeNet()
criterion = nn.KLDivLoss(reduction="batchmean")
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
bins = torch.arange(NUM_AGES).float()

step = 0
for epoch in range(4):
    model.train()
    running = 0.0
    for x, dist, age in train_loader:
        probs = model(x)
        loss = criterion(probs, dist)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 25 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")

    model.eval()
    mae, kl, n = 0.0, 0.0, 0
    with torch.no_grad():
        for x, dist, age in val_loader:
            probs = model(x)
            pred_age = (probs * bins).sum(dim=1)
            mae += (pred_age - age.float()).abs().sum().item()
            kl += (dist * (dist.clamp_min(1e-12).log() - probs.clamp_min(1e-12).log())).sum().item()
            n += len(age)
    print(f"epoch {epoch} train loss {running / len(train_loader):.4f} "
          f"val MAE {mae / n:.2f} years  val KL {kl / n:.4f}")
