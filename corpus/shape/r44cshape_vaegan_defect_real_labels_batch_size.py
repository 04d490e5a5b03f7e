"""Unsupervised defect detection with a VAE-GAN: a VAE learns to rebuild defect-free
grayscale surface patches from corrupted copies, a patch discriminator (LSGAN, MSE)
pushes the reconstructions towards real-looking texture."""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
random.seed(0)

input_channel = 1
img_size = 32
latent_dim = 32
adv_weight = 1.0
recon_weight = 0.4
kl_weight = 1.0
regen_weight = 0.6


class SurfaceDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(img_size), torch.arange(img_size), indexing="ij")
        imgs = []
        for _ in range(n):
            f = 0.3 + 0.4 * torch.rand(1, generator=g).item()
            phase = 2 * math.pi * torch.rand(1, generator=g).item()
            tex = 0.5 + 0.25 * torch.sin(f * xx + phase) * torch.cos(f * yy)
            tex = tex + 0.05 * torch.randn(img_size, img_size, generator=g)
            imgs.append(tex.clamp(0, 1).unsqueeze(0))
        self.imgs = torch.stack(imgs)

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, i):
        return self.imgs[i]


def grid_mask(image):
    image = image.clone()
    for _ in range(random.randint(1, 3)):
        s = random.randint(3, 6)
        r, c = random.randint(0, img_size - s), random.randint(0, img_size - s)
        image[:, r:r + s, c:c + s] = 0.0
    return image


def add_gaussian_noise(image):
    return (image + 0.1 * torch.randn_like(image)).clamp(0, 1)


class VAEEncoder(nn.Module):
    def __init__(self, latent_dim):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(input_channel, 16, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(16, 32, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(32, 64, 4, 2, 1), nn.LeakyReLU(0.2),
        )
        self.mu = nn.Linear(64 * 4 * 4, latent_dim)
        self.var = nn.Linear(64 * 4 * 4, latent_dim)

    def forward(self, x):
        h = self.conv(x).flatten(1)
        return self.mu(h), self.var(h)


class VAEDecoder(nn.Module):
    def __init__(self, latent_dim):
        super().__init__()
        self.fc = nn.Linear(latent_dim, 64 * 4 * 4)
        self.deconv = nn.Sequential(
            nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose2d(16, input_channel, 4, 2, 1), nn.Sigmoid(),
        )

    def forward(self, z):
        return self.deconv(self.fc(z).view(-1, 64, 4, 4))


class VAEModel(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, x):
        z_mu, z_var = self.encoder(x)
        std = torch.exp(z_var / 2)
        z = z_mu + torch.randn_like(std) * std
        return self.decoder(z), z_mu, z_var


class Discriminator(nn.Module):
    def __init__(self, input_nc=input_channel, ndf=16):
        super().__init__()
        self.model = nn.Sequential(
            nn.Conv2d(input_nc, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1), nn.InstanceNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1), nn.InstanceNorm2d(ndf * 4), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 4, 1, 3, 1, 1), nn.Sigmoid(),
            nn.AdaptiveAvgPool2d(1),
        )

    def forward(self, input):
        return self.model(input).view(-1)


class VAEGANModelLoader:
    def __init__(self, train_dataset, test_dataset, batch_size):
        self.batch_size = batch_size
        self.train_dataset = train_dataset
        self.test_dataset = test_dataset
        self.train_iterator = DataLoader(train_dataset, batch_size=batch_size, shuffle=True)
        self.test_iterator = DataLoader(test_dataset, batch_size=batch_size)
        self.model = VAEModel(VAEEncoder(latent_dim), VAEDecoder(latent_dim))
        self.G_optimizer = optim.Adam(self.model.parameters(), lr=1e-3)
        self.discriminator = Discriminator(input_channel)
        self.D_optimizer = optim.Adam(self.discriminator.parameters(), lr=2e-4)
        self.criterion_GAN = nn.MSELoss()

        self.real_labels = torch.ones(batch_size)
        self.fake_labels = torch.zeros(batch_size)

    def test_epoch_vae(self):
        self.model.eval()
        test_loss = 0.0
        with torch.no_grad():
            for x in self.test_iterator:
                x_sample, z_mu, z_var = self.model(x)
                recon_loss = F.mse_loss(x_sample, x, reduction="sum")
                kl_loss = 0.5 * torch.sum(torch.exp(z_var) + z_mu ** 2 - 1.0 - z_var)
                test_loss += (recon_loss * recon_weight + kl_loss * kl_weight).item()
        self.model.train()
        return test_loss / len(self.test_dataset)

    def train(self, epochs):
        for epoch in range(epochs):
            train_loss_G = 0.0
            train_loss_D = 0.0
            for batch, x in enumerate(self.train_iterator):
                x = x.view(-1, input_channel, img_size, img_size)
                x_ = x.clone()
                for idx in range(x_.size(0)):
                    image = x_[idx]
                    if random.random() <= 0.5:
                        image = grid_mask(image)
                    if random.random() <= 0.3:
                        image = add_gaussian_noise(image)
                    x_[idx] = image

                self.G_optimizer.zero_grad()
                y, z_mu_y, z_var_y = self.model(x_)
                z, z_mu_z, z_var_z = self.model(y)
                recon_loss_y = F.mse_loss(y, x, reduction="sum")
                kl_loss_y = 0.5 * torch.sum(torch.exp(z_var_y) + z_mu_y ** 2 - 1.0 - z_var_y)
                regen_loss = F.mse_loss(x, z, reduction="sum")
                kl_loss_z = 0.5 * torch.sum(torch.exp(z_var_z) + z_mu_z ** 2 - 1.0 - z_var_z)
                loss_G_adv = self.criterion_GAN(self.discriminator(y), self.real_labels) + \
                    self.criterion_GAN(self.discriminator(z), self.real_labels)
                loss_G = recon_loss_y * recon_weight + (kl_loss_y + kl_loss_z) * kl_weight \
                    + loss_G_adv * adv_weight + regen_loss * regen_weight
                loss_G.backward()
                self.G_optimizer.step()

                self.D_optimizer.zero_grad()
                real_loss = self.criterion_GAN(self.discriminator(x), self.real_labels)
                fake_loss_y = self.criterion_GAN(self.discriminator(y.detach()), self.fake_labels)
                fake_loss_z = self.criterion_GAN(self.discriminator(z.detach()), self.fake_labels)
                loss_D = (real_loss + fake_loss_y + fake_loss_z) / 3
                loss_D.backward()
                self.D_optimizer.step()

                train_loss_G += loss_G.item()
                train_loss_D += loss_D.item()
                if batch % 4 == 0:
                    print(f"Epoch [{epoch + 1}/{epochs}], Batch [{batch + 1}/{len(self.train_iterator)}], "
                          f"D Loss: {loss_D.item():.4f}, G Loss: {loss_G.item() / self.batch_size:.4f}")

            test_loss_g = self.test_epoch_vae()
            print(f"Epoch {epoch + 1}, Train G Loss: {train_loss_G / len(self.train_dataset):.4f}, "
                  f"Train D Loss: {train_loss_D / len(self.train_iterator):.4f}, Test G Loss: {test_loss_g:.4f}")


if __name__ == "__main__":
    train_dataset = SurfaceDataset(195, seed=1)
    test_dataset = SurfaceDataset(40, seed=2)
    trainer = VAEGANModelLoader(train_dataset, test_dataset, batch_size=10)
    trainer.train(epochs=5)
