"""Manifold matching GAN: a generator trained against a metric-learning network.

The metric-learning (ML) network embeds real and generated images; the generator is updated
so that the pairwise-distance structure and the centroid of its embeddings match those of the
real batch, and the ML network is trained with a triplet loss (anchor and positive real,
negative fake). Training images are resized to --size by the dataset.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description='Train Image Generation Models')
parser.add_argument('--size', default=256, type=int, help='training images size')
parser.add_argument('--out_dim', default=10, type=int, help='ML network output dim')
parser.add_argument('--num_epochs', default=2, type=int, help='train epoch number')
parser.add_argument('--num_images', default=128, type=int, help='number of training images')
parser.add_argument('--batch_size', default=64, type=int, help='train batch size')
parser.add_argument('--lr', default=1e-4, type=float, help='train learning rate')
parser.add_argument('--beta1', default=0.0, type=float, help='Adam optimizer beta1')
parser.add_argument('--beta2', default=0.9, type=float, help='Adam optimizer beta2')
parser.add_argument('--margin', default=1, type=float, help='triplet loss margin')
parser.add_argument('--alpha', default=1e-2, type=float, help='triplet loss direction guidance weight parameter')


class FaceLikeDataset(Dataset):
    """Smooth synthetic 'portraits': a bright ellipse on a coloured background, resized to `size`."""

    def __init__(self, n, size, seed=0):
        self.n = n
        self.size = size
        self.seed = seed

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        g = torch.Generator().manual_seed(self.seed * 100003 + index)
        base = 32
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, base), torch.linspace(-1, 1, base), indexing='ij')
        cx, cy = (torch.rand(2, generator=g) - 0.5) * 0.4
        rx, ry = 0.35 + 0.2 * torch.rand(2, generator=g)
        face = (((xs - cx) / rx) ** 2 + ((ys - cy) / ry) ** 2 < 1).float()
        bg = torch.rand(3, 1, 1, generator=g)
        skin = 0.5 + 0.5 * torch.rand(3, 1, 1, generator=g)
        img = bg * (1 - face) + skin * face + 0.03 * torch.randn(3, base, base, generator=g)
        img = F.interpolate(img[None], size=(self.size, self.size), mode='bicubic', align_corners=False)[0]
        return img.clamp(0, 1)


class UpsampleConv(nn.Module):
    def __init__(self, n_input, n_output, k_size):
        super().__init__()
        self.model = nn.Sequential(
            nn.PixelShuffle(2),
            nn.Conv2d(n_input, n_output, k_size, stride=1, padding=(k_size - 1) // 2, bias=True),
        )

    def forward(self, x):
        x = x.repeat((1, 4, 1, 1))
        return self.model(x)


class ResidualBlockUp(nn.Module):
    def __init__(self, n_input, n_output, k_size):
        super().__init__()
        self.conv_shortcut = UpsampleConv(n_input, n_output, k_size)
        self.model = nn.Sequential(
            nn.BatchNorm2d(n_input),
            nn.ReLU(inplace=True),
            UpsampleConv(n_input, n_output, k_size),
            nn.BatchNorm2d(n_output),
            nn.ReLU(inplace=True),
            nn.Conv2d(n_output, n_output, k_size, padding=(k_size - 1) // 2),
        )

    def forward(self, x):
        return self.conv_shortcut(x) + self.model(x)


class Generator64(nn.Module):
    def __init__(self, nz=128, n=16):
        super().__init__()
        self.nz = nz
        self.n = n
        self.linear1 = nn.Linear(self.nz, n * 4 * 4)
        self.model = nn.Sequential(
            ResidualBlockUp(n, n, 3),
            ResidualBlockUp(n, n, 3),
            ResidualBlockUp(n, n, 3),
            ResidualBlockUp(n, n, 3),
            nn.BatchNorm2d(n),
            nn.ReLU(inplace=True),
            nn.Conv2d(n, 3, 3, padding=1),
            nn.Sigmoid(),
        )

    def forward(self, x):
        x = x.view(-1, self.nz)
        x = self.linear1(x).view(-1, self.n, 4, 4)
        return self.model(x)


class ML64(nn.Module):
    def __init__(self, out_dim):
        super().__init__()
        dim = 32
        self.image_to_features = nn.Sequential(
            nn.Conv2d(3, dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(dim, 2 * dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(2 * dim, 4 * dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(4 * dim, 8 * dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(8 * dim, 16 * dim, 4, 2, 1),
            nn.LeakyReLU(0.2),
            nn.MaxPool2d(kernel_size=2, stride=2),
        )
        self.features_to_prob = nn.Linear(16 * dim, out_dim)

    def forward(self, x):
        batch_size = x.size()[0]
        x = self.image_to_features(x)
        x = x.view(batch_size, -1)
        return self.features_to_prob(x)


class TripletLoss(nn.Module):
    def __init__(self, margin, alpha):
        super().__init__()
        self.margin = margin
        self.alpha = alpha

    def forward(self, anchor, positive, negative):
        distance_positive = (anchor - positive).pow(2).sum(1)
        distance_negative = (anchor - negative).pow(2).sum(1)
        cos = nn.CosineSimilarity(dim=1, eps=1e-6)
        cos_reg = cos(negative - anchor, positive - anchor).sum(0)
        losses = F.relu(distance_positive - distance_negative + self.margin - self.alpha * cos_reg)
        return losses.mean()


def pairwise_distances(x, y):
    x_norm = (x ** 2).sum(1).view(-1, 1)
    y_t = torch.transpose(y, 0, 1)
    y_norm = (y ** 2).sum(1).view(1, -1)
    dist = x_norm + y_norm - 2.0 * torch.mm(x, y_t)
    return torch.clamp(dist, 0.0, math.inf)


if __name__ == '__main__':
    opt = parser.parse_args()
    torch.manual_seed(0)

    SIZE = opt.size
    batch_size = opt.batch_size

    trainset = FaceLikeDataset(opt.num_images, size=SIZE)
    train_loader = DataLoader(trainset, batch_size=batch_size, shuffle=True, num_workers=0)

    device = torch.device('cpu')

    netG = Generator64().to(device)
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, opt.beta2), eps=1e-6)

    netML = ML64(out_dim=opt.out_dim).to(device)
    optimizerML = optim.Adam(netML.parameters(), lr=opt.lr, betas=(0.5, 0.999), eps=1e-3)

    triplet_ = TripletLoss(opt.margin, opt.alpha).to(device)

    print(f'{len(trainset)} images of size {SIZE}, batch size {batch_size}')

    for epoch in range(1, opt.num_epochs + 1):
        netG.train()
        netML.train()

        for it, target in enumerate(train_loader):
            real_img = target.to(device)
            batch_size = real_img.size()[0]
            if batch_size != opt.batch_size:
                continue

            z = torch.randn(batch_size, 128, 1, 1).to(device)

            # generator step: match the manifold of real embeddings
            netG.zero_grad()
            fake_img = netG(z)
            ml_real_out = netML(real_img)
            ml_fake_out = netML(fake_img)

            pd_r = pairwise_distances(ml_real_out, ml_real_out)
            pd_f = pairwise_distances(ml_fake_out, ml_fake_out)
            p_dist = torch.dist(pd_r, pd_f, 2)
            c_dist = torch.dist(ml_real_out.mean(0), ml_fake_out.mean(0), 2)

            g_loss = p_dist + c_dist
            g_loss.backward()
            optimizerG.step()

            # metric learning step
            netML.zero_grad()
            fake_img = netG(z)
            ml_real_out = netML(real_img)
            ml_fake_out = netML(fake_img.detach())

            r1 = torch.randperm(batch_size)
            r2 = torch.randperm(batch_size)
            ml_real_out_shuffle = ml_real_out[r1[:, None]].view(ml_real_out.shape[0], ml_real_out.shape[-1])
            ml_fake_out_shuffle = ml_fake_out[r2[:, None]].view(ml_fake_out.shape[0], ml_fake_out.shape[-1])

            triplet_loss = triplet_(ml_real_out, ml_real_out_shuffle, ml_fake_out_shuffle)
            triplet_loss.backward()
            optimizerML.step()

            print(f'[{epoch}/{opt.num_epochs}] it {it}  c_dist {c_dist.item():.4f}  '
                  f'p_dist {p_dist.item():.4f}  triplet_loss {triplet_loss.item():.4f}')
