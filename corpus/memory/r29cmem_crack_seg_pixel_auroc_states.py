"""Binary crack segmentation on 128x128 pavement tiles with a light encoder-decoder.

The training loop reports the loss every few steps and the pixel-level AUROC of
the whole epoch (torchmetrics BinaryAUROC, updated at every step, computed and
reset at the end of the epoch).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchmetrics
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

TILE = 128


class CrackTiles(Dataset):
    def __init__(self, n, seed):
        self.n = n
        self.seed = seed

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        g = torch.Generator().manual_seed(self.seed * 100003 + idx)
        yy, xx = torch.meshgrid(torch.arange(TILE).float(), torch.arange(TILE).float(), indexing="ij")
        mask = torch.zeros(TILE, TILE)
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            a, b = torch.rand(2, generator=g) * 2 - 1
            c = torch.rand(1, generator=g).item() * TILE
            dist = (a * xx + b * yy - c * (a.abs() + b.abs())).abs() / (a * a + b * b).sqrt()
            mask = torch.maximum(mask, (dist < 1.5).float())
        image = 0.5 + 0.15 * torch.randn(1, TILE, TILE, generator=g) - 0.35 * mask[None]
        return image, mask.long()


class CrackNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 2, stride=2), nn.ReLU(),
            nn.ConvTranspose2d(16, 8, 2, stride=2), nn.ReLU(),
            nn.Conv2d(8, 1, 1),
        )

    def forward(self, x):
        return self.decoder(self.encoder(x)).squeeze(1)


train_loader = DataLoader(CrackTiles(512, 1), batch_size=32, shuffle=True)
model = CrackNet()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(8.0))
pixel_auroc = torchmetrics.classification.BinaryAUROC()

for epoch in range(1, 3):
    model.train()
    running = 0.0
    for step, (images, masks) in enumerate(train_loader, 1):
        optimizer.zero_grad()
        logits = model(images)
        loss = criterion(logits, masks.float())
        loss.backward()
        optimizer.step()

        pixel_auroc.update(torch.sigmoid(logits.detach()), masks)
        running += loss.item()
        if step % 8 == 0:
            print(f"epoch {epoch} step {step}: loss {running / 8:.4f}")
            running = 0.0
    print(f"epoch {epoch}: pixel AUROC {pixel_auroc.compute().item():.4f}")
    pixel_auroc.reset()
