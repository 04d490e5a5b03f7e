"""Convolutional autoencoder in Lightning, after the UvA deep-learning course's
"Deep Autoencoders" tutorial (scaled down from 32x32 CIFAR10 to 16x16 synthetic images).

Encoder: strided convolutions + GELU -> linear to a latent vector; decoder: linear ->
transposed convolutions -> tanh (images live in [-1, 1]). The loss is the squared error summed
over pixels and averaged over the batch. Adam with ReduceLROnPlateau on val_loss, a
LearningRateMonitor, a checkpoint callback and a callback printing the reconstruction error.

Data: synthetic "scenes" -- a coloured background gradient with two soft coloured blobs.
"""
import os
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data
from lightning.pytorch.callbacks import Callback, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

L.seed_everything(42)


def make_scenes(n, seed):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, 16), torch.linspace(-1, 1, 16), indexing="ij")
    bg_a, bg_b = torch.rand(n, 3, 1, 1, generator=g) * 2 - 1, torch.rand(n, 3, 1, 1, generator=g) * 2 - 1
    direction = torch.rand(n, 1, 1, 1, generator=g)
    imgs = bg_a * (1 - direction) * (xx + 1) / 2 + bg_b * direction * (yy + 1) / 2
    for _ in range(2):
        cy, cx = (torch.rand(n, 2, 1, 1, generator=g) * 1.6 - 0.8).unbind(1)
        r = torch.rand(n, 1, 1, generator=g) * 0.3 + 0.15
        colour = torch.rand(n, 3, 1, 1, generator=g) * 2 - 1
        blob = torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r ** 2)).unsqueeze(1)
        imgs = imgs * (1 - blob) + colour * blob
    imgs = imgs + 0.05 * torch.randn(imgs.shape, generator=g)
    return data.TensorDataset(imgs.clamp(-1, 1), torch.zeros(n, dtype=torch.long))


class Encoder(nn.Module):
    def __init__(self, num_input_channels, base_channel_size, latent_dim, act_fn=nn.GELU):
        super().__init__()
        c_hid = base_channel_size
        self.net = nn.Sequential(
            nn.Conv2d(num_input_channels, c_hid, kernel_size=3, padding=1, stride=2),  # 16x16 => 8x8
            act_fn(),
            nn.Conv2d(c_hid, c_hid, kernel_size=3, padding=1),
            act_fn(),
            nn.Conv2d(c_hid, 2 * c_hid, kernel_size=3, padding=1, stride=2),  # 8x8 => 4x4
            act_fn(),
            nn.Conv2d(2 * c_hid, 2 * c_hid, kernel_size=3, padding=1),
            act_fn(),
            nn.Conv2d(2 * c_hid, 2 * c_hid, kernel_size=3, padding=1, stride=2),  # 4x4 => 2x2
            act_fn(),
            nn.Flatten(),
            nn.Linear(2 * 4 * c_hid, latent_dim),
        )

    def forward(self, x):
        return self.net(x)


class Decoder(nn.Module):
    def __init__(self, num_input_channels, base_channel_size, latent_dim, act_fn=nn.GELU):
        super().__init__()
        c_hid = base_channel_size
        self.linear = nn.Sequential(nn.Linear(latent_dim, 2 * 4 * c_hid), act_fn())
        self.net = nn.Sequential(
            nn.ConvTranspose2d(2 * c_hid, 2 * c_hid, kernel_size=3, output_padding=1, padding=1, stride=2),  # 2 => 4
            act_fn(),
            nn.Conv2d(2 * c_hid, 2 * c_hid, kernel_size=3, padding=1),
            act_fn(),
            nn.ConvTranspose2d(2 * c_hid, c_hid, kernel_size=3, output_padding=1, padding=1, stride=2),  # 4 => 8
            act_fn(),
            nn.Conv2d(c_hid, c_hid, kernel_size=3, padding=1),
            act_fn(),
            nn.ConvTranspose2d(c_hid, num_input_channels, kernel_size=3, output_padding=1, padding=1, stride=2),  # 8 => 16
            nn.Tanh(),
        )

    def forward(self, x):
        x = self.linear(x)
        x = x.reshape(x.shape[0], -1, 2, 2)
        return self.net(x)


