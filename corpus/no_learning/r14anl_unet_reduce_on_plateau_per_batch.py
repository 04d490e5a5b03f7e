"""Binary segmentation of cell nuclei in synthetic fluorescence crops with a small U-Net,
trained with a BCE + Dice loss through a reusable Trainer class (tqdm-free version of the
pretrained-backbones-unet Trainer), Adam and ReduceLROnPlateau.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class NucleiDataset(Dataset):
    """32x32 crops with 0-8 elliptical nuclei on an uneven, noisy background."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(32.), torch.arange(32.), indexing="ij")
        self.images, self.masks = [], []
        for _ in range(n):
            mask = torch.zeros(32, 32)
            img = 0.3 * torch.sin(xx / (4 + 4 * torch.rand(1, generator=g))) + 0.2 * torch.rand(1, generator=g)
            for _ in range(int(torch.randint(0, 9, (1,), generator=g))):
                cy, cx = torch.rand(2, generator=g) * 24 + 4
                ry, rx = torch.rand(2, generator=g) * 3.5 + 1.5
                inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1
                mask[inside] = 1
                img = img + inside.float() * (0.6 + 0.4 * torch.rand(1, generator=g))
            img = img + 0.35 * torch.randn(32, 32, generator=g)
            self.images.append(img.unsqueeze(0))
            self.masks.append(mask.unsqueeze(0))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, ch=(8, 16, 32)):
        super().__init__()
        self.enc1, self.enc2, self.enc3 = block(1, ch[0]), block(ch[0], ch[1]), block(ch[1], ch[2])
        self.up2 = nn.ConvTranspose2d(ch[2], ch[1], 2, stride=2)
        self.dec2 = block(2 * ch[1], ch[1])
        self.up1 = nn.ConvTranspose2d(ch[1], ch[0], 2, stride=2)
        self.dec1 = block(2 * ch[0], ch[0])
        self.head = nn.Conv2d(ch[0], 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        e3 = self.enc3(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(e3), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)


class BCEDiceLoss(nn.Module):
    def __init__(self, smooth=1e-7):
        super().__init__()
        self.smooth = smooth

    def forward(self, y_pred, y_true):
        bce = F.binary_cross_entropy_with_logits(y_pred, y_true)
        p = torch.sigmoid(y_pred).view(-1)
        t = y_true.view(-1)
        dice = (2.0 * torch.sum(p * t) + self.smooth) / (torch.sum(p + t) + self.smooth)
        return bce + 1 - dice


class Trainer:
    def __init__(self, model, criterion, optimizer, epochs, lr_scheduler=None, device=None):
        self.criterion = criterion
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler
        self.device = device or torch.device("cpu")
        self.epochs = epochs
        self.model = model.to(self.device)
        self.step = 0

    def fit(self, train_loader, val_loader):
        self.train_losses_ = torch.zeros(self.epochs)
        self.val_losses_ = torch.zeros(self.epochs)
        start = time.time()
        for epoch in range(1, self.epochs + 1):
            self._train_one_epoch(train_loader, epoch)
            dice = self._evaluate(val_loader, epoch)
            print(f"Epoch {epoch}: train loss {self.train_losses_[epoch - 1]:.4f} "
                  f"val loss {self.val_losses_[epoch - 1]:.4f} val dice {dice:.3f} "
                  f"lr {self.optimizer.param_groups[0]['lr']:.1e} ({time.time() - start:.1f}s)")

    def _train_one_epoch(self, data_loader, epoch):
        self.model.train()
        losses = torch.zeros(len(data_loader))
        for i, (images, labels) in enumerate(data_loader):
            images, labels = images.to(self.device), labels.to(self.device)
            preds = self.model(images)
            loss = self.criterion(preds.float(), labels.float())
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if self.lr_scheduler is not None:
                self.lr_scheduler.step(loss)
            if self.step % 10 == 0:
                print(f"  step {self.step:4d} loss {loss.item():.4f} lr {self.optimizer.param_groups[0]['lr']:.1e}")
            self.step += 1
            losses[i] = loss.item()
        self.train_losses_[epoch - 1] = losses.mean()

    @torch.inference_mode()
    def _evaluate(self, data_loader, epoch):
        self.model.eval()
        losses = torch.zeros(len(data_loader))
        inter, total = 0.0, 0.0
        for i, (images, labels) in enumerate(data_loader):
            preds = self.model(images)
            losses[i] = self.criterion(preds.float(), labels.float()).item()
            hard = (preds > 0).float()
            inter += (hard * labels).sum().item()
            total += (hard.sum() + labels.sum()).item()
        self.val_losses_[epoch - 1] = losses.mean()
        return 2 * inter / max(total, 1.0)


def main():
    train_loader = DataLoader(NucleiDataset(240, seed=1), batch_size=4, shuffle=True)
    val_loader = DataLoader(NucleiDataset(128, seed=2), batch_size=64)
    model = UNet()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=0.001, weight_decay=0.0001)
    scheduler = lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.1, patience=6, min_lr=0.000001)
    trainer = Trainer(model, criterion=BCEDiceLoss(), optimizer=optimizer, lr_scheduler=scheduler, epochs=3)
    trainer.fit(train_loader, val_loader)


if __name__ == "__main__":
    main()
