"""InfoVAE (MMD-regularised VAE, as in PyTorch-VAE's info_vae.py + experiment.py) on 32x32
grayscale cell-microscopy crops, trained with PyTorch Lightning. Encoder/decoder use 7x7
kernels and a 30-d latent space instead of the repository's defaults.
"""
import logging
import sys
import warnings

import lightning as L
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

config = {
    "model_params": {"in_channels": 1, "latent_dim": 30, "reg_weight": 110, "kernel_type": "imq",
                     "alpha": -9.0, "beta": 10.5, "hidden_dims": [16, 32, 64, 128]},
    "exp_params": {"LR": 1.0, "weight_decay": 0.0, "scheduler_gamma": 0.95, "kld_weight": 0.00070,
                   "manual_seed": 1265, "batch_size": 64},
    "trainer_params": {"max_epochs": 5},
}


class CellCrops(Dataset):
    """Synthetic stand-in for the crops: 1-3 stained nuclei (Gaussian blobs) on a noisy background."""

    def __init__(self, n, size=32, seed=0):
        rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
        imgs = np.zeros((n, 1, size, size), dtype=np.float32)
        for i in range(n):
            img = rng.normal(0.05, 0.02, (size, size))
            for _ in range(rng.integers(1, 4)):
                cy, cx = rng.uniform(6, size - 6, 2)
                sy, sx = rng.uniform(2.0, 5.0, 2)
                img += rng.uniform(0.5, 1.0) * np.exp(-((yy - cy) ** 2 / (2 * sy ** 2) + (xx - cx) ** 2 / (2 * sx ** 2)))
            imgs[i, 0] = np.clip(img, 0, 1)
        self.imgs = torch.from_numpy(imgs)

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return self.imgs[i], 0


class InfoVAE(nn.Module):
    def __init__(self, in_channels, latent_dim, hidden_dims, alpha=-0.5, beta=5.0, reg_weight=100,
                 kernel_type="imq", latent_var=2.0):
        super().__init__()
        self.latent_dim = latent_dim
        self.reg_weight = reg_weight
        self.kernel_type = kernel_type
        self.z_var = latent_var
        self.alpha = alpha
        self.beta = beta

        modules = []
        for h_dim in hidden_dims:
            modules.append(nn.Sequential(
                nn.Conv2d(in_channels, h_dim, kernel_size=7, stride=2, padding=3),
                nn.BatchNorm2d(h_dim), nn.LeakyReLU()))
            in_channels = h_dim
        self.encoder = nn.Sequential(*modules)
        self.fc_mu = nn.Linear(hidden_dims[-1] * 4, latent_dim)
        self.fc_var = nn.Linear(hidden_dims[-1] * 4, latent_dim)

        self.decoder_input = nn.Linear(latent_dim, hidden_dims[-1] * 4)
        rev = hidden_dims[::-1]
        modules = []
        for i in range(len(rev) - 1):
            modules.append(nn.Sequential(
                nn.ConvTranspose2d(rev[i], rev[i + 1], kernel_size=3, stride=2, padding=1, output_padding=1),
                nn.BatchNorm2d(rev[i + 1]), nn.LeakyReLU()))
        self.decoder = nn.Sequential(*modules)
        self.final_layer = nn.Sequential(
            nn.ConvTranspose2d(rev[-1], rev[-1], kernel_size=3, stride=2, padding=1, output_padding=1),
            nn.BatchNorm2d(rev[-1]), nn.LeakyReLU(),
            nn.Conv2d(rev[-1], 1, kernel_size=3, padding=1), nn.Sigmoid())
        self.hidden_last = hidden_dims[-1]

    def encode(self, x):
        result = torch.flatten(self.encoder(x), start_dim=1)
        return self.fc_mu(result), self.fc_var(result)

    def decode(self, z):
        result = self.decoder_input(z).view(-1, self.hidden_last, 2, 2)
        return self.final_layer(self.decoder(result))

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return eps * std + mu

    def forward(self, x):
        mu, log_var = self.encode(x)
        z = self.reparameterize(mu, log_var)
        return [self.decode(z), x, z, mu, log_var]

    def loss_function(self, recons, x, z, mu, log_var, M_N):
        batch_size = x.size(0)
        bias_corr = batch_size * (batch_size - 1)
        recons_loss = F.mse_loss(recons, x)
        mmd_loss = self.compute_mmd(z)
        kld_loss = torch.mean(-0.5 * torch.sum(1 + log_var - mu ** 2 - log_var.exp(), dim=1), dim=0)
        loss = (self.beta * recons_loss + (1.0 - self.alpha) * M_N * kld_loss
                + (self.alpha + self.reg_weight - 1.0) / bias_corr * mmd_loss)
        return {"loss": loss, "Reconstruction_Loss": recons_loss, "MMD": mmd_loss, "KLD": -kld_loss}

    def compute_kernel(self, x1, x2):
        x1 = x1.unsqueeze(-2)
        x2 = x2.unsqueeze(-3)
        if self.kernel_type == "rbf":
            return torch.exp(-((x1 - x2).pow(2).mean(-1) / (2.0 * self.latent_dim * self.z_var)))
        C = 2 * self.latent_dim * self.z_var
        return (C / (1e-7 + C + (x1 - x2).pow(2).sum(dim=-1))).sum() - (C / (1e-7 + C)) * x1.size(0)

    def compute_mmd(self, z):
        prior_z = torch.randn_like(z)
        return (self.compute_kernel(prior_z, prior_z) + self.compute_kernel(z, z)
                - 2 * self.compute_kernel(prior_z, z))


class VAEXperiment(L.LightningModule):
    def __init__(self, vae_model, params):
        super().__init__()
        self.model = vae_model
        self.params = params

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        real_img, labels = batch
        results = self.forward(real_img)
        train_loss = self.model.loss_function(*results, M_N=self.params["kld_weight"])
        if self.global_step < 8 or self.global_step % 8 == 0:
            print(f"step {self.global_step:3d} loss {train_loss['loss'].item():.4g} "
                  f"recons {train_loss['Reconstruction_Loss'].item():.4g} kld {-train_loss['KLD'].item():.4g} "
                  f"mmd {train_loss['MMD'].item():.4g}")
        self.log_dict({k: v.item() for k, v in train_loss.items()}, on_epoch=True)
        return train_loss["loss"]

    def validation_step(self, batch, batch_idx):
        real_img, labels = batch
        results = self.forward(real_img)
        val_loss = self.model.loss_function(*results, M_N=self.params["kld_weight"])
        self.log("val_loss", val_loss["loss"].item(), on_epoch=True)
        self.log("val_recons", val_loss["Reconstruction_Loss"].item(), on_epoch=True)

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "val_loss" in m:
            print(f"epoch {self.current_epoch} val_loss {m['val_loss'].item():.4g} "
                  f"val_recons {m['val_recons'].item():.4g}")

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.model.parameters(), lr=self.params["LR"],
                                     weight_decay=self.params["weight_decay"])
        scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=self.params["scheduler_gamma"])
        return [optimizer], [scheduler]


def main():
    L.seed_everything(config["exp_params"]["manual_seed"], verbose=False)
    torch.set_num_threads(1)
    train_set = CellCrops(640, seed=0)
    val_set = CellCrops(128, seed=1)
    bs = config["exp_params"]["batch_size"]
    train_loader = DataLoader(train_set, batch_size=bs, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=bs)

    model = InfoVAE(**config["model_params"])
    experiment = VAEXperiment(model, config["exp_params"])
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        **config["trainer_params"])
    trainer.fit(experiment, train_loader, val_loader)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