class Autoencoder(L.LightningModule):
    def __init__(self, base_channel_size, latent_dim, num_input_channels=3, width=16, height=16):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = Encoder(num_input_channels, base_channel_size, latent_dim)
        self.decoder = Decoder(num_input_channels, base_channel_size, latent_dim)
        self.example_input_array = torch.zeros(2, num_input_channels, width, height)

    def forward(self, x):
        z = self.encoder(x)
        return self.decoder(z)

    def _get_reconstruction_loss(self, batch):
        x, _ = batch
        x_hat = self.forward(x)
        loss = F.mse_loss(x, x_hat, reduction="none")
        loss = loss.sum(dim=[1, 2, 3]).mean(dim=[0])
        return loss

    def configure_optimizers(self):
        optimizer = optim.Adam(self.parameters(), lr=2e-3)
        scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.2, patience=2, min_lr=5e-5)
        return {"optimizer": optimizer, "lr_scheduler": scheduler, "monitor": "val_loss"}

    def training_step(self, batch, batch_idx):
        loss = self._get_reconstruction_loss(batch)
        self.log("train_loss", loss)
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step:4d} train_loss {loss.item():8.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        loss = self._get_reconstruction_loss(batch)
        self.log("val_loss", loss)


class ReconstructionCallback(Callback):
    def __init__(self, input_imgs, every_n_epochs=1):
        super().__init__()
        self.input_imgs = input_imgs
        self.every_n_epochs = every_n_epochs

    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.current_epoch % self.every_n_epochs == 0:
            with torch.no_grad():
                pl_module.eval()
                reconst_imgs = pl_module(self.input_imgs)
                pl_module.train()
            err = F.mse_loss(reconst_imgs, self.input_imgs, reduction="sum").item() / len(self.input_imgs)
            lr = trainer.optimizers[0].param_groups[0]["lr"]
            print(f"epoch {trainer.current_epoch}: val_loss {trainer.callback_metrics.get('val_loss', float('nan')):.3f} "
                  f"reconstruction error on 8 fixed images {err:.3f} lr {lr:.2e}")


def train_autoencoder(latent_dim, train_loader, val_loader, sample_imgs, checkpoint_path):
    trainer = L.Trainer(
        default_root_dir=os.path.join(checkpoint_path, "scenes_%i" % latent_dim),
        accelerator="cpu",
        devices=1,
        max_epochs=6,
        logger=CSVLogger(checkpoint_path, name="scenes_%i" % latent_dim),
        callbacks=[
            ModelCheckpoint(save_weights_only=True),
            ReconstructionCallback(sample_imgs, every_n_epochs=1),
            LearningRateMonitor("epoch"),
        ],
        enable_progress_bar=False,
        num_sanity_val_steps=0,
    )
    model = Autoencoder(base_channel_size=16, latent_dim=latent_dim)
    trainer.fit(model, train_loader, val_loader)
    val_result = trainer.validate(model, dataloaders=val_loader, verbose=False)
    return model, val_result


def main():
    train_set = make_scenes(2048, seed=0)
    val_set = make_scenes(256, seed=1)
    train_loader = data.DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
    val_loader = data.DataLoader(val_set, batch_size=256, shuffle=False)
    sample_imgs = torch.stack([val_set[i][0] for i in range(8)])
    with tempfile.TemporaryDirectory() as tmp_dir:
        checkpoint_path = os.path.join(tmp_dir, "saved_models")
        model, val_result = train_autoencoder(64, train_loader, val_loader, sample_imgs, checkpoint_path)
    print("final validation:", val_result)


if __name__ == "__main__":
    main()
