"""Binary segmentation of bright lesions in grey-level scans with a small U-Net and a
soft Dice loss (segmentation_models_pytorch style), trained with PyTorch Lightning in
16-bit precision to fit bigger crops.
"""
import logging
import warnings

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning").setLevel(logging.ERROR)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
log = logging.getLogger("seg")
logging.basicConfig(level=logging.INFO, format="%(message)s")


class LesionScans(Dataset):
    def __init__(self, n, size=160, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images, self.masks = [], []
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        for _ in range(n):
            cy, cx = torch.randint(size // 3, 2 * size // 3, (2,), generator=g).tolist()
            r = int(torch.randint(size // 3, size // 2, (1,), generator=g))
            mask = (((yy - cy) ** 2 + (xx - cx) ** 2) < r * r).float()
            img = 0.3 + 0.4 * mask + 0.15 * torch.randn(size, size, generator=g)
            self.images.append(img[None])
            self.masks.append(mask[None])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return {"image": self.images[i], "mask": self.masks[i]}


def soft_dice_score(output, target, smooth=0.0, eps=1e-7, dims=None):
    intersection = torch.sum(output * target, dim=dims)
    cardinality = torch.sum(output + target, dim=dims)
    dice_score = (2.0 * intersection + smooth) / (cardinality + smooth).clamp_min(eps)
    return dice_score


class DiceLoss(nn.Module):
    def __init__(self, from_logits=True, smooth=0.0, eps=1e-7):
        super().__init__()
        self.from_logits = from_logits
        self.smooth = smooth
        self.eps = eps

    def forward(self, y_pred, y_true):
        if self.from_logits:
            y_pred = F.logsigmoid(y_pred).exp()
        bs = y_true.size(0)
        dims = (0, 2)
        y_true = y_true.view(bs, 1, -1)
        y_pred = y_pred.view(bs, 1, -1)
        scores = soft_dice_score(y_pred, y_true.type_as(y_pred), smooth=self.smooth, eps=self.eps, dims=dims)
        loss = 1.0 - scores
        mask = y_true.sum(dims) > 0
        loss *= mask.to(loss.dtype)
        return loss.mean()


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True))


class SmallUNet(nn.Module):
    def __init__(self, ch=8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, ch, 3, stride=2, padding=1), nn.ReLU(inplace=True))
        self.enc1 = block(ch, ch)
        self.enc2 = block(ch, 2 * ch)
        self.up = nn.ConvTranspose2d(2 * ch, ch, 2, stride=2)
        self.dec1 = block(2 * ch, ch)
        self.head = nn.Conv2d(ch, 1, 1)

    def forward(self, x):
        e1 = self.enc1(self.stem(x))
        e2 = self.enc2(F.max_pool2d(e1, 2))
        d1 = self.dec1(torch.cat([self.up(e2), e1], dim=1))
        return F.interpolate(self.head(d1), size=x.shape[-2:], mode="bilinear", align_corners=False)


class LesionSegmenter(L.LightningModule):
    def __init__(self, lr=5e-3):
        super().__init__()
        self.save_hyperparameters()
        self.model = SmallUNet()
        self.loss_fn = DiceLoss(from_logits=True)

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        logits = self(batch["image"])
        loss = self.loss_fn(logits, batch["mask"])
        if self.global_step % 3 == 0:
            log.info(f"epoch {self.current_epoch} step {self.global_step} dice_loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        logits = self(batch["image"])
        pred = (logits.float().sigmoid() > 0.5).float()
        inter = (pred * batch["mask"]).sum()
        iou = inter / (pred.sum() + batch["mask"].sum() - inter + 1e-6)
        self.log("val_iou", iou, prog_bar=False)

    def on_validation_epoch_end(self):
        log.info(f"== epoch {self.current_epoch} val_iou {self.trainer.callback_metrics['val_iou'].item():.3f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    L.seed_everything(0, verbose=False)
    train_loader = DataLoader(LesionScans(30, seed=1), batch_size=10, shuffle=True)
    val_loader = DataLoader(LesionScans(10, seed=2), batch_size=10)
    model = LesionSegmenter()
    trainer = L.Trainer(max_epochs=3, accelerator="cpu", precision="16-true", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
