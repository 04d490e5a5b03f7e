"""Image-to-image translation (pix2pix style) with a SAGAN self-attention block.

A ResNet-style generator maps a degraded image (noisy, washed-out colours) to the clean one,
trained with an L1 loss plus a PatchGAN discriminator. Following SAGAN, a Self_Attn block lets
every spatial position of a feature map attend to every other position.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(5)

IMG_SIZE = 96


class PairedImages(Dataset):
    def __init__(self, n, size=IMG_SIZE):
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, size), torch.linspace(-1, 1, size), indexing="ij")
        clean = []
        for _ in range(n):
            f = torch.rand(3, 1, 1) * 6 + 1
            p = torch.rand(3, 1, 1) * 6.28
            clean.append(torch.tanh(torch.sin(f * xx + p) + torch.cos(f * yy - p)))
        self.clean = torch.stack(clean)
        gray = self.clean.mean(1, keepdim=True)
        self.degraded = 0.3 * self.clean + 0.7 * gray + 0.2 * torch.randn_like(self.clean)

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, i):
        return self.degraded[i], self.clean[i]


class Self_Attn(nn.Module):
    """Self attention layer (SAGAN)."""

    def __init__(self, in_dim):
        super().__init__()
        self.query_conv = nn.Conv2d(in_dim, in_dim // 8, kernel_size=1)
        self.key_conv = nn.Conv2d(in_dim, in_dim // 8, kernel_size=1)
        self.value_conv = nn.Conv2d(in_dim, in_dim, kernel_size=1)
        self.gamma = nn.Parameter(torch.zeros(1))
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        m_batchsize, C, width, height = x.size()
        proj_query = self.query_conv(x).view(m_batchsize, -1, width * height).permute(0, 2, 1)  # B x N x C'
        proj_key = self.key_conv(x).view(m_batchsize, -1, width * height)  # B x C' x N
        energy = torch.bmm(proj_query, proj_key)  # B x N x N
        attention = self.softmax(energy)
        proj_value = self.value_conv(x).view(m_batchsize, -1, width * height)  # B x C x N
        out = torch.bmm(proj_value, attention.permute(0, 2, 1))
        out = out.view(m_batchsize, C, width, height)
        out = self.gamma * out + x
        return out, attention


class ResnetBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv_block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3), nn.InstanceNorm2d(dim), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3), nn.InstanceNorm2d(dim))

    def forward(self, x):
        return x + self.conv_block(x)


class ResnetGenerator(nn.Module):
    def __init__(self, input_nc=3, output_nc=3, ngf=16, n_blocks=2):
        super().__init__()
        self.stem = nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(input_nc, ngf, 7), nn.InstanceNorm2d(ngf), nn.ReLU(True))
        self.attn1 = Self_Attn(ngf)
        self.down = nn.Sequential(
            nn.Conv2d(ngf, ngf * 2, 3, stride=2, padding=1), nn.InstanceNorm2d(ngf * 2), nn.ReLU(True),
            nn.Conv2d(ngf * 2, ngf * 4, 3, stride=2, padding=1), nn.InstanceNorm2d(ngf * 4), nn.ReLU(True))
        self.blocks = nn.Sequential(*[ResnetBlock(ngf * 4) for _ in range(n_blocks)])
        self.up = nn.Sequential(
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 3, stride=2, padding=1, output_padding=1), nn.InstanceNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 3, stride=2, padding=1, output_padding=1), nn.InstanceNorm2d(ngf), nn.ReLU(True))
        self.head = nn.Sequential(nn.ReflectionPad2d(3), nn.Conv2d(ngf, output_nc, 7), nn.Tanh())

    def forward(self, x):
        out = self.stem(x)
        out, p1 = self.attn1(out)
        out = self.down(out)
        out = self.blocks(out)
        out = self.up(out)
        return self.head(out)


class NLayerDiscriminator(nn.Module):
    def __init__(self, input_nc=6, ndf=16):
        super().__init__()
        self.model = nn.Sequential(
            nn.Conv2d(input_nc, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1), nn.InstanceNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 1))

    def forward(self, x):
        return self.model(x)


if __name__ == "__main__":
    loader = DataLoader(PairedImages(128), batch_size=8, shuffle=True)
    netG, netD = ResnetGenerator(), NLayerDiscriminator()
    optimizer_G = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    criterionGAN = nn.BCEWithLogitsLoss()
    lambda_L1 = 100.0

    for epoch in range(2):
        for i, (real_A, real_B) in enumerate(loader):
            fake_B = netG(real_A)

            optimizer_D.zero_grad()
            pred_fake = netD(torch.cat((real_A, fake_B.detach()), 1))
            pred_real = netD(torch.cat((real_A, real_B), 1))
            loss_D = 0.5 * (criterionGAN(pred_fake, torch.zeros_like(pred_fake))
                            + criterionGAN(pred_real, torch.ones_like(pred_real)))
            loss_D.backward()
            optimizer_D.step()

            optimizer_G.zero_grad()
            pred_fake = netD(torch.cat((real_A, fake_B), 1))
            loss_G_GAN = criterionGAN(pred_fake, torch.ones_like(pred_fake))
            loss_G_L1 = F.l1_loss(fake_B, real_B) * lambda_L1
            loss_G = loss_G_GAN + loss_G_L1
            loss_G.backward()
            optimizer_G.step()

            if i % 8 == 0:
                print(f"(epoch: {epoch}, iters: {i}) G_GAN: {loss_G_GAN.item():.3f} "
                      f"G_L1: {loss_G_L1.item():.3f} D: {loss_D.item():.3f}")
