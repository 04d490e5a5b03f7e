"""A small GAN in PyTorch Lightning with manual optimization (two optimizers).

The generator maps 8-d noise to 2-d points; the real data are sensor readings clustered around
an operating point.  Every epoch the script compares a batch of generated points with held-out
real points (mean offset and the energy distance between the two samples).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

LATENT = 8


def make_readings(n, seed):
    g = torch.Generator().manual_seed(seed)
    base = torch.tensor([2.0, -1.0])
    cov = torch.tensor([[0.30, 0.0], [0.18, 0.12]])
    return base + torch.randn(n, 2, generator=g) @ cov.T


def energy_distance(a, b):
    return 2 * torch.cdist(a, b).mean() - torch.cdist(a, a).mean() - torch.cdist(b, b).mean()


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(LATENT, 64), nn.LeakyReLU(0.2),
                                 nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 2))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2),
                                 nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x)


class GAN(pl.LightningModule):
    def __init__(self, lr=2e-3, val_real=None):
        super().__init__()
        self.automatic_optimization = False
        self.G = Generator()
        self.D = Discriminator()
        self.lr = lr
        self.criterion = nn.BCEWithLogitsLoss()
        self.register_buffer("val_real", val_real)
        self.register_buffer("val_z", torch.randn(512, LATENT, generator=torch.Generator().manual_seed(99)))

    def sample_G(self, n):
        return self.G(torch.randn(n, LATENT, device=self.device))

    def training_step(self, batch, batch_idx):
        opt_g, opt_d = self.optimizers()
        (X,) = batch
        batch_size = X.shape[0]
        real_label = torch.ones((batch_size, 1), device=self.device)
        fake_label = torch.zeros((batch_size, 1), device=self.device)

        g_X = self.sample_G(batch_size)

        d_x = self.D(X)
        errD_real = self.criterion(d_x, real_label)
        d_z = self.D(g_X.detach())
        errD_fake = self.criterion(d_z, fake_label)
        errD = errD_real + errD_fake
        self.manual_backward(errD)
        opt_d.step()

        d_z = self.D(g_X)
        errG = self.criterion(d_z, real_label)
        self.manual_backward(errG)
        opt_g.step()

        if self.global_step % 40 == 0:
            print(f"step {self.global_step // 2:4d} errD {errD.item():.4f} errG {errG.item():.4f}")

    def on_train_epoch_end(self):
        with torch.no_grad():
            fake = self.G(self.val_z)
        offset = (fake.mean(0) - self.val_real.mean(0)).norm()
        ed = energy_distance(fake, self.val_real)
        print(f"epoch {self.current_epoch} generated mean {fake.mean(0).tolist()} "
              f"std {fake.std(0).mean():.3f} | mean offset {offset:.3f} energy distance {ed:.4f}")

    def configure_optimizers(self):
        opt_g = torch.optim.Adam(self.G.parameters(), lr=self.lr, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(self.D.parameters(), lr=self.lr, betas=(0.5, 0.999))
        return opt_g, opt_d


if __name__ == "__main__":
    pl.seed_everything(0)
    train = TensorDataset(make_readings(3200, seed=1))
    model = GAN(val_real=make_readings(512, seed=2))
    trainer = pl.Trainer(max_epochs=5, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(model, DataLoader(train, batch_size=80, shuffle=True))
