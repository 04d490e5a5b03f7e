"""Conditional GAN (label embedding concatenated to noise and to the flattened image),
least-squares adversarial loss, on synthetic 8x8 "glyph" images of 4 classes."""
import argparse
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--n_epochs", type=int, default=8)
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.0002)
parser.add_argument("--b1", type=float, default=0.5)
parser.add_argument("--b2", type=float, default=0.999)
parser.add_argument("--latent_dim", type=int, default=16)
parser.add_argument("--n_classes", type=int, default=4)
parser.add_argument("--img_size", type=int, default=8)
parser.add_argument("--channels", type=int, default=1)
opt = parser.parse_args()
print(opt)

torch.manual_seed(0)
np.random.seed(0)

img_shape = (opt.channels, opt.img_size, opt.img_size)


def make_templates():
    t = -torch.ones(opt.n_classes, opt.img_size, opt.img_size)
    t[0, 3:5, :] = 1.0            # horizontal bar
    t[1, :, 3:5] = 1.0            # vertical bar
    t[2].fill_diagonal_(1.0)      # diagonal
    t[2, 1:, :-1] += torch.eye(opt.img_size - 1) * 2
    t[3, 1:7, 1] = 1.0            # box
    t[3, 1:7, 6] = 1.0
    t[3, 1, 1:7] = 1.0
    t[3, 6, 1:7] = 1.0
    return t.clamp(-1, 1)


TEMPLATES = make_templates()


class GlyphDataset(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.labels = torch.randint(0, opt.n_classes, (n,), generator=g)
        shift = torch.randint(-1, 2, (n,), generator=g)
        imgs = []
        for lab, s in zip(self.labels.tolist(), shift.tolist()):
            imgs.append(torch.roll(TEMPLATES[lab], shifts=s, dims=lab % 2))
        imgs = torch.stack(imgs) + 0.15 * torch.randn(n, opt.img_size, opt.img_size, generator=g)
        self.imgs = imgs.clamp(-1, 1).unsqueeze(1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.imgs[i], self.labels[i]


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()

        self.label_emb = nn.Embedding(opt.n_classes, opt.n_classes)

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(opt.latent_dim + opt.n_classes, 64, normalize=False),
            *block(64, 128),
            *block(128, 256),
            nn.Linear(256, int(np.prod(img_shape))),
            nn.Tanh()
        )

    def forward(self, noise, labels):
        gen_input = torch.cat((self.label_emb(labels), noise), -1)
        img = self.model(gen_input)
        img = img.view(img.size(0), *img_shape)
        return img


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        self.label_embedding = nn.Embedding(opt.n_classes, opt.n_classes)

        self.model = nn.Sequential(
            nn.Linear(opt.n_classes + int(np.prod(img_shape)), 256),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(256, 256),
            nn.Dropout(0.4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(256, 1),
        )

    def forward(self, img, labels):
        d_in = torch.cat((img.view(img.size(0), -1), self.label_embedding(labels)), -1)
        validity = self.model(d_in)
        return validity


@torch.no_grad()
def conditional_accuracy(generator, n=400):
    generator.eval()
    z = torch.randn(n, opt.latent_dim)
    labels = torch.arange(n) % opt.n_classes
    imgs = generator(z, labels).view(n, -1)
    d = torch.cdist(imgs, TEMPLATES.view(opt.n_classes, -1))
    pred = d.argmin(1)
    generator.train()
    return (pred == labels).float().mean().item(), d.gather(1, labels[:, None]).mean().item()


adversarial_loss = torch.nn.MSELoss()

generator = Generator()
discriminator = Discriminator()

dataloader = DataLoader(GlyphDataset(1600), batch_size=opt.batch_size, shuffle=True)

optimizer_G = torch.optim.Adam(generator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))

acc, dist = conditional_accuracy(generator)
print("[init] label-conditional template accuracy %.3f  dist to own template %.3f" % (acc, dist))

for epoch in range(opt.n_epochs):
    g_loss_epoch = 0
    d_loss_epoch = 0
    for i, (imgs, labels) in enumerate(dataloader):

        batch_size = imgs.shape[0]

        valid = torch.ones(batch_size, 1)
        fake = torch.zeros(batch_size, 1)

        real_imgs = imgs.float()
        labels = labels.long()

        #  Train Generator
        optimizer_G.zero_grad()

        z = torch.tensor(np.random.normal(0, 1, (batch_size, opt.latent_dim)), dtype=torch.float32)
        gen_labels = torch.tensor(np.random.randint(0, opt.n_classes, batch_size), dtype=torch.long)

        gen_imgs = generator(z, gen_labels)

        validity = discriminator(gen_imgs, gen_labels)
        g_loss = adversarial_loss(validity, valid)

        g_loss.backward()
        optimizer_G.step()

        #  Train Discriminator
        optimizer_D.zero_grad()

        validity_real = discriminator(real_imgs, labels)
        d_real_loss = adversarial_loss(validity_real, valid)

        validity_fake = discriminator(gen_imgs.detach(), gen_labels)
        d_fake_loss = adversarial_loss(validity_fake, fake)

        d_loss = (d_real_loss + d_fake_loss) / 2

        d_loss.backward()
        optimizer_D.step()

        g_loss_epoch += g_loss.item() / len(dataloader)
        d_loss_epoch += d_loss.item() / len(dataloader)

    acc, dist = conditional_accuracy(generator)
    print(
        "[Epoch %d/%d] [D loss: %f] [G loss: %f] [cond acc: %.3f] [dist: %.3f]"
        % (epoch, opt.n_epochs, d_loss_epoch, g_loss_epoch, acc, dist)
    )
