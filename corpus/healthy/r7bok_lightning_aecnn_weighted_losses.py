"""AE-CNN for multi-label chest X-ray findings, ported to PyTorch Lightning.

An autoencoder compresses the radiograph into a small 3-channel "image" that an Inception-like
CNN classifies; the CNN has a main head and an auxiliary head on an intermediate block (like
InceptionV3's AuxLogits). Three losses are combined in training_step:

    loss1 = MSE between the decoder's reconstruction and the input radiograph
    loss2 = 0.8 * BCE(main head) + 0.2 * BCE(auxiliary head)
    loss  = 0.1 * loss1 + 0.9 * loss2

and Lightning backpropagates the weighted sum through both the CNN branches and the autoencoder.

Synthetic data: 32x32 "radiographs" (two lung fields, a heart shadow, ribs, noise) with five
findings that can co-occur: nodule, effusion, cardiomegaly, pneumothorax, infiltration.
"""
import math
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MultilabelAUROC

L.seed_everything(7)

FINDINGS = ["nodule", "effusion", "cardiomegaly", "pneumothorax", "infiltration"]
SIZE = 32


def make_radiographs(n, seed):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, SIZE), torch.linspace(-1, 1, SIZE), indexing="ij")
    labels = (torch.rand(n, len(FINDINGS), generator=g) < 0.3).float()
    imgs = torch.zeros(n, 1, SIZE, SIZE)
    for i in range(n):
        shift = 0.1 * (torch.rand(2, generator=g) - 0.5)
        lx, ly = xx - shift[0], yy - shift[1]
        lungs = (((lx + 0.42) / 0.32) ** 2 + (ly / 0.7) ** 2 < 1) | (((lx - 0.42) / 0.32) ** 2 + (ly / 0.7) ** 2 < 1)
        img = 0.75 - 0.45 * lungs.float()
        heart_r = 0.28 if labels[i, 2] == 0 else 0.42
        img = img + 0.35 * (((lx - 0.1) / heart_r) ** 2 + ((ly - 0.35) / (heart_r * 0.8)) ** 2 < 1).float()
        img = img + 0.05 * torch.sin(14 * ly + 2 * lx.abs()).clamp(min=0)
        if labels[i, 0]:
            c = (torch.rand(2, generator=g) - 0.5) * torch.tensor([1.2, 1.0])
            img = img + 0.5 * torch.exp(-((lx - c[0]) ** 2 + (ly - c[1]) ** 2) / 0.012)
        if labels[i, 1]:
            side = -0.42 if torch.rand(1, generator=g) < 0.5 else 0.42
            img = img + 0.35 * ((ly > 0.35) & ((lx - side).abs() < 0.3)).float()
        if labels[i, 3]:
            img = img - 0.25 * ((ly < -0.35) & (lx.abs() > 0.2) & (lx.abs() < 0.7)).float()
        if labels[i, 4]:
            img = img + 0.2 * lungs.float() * (torch.rand(SIZE, SIZE, generator=g) > 0.75).float()
        imgs[i, 0] = img + 0.05 * torch.randn(SIZE, SIZE, generator=g)
    return TensorDataset(imgs.clamp(0, 1.5) / 1.5, labels)


class AECNN(nn.Module):
    def __init__(self, class_count):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(16, 3, 3, padding=1), nn.Sigmoid(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(3, 16, 4, stride=2, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(16, 1, 3, padding=1), nn.Sigmoid(),
        )
        self.block1 = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.block2 = nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.block3 = nn.Sequential(nn.Conv2d(64, 96, 3, padding=1), nn.BatchNorm2d(96), nn.ReLU(inplace=True))
        self.aux_logits = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64 * 4, class_count))
        self.fc = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(96, class_count))

    def forward(self, x):
        code = self.encoder(x)
        recon = self.decoder(code)
        h = self.block2(self.block1(code))
        out_aux = torch.sigmoid(self.aux_logits(h))
        out_cnn = torch.sigmoid(self.fc(self.block3(h)))
        return recon, out_cnn, out_aux


class LightningChestXrayAECNN(L.LightningModule):
    def __init__(self, class_count, lr=2e-3):
        super().__init__()
        self.save_hyperparameters()
        self.module = AECNN(class_count)
        self.loss1 = nn.MSELoss()
        self.loss2 = nn.BCELoss()
        self.val_auroc = MultilabelAUROC(num_labels=class_count, average="macro")

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return [optimizer], [scheduler]

    def training_step(self, batch, batch_idx):
        x, y = batch
        recon, out_cnn, out_aux = self.module(x)
        loss1 = self.loss1(recon, x)
        loss2 = 0.8 * self.loss2(out_cnn, y) + 0.2 * self.loss2(out_aux, y)
        loss = 0.1 * loss1 + 0.9 * loss2
        self.log_dict({"train_loss": loss, "ae_mse": loss1, "cls_bce": loss2}, prog_bar=True)
        if batch_idx % 20 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step:4d} loss {loss.item():.4f} "
                  f"(ae mse {loss1.item():.4f}, cls bce {loss2.item():.4f})")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        recon, out_cnn, _ = self.module(x)
        self.val_auroc.update(out_cnn, y.long())
        self.log("val_bce", self.loss2(out_cnn, y))
        self.log("val_mse", self.loss1(recon, x))

    def on_validation_epoch_end(self):
        auroc = self.val_auroc.compute()
        self.val_auroc.reset()
        self.log("val_auroc", auroc)
        print(f"epoch {self.current_epoch} val bce {self.trainer.callback_metrics['val_bce']:.4f} "
              f"val mse {self.trainer.callback_metrics['val_mse']:.4f} val macro AUROC {auroc:.3f}")


def main():
    train_set = make_radiographs(1280, seed=0)
    val_set = make_radiographs(256, seed=1)
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=128)
    model = LightningChestXrayAECNN(class_count=len(FINDINGS))
    with tempfile.TemporaryDirectory() as tmp_dir:
        trainer = L.Trainer(
            max_epochs=3,
            accelerator="cpu",
            devices=1,
            default_root_dir=tmp_dir,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
        )
        trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
