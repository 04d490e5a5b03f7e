"""Small progressive-GAN style generator/discriminator on 16x16 grey-scale "sprites".

The discriminator ends with a minibatch-standard-deviation layer (as in ProGAN) so it can
tell when the generator collapses to a single output. Trained on a small custom set of images.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

IMG = 16
Z_DIM = 32
BATCH_SIZE = 8


class SpriteDataset(Dataset):
    """65 blob images: a bright gaussian spot at a random place on a dark background."""

    def __init__(self, n=65):
        g = torch.Generator().manual_seed(1)
        ys, xs = torch.meshgrid(torch.arange(IMG), torch.arange(IMG), indexing="ij")
        centres = torch.randint(3, IMG - 3, (n, 2), generator=g)
        self.images = []
        for cy, cx in centres.tolist():
            blob = torch.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / 6.0)
            self.images.append((blob * 2 - 1).unsqueeze(0).float())

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i]


class MinibatchStd(nn.Module):
    def forward(self, x):
        std = torch.std(x, dim=0)
        mean_std = std.mean()
        feat = mean_std.expand(x.size(0), 1, x.size(2), x.size(3))
        return torch.cat([x, feat], dim=1)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(Z_DIM, 64 * 4 * 4)
        self.net = nn.Sequential(
            nn.Upsample(scale_factor=2), nn.Conv2d(64, 32, 3, padding=1), nn.LeakyReLU(0.2),
            nn.Upsample(scale_factor=2), nn.Conv2d(32, 16, 3, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(16, 1, 1), nn.Tanh(),
        )

    def forward(self, z):
        return self.net(self.fc(z).view(-1, 64, 4, 4))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.LeakyReLU(0.2), nn.AvgPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.LeakyReLU(0.2), nn.AvgPool2d(2),
        )
        self.mbstd = MinibatchStd()
        self.head = nn.Sequential(
            nn.Conv2d(33, 32, 3, padding=1), nn.LeakyReLU(0.2),
            nn.Flatten(), nn.Linear(32 * 4 * 4, 1),
        )

    def forward(self, x):
        return self.head(self.mbstd(self.features(x)))


dataset = SpriteDataset()
loader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True)
G, D = Generator(), Discriminator()
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.99))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.99))
criterion = nn.BCEWithLogitsLoss()

step = 0
for epoch in range(6):
    for real in loader:
        b = real.size(0)
        z = torch.randn(b, Z_DIM)
        fake = G(z)

        d_real = D(real)
        d_fake = D(fake.detach())
        loss_d = criterion(d_real, torch.ones_like(d_real)) + criterion(d_fake, torch.zeros_like(d_fake))
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()

        g_out = D(fake)
        loss_g = criterion(g_out, torch.ones_like(g_out))
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()

        step += 1
        if step % 3 == 0:
            print(f"epoch {epoch} step {step:3d}  loss_D {loss_d.item():.4f}  loss_G {loss_g.item():.4f}")
    print(f"epoch {epoch} done  loss_D {loss_d.item():.4f}  loss_G {loss_g.item():.4f}")
