"""Synaptic cleft segmentation on EM patches: a small encoder-decoder trained with
weighted BCE, one run_epoch() routine shared by training and validation.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

PATCH = 32


class EMPatchDataset(Dataset):
    def __init__(self, n):
        self.img = torch.randn(n, 1, PATCH, PATCH) * 0.3
        self.mask = torch.zeros(n, 1, PATCH, PATCH)
        for i in range(n):
            r, c = torch.randint(4, PATCH - 8, (2,)).tolist()
            h, w = torch.randint(2, 5, (2,)).tolist()
            self.mask[i, 0, r:r + h, c:c + 3 * w] = 1.0
        self.img += 1.5 * self.mask

    def __len__(self):
        return len(self.img)

    def __getitem__(self, i):
        return self.img[i], self.mask[i]


class CleftNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU())
        self.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.dec = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        return self.dec(torch.cat([self.up(e2), e1], dim=1))


def run_epoch(model, loader, optimizer, device, mode="train"):
    is_train = mode == "train"
    model.train(is_train)
    total, dice_num, dice_den = 0.0, 0.0, 0.0
    for i, (img, mask) in enumerate(loader):
        img, mask = img.to(device), mask.to(device)
        with torch.set_grad_enabled(is_train):
            logits = model(img)
            loss = F.binary_cross_entropy_with_logits(logits, mask, pos_weight=torch.tensor(5.0))
        if is_train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if (i + 1) % 10 == 0:
                print(f"  [{mode}] iter {i + 1}/{len(loader)} loss {loss.item():.4f}")
        pred = (logits > 0).float()
        dice_num += 2 * (pred * mask).sum().item()
        dice_den += (pred.sum() + mask.sum()).item()
        total += loss.item()
    return total / len(loader), dice_num / max(dice_den, 1.0)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
train_loader = DataLoader(EMPatchDataset(480), batch_size=16, shuffle=True)
val_loader = DataLoader(EMPatchDataset(96), batch_size=32)

model = CleftNet().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

for epoch in range(3):
    train_loss, train_dice = run_epoch(model, train_loader, optimizer, device)
    val_loss, val_dice = run_epoch(model, val_loader, None, "val")
    print(f"epoch {epoch}: train loss {train_loss:.4f} dice {train_dice:.3f} | "
          f"val loss {val_loss:.4f} dice {val_dice:.3f}")
