"""InfoGAN (LSGAN adversarial loss + categorical/continuous information loss) on a small
synthetic 8x8 'glyph' dataset with 10 classes."""
import itertools

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

n_epochs = 5
batch_size = 32
lr = 0.001
b1, b2 = 0.5, 0.999
latent_dim = 16
code_dim = 2
n_classes = 10
img_size = 8
channels = 1

FloatTensor = torch.FloatTensor
LongTensor = torch.LongTensor


def make_glyphs(n):
    """Each class is a fixed random stroke pattern on a 8x8 canvas, jittered and noised."""
    g = torch.Generator().manual_seed(123)
    protos = (torch.rand(n_classes, img_size, img_size, generator=g) > 0.6).float()
    protos = nn.functional.avg_pool2d(protos.unsqueeze(1), 3, 1, 1).squeeze(1).clamp(0, 1)
    labels = torch.randint(0, n_classes, (n,), generator=g)
    imgs = protos[labels]
    shifts = torch.randint(-1, 2, (n, 2), generator=g)
    imgs = torch.stack([torch.roll(im, (int(s[0]), int(s[1])), (0, 1)) for im, s in zip(imgs, shifts)])
    imgs = imgs + 0.05 * torch.randn(imgs.shape, generator=g)
    imgs = imgs.clamp(0, 1) * 2 - 1
    return imgs.unsqueeze(1), labels


def weights_init_normal(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight.data, 1.0, 0.02)
        torch.nn.init.constant_(m.bias.data, 0.0)


def to_categorical(y, num_columns):
    y_cat = np.zeros((y.shape[0], num_columns))
    y_cat[range(y.shape[0]), y] = 1.
    return FloatTensor(y_cat)


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        input_dim = latent_dim + n_classes + code_dim
        self.init_size = img_size // 4
        self.l1 = nn.Sequential(nn.Linear(input_dim, 32 * self.init_size ** 2))
        self.conv_blocks = nn.Sequential(
            nn.BatchNorm2d(32),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(32, 32, 3, stride=1, padding=1),
            nn.BatchNorm2d(32, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(32, 16, 3, stride=1, padding=1),
            nn.BatchNorm2d(16, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(16, channels, 3, stride=1, padding=1),
            nn.Tanh(),
        )

    def forward(self, noise, labels, code):
        gen_input = torch.cat((noise, labels, code), -1)
        out = self.l1(gen_input)
        out = out.view(out.shape[0], 32, self.init_size, self.init_size)
        return self.conv_blocks(out)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        def discriminator_block(in_filters, out_filters, bn=True):
            block = [nn.Conv2d(in_filters, out_filters, 3, 2, 1),
                     nn.LeakyReLU(0.2, inplace=True),
                     nn.Dropout2d(0.25)]
            if bn:
                block.append(nn.BatchNorm2d(out_filters, 0.8))
            return block

        self.conv_blocks = nn.Sequential(
            *discriminator_block(channels, 16, bn=False),
            *discriminator_block(16, 32),
            *discriminator_block(32, 64),
        )
        ds_size = img_size // 2 ** 3
        self.adv_layer = nn.Sequential(nn.Linear(64 * ds_size ** 2, 1))
        self.aux_layer = nn.Sequential(nn.Linear(64 * ds_size ** 2, n_classes))
        self.latent_layer = nn.Sequential(nn.Linear(64 * ds_size ** 2, code_dim))

    def forward(self, img):
        out = self.conv_blocks(img)
        out = out.view(out.shape[0], -1)
        return self.adv_layer(out), self.aux_layer(out), self.latent_layer(out)


adversarial_loss = torch.nn.MSELoss()
categorical_loss = torch.nn.CrossEntropyLoss()
continuous_loss = torch.nn.MSELoss()
lambda_cat = 1
lambda_con = 0.1

generator = Generator()
discriminator = Discriminator()
generator.apply(weights_init_normal)
discriminator.apply(weights_init_normal)

imgs_all, labels_all = make_glyphs(960)
dataloader = DataLoader(TensorDataset(imgs_all, labels_all), batch_size=batch_size, shuffle=True)

optimizer_G = torch.optim.Adam(generator.parameters(), lr=lr, betas=(b1, b2))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(b1, b2))
optimizer_info = torch.optim.Adam(itertools.chain(generator.parameters(), discriminator.parameters()),
                                  lr=lr, betas=(b1, b2))

for epoch in range(n_epochs):
    d_sum = g_sum = info_sum = acc_sum = 0.0
    for i, (imgs, labels) in enumerate(dataloader):
        bs = imgs.shape[0]
        valid = FloatTensor(bs, 1).fill_(1.0)
        fake = FloatTensor(bs, 1).fill_(0.0)
        real_imgs = imgs.type(FloatTensor)

        # Train Generator
        optimizer_G.zero_grad()
        z = FloatTensor(np.random.normal(0, 1, (bs, latent_dim)))
        label_input = to_categorical(np.random.randint(0, n_classes, bs), num_columns=n_classes)
        code_input = FloatTensor(np.random.uniform(-1, 1, (bs, code_dim)))
        gen_imgs = generator(z, label_input, code_input)
        validity, _, _ = discriminator(gen_imgs)
        g_loss = adversarial_loss(validity, valid)
        g_loss.backward()
        optimizer_G.step()

        # Train Discriminator
        optimizer_D.zero_grad()
        real_pred, _, _ = discriminator(real_imgs)
        d_real_loss = adversarial_loss(real_pred, valid)
        fake_pred, _, _ = discriminator(gen_imgs.detach())
        d_fake_loss = adversarial_loss(fake_pred, fake)
        d_loss = (d_real_loss + d_fake_loss) / 2
        d_loss.backward()
        optimizer_D.step()

        # Information Loss
        optimizer_info.zero_grad()
        sampled_labels = np.random.randint(0, n_classes, bs)
        gt_labels = LongTensor(sampled_labels)
        z = FloatTensor(np.random.normal(0, 1, (bs, latent_dim)))
        label_input = to_categorical(sampled_labels, num_columns=n_classes)
        code_input = FloatTensor(np.random.uniform(-1, 1, (bs, code_dim)))
        gen_imgs = generator(z, label_input, code_input)
        _, pred_label, pred_code = discriminator(gen_imgs)
        info_loss = lambda_cat * categorical_loss(pred_label, gt_labels) + \
            lambda_con * continuous_loss(pred_code, code_input)
        info_loss.backward()
        optimizer_info.step()

        d_sum += d_loss.item()
        g_sum += g_loss.item()
        info_sum += info_loss.item()
        acc_sum += (pred_label.argmax(1) == gt_labels).float().mean().item()
        if epoch == 0 and i < 3:
            print("[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f] [info loss: %f]"
                  % (epoch, n_epochs, i, len(dataloader), d_loss.item(), g_loss.item(), info_loss.item()))
    n = len(dataloader)
    print("[Epoch %d/%d] mean [D loss: %.4f] [G loss: %.4f] [info loss: %.4f] [code acc: %.3f]"
          % (epoch, n_epochs, d_sum / n, g_sum / n, info_sum / n, acc_sum / n))
