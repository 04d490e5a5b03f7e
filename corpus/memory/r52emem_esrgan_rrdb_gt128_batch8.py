"""ESRGAN-style x4 super-resolution, PSNR-oriented stage: RRDBNet generator trained
with L1 on random 128x128 HR patches (32x32 bicubic LR inputs), BasicSR layout.
Synthetic textures stand in for the DIV2K sub-images."""
import functools
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

opt = {
    'scale': 4,
    'GT_size': 128,
    'batch_size': 8,
    'n_workers': 0,
    'network_G': {'in_nc': 3, 'out_nc': 3, 'nf': 48, 'nb': 1, 'gc': 24},
    'lr_G': 2e-4,
    'niter': 8,
    'print_freq': 1,
}

torch.manual_seed(0)


def make_layer(block, n_layers):
    return nn.Sequential(*[block() for _ in range(n_layers)])


class ResidualDenseBlock_5C(nn.Module):
    def __init__(self, nf=64, gc=32, bias=True):
        super().__init__()
        self.conv1 = nn.Conv2d(nf, gc, 3, 1, 1, bias=bias)
        self.conv2 = nn.Conv2d(nf + gc, gc, 3, 1, 1, bias=bias)
        self.conv3 = nn.Conv2d(nf + 2 * gc, gc, 3, 1, 1, bias=bias)
        self.conv4 = nn.Conv2d(nf + 3 * gc, gc, 3, 1, 1, bias=bias)
        self.conv5 = nn.Conv2d(nf + 4 * gc, nf, 3, 1, 1, bias=bias)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

    def forward(self, x):
        x1 = self.lrelu(self.conv1(x))
        x2 = self.lrelu(self.conv2(torch.cat((x, x1), 1)))
        x3 = self.lrelu(self.conv3(torch.cat((x, x1, x2), 1)))
        x4 = self.lrelu(self.conv4(torch.cat((x, x1, x2, x3), 1)))
        x5 = self.conv5(torch.cat((x, x1, x2, x3, x4), 1))
        return x5 * 0.2 + x


class RRDB(nn.Module):
    def __init__(self, nf, gc=32):
        super().__init__()
        self.RDB1 = ResidualDenseBlock_5C(nf, gc)
        self.RDB2 = ResidualDenseBlock_5C(nf, gc)
        self.RDB3 = ResidualDenseBlock_5C(nf, gc)

    def forward(self, x):
        out = self.RDB1(x)
        out = self.RDB2(out)
        out = self.RDB3(out)
        return out * 0.2 + x


class RRDBNet(nn.Module):
    def __init__(self, in_nc, out_nc, nf, nb, gc=32):
        super().__init__()
        RRDB_block_f = functools.partial(RRDB, nf=nf, gc=gc)
        self.conv_first = nn.Conv2d(in_nc, nf, 3, 1, 1, bias=True)
        self.RRDB_trunk = make_layer(RRDB_block_f, nb)
        self.trunk_conv = nn.Conv2d(nf, nf, 3, 1, 1, bias=True)
        self.upconv1 = nn.Conv2d(nf, nf, 3, 1, 1, bias=True)
        self.upconv2 = nn.Conv2d(nf, nf, 3, 1, 1, bias=True)
        self.HRconv = nn.Conv2d(nf, nf, 3, 1, 1, bias=True)
        self.conv_last = nn.Conv2d(nf, out_nc, 3, 1, 1, bias=True)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

    def forward(self, x):
        fea = self.conv_first(x)
        trunk = self.trunk_conv(self.RRDB_trunk(fea))
        fea = fea + trunk
        fea = self.lrelu(self.upconv1(F.interpolate(fea, scale_factor=2, mode='nearest')))
        fea = self.lrelu(self.upconv2(F.interpolate(fea, scale_factor=2, mode='nearest')))
        out = self.conv_last(self.lrelu(self.HRconv(fea)))
        return out


class LQGTDataset(Dataset):
    def __init__(self, n, gt_size, scale, seed=0):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(gt_size).float(), torch.arange(gt_size).float(), indexing='ij')
        imgs = []
        for _ in range(n):
            img = torch.zeros(3, gt_size, gt_size)
            for _ in range(4):
                fx, fy = (torch.rand(2, generator=g) * 0.3).tolist()
                ph = float(torch.rand(1, generator=g)) * 2 * math.pi
                col = torch.rand(3, 1, 1, generator=g)
                img += col * torch.sin(fx * xx + fy * yy + ph)
            edge = (xx > float(torch.randint(20, 108, (1,), generator=g))).float()
            img = (img / 4 + 0.5 + 0.3 * edge).clamp(0, 1)
            imgs.append(img)
        self.GT = torch.stack(imgs)
        self.LQ = F.interpolate(self.GT, scale_factor=1 / scale, mode='bicubic', align_corners=False,
                                antialias=True).clamp(0, 1)

    def __len__(self):
        return len(self.GT)

    def __getitem__(self, i):
        return {'LQ': self.LQ[i], 'GT': self.GT[i]}


def psnr(sr, gt):
    mse = F.mse_loss(sr.clamp(0, 1), gt).item()
    return 10 * math.log10(1.0 / max(mse, 1e-10))


train_set = LQGTDataset(64, opt['GT_size'], opt['scale'])
train_loader = DataLoader(train_set, batch_size=opt['batch_size'], shuffle=True,
                          num_workers=opt['n_workers'], drop_last=True)
print('Number of train images: {:,d}, iters: {:,d}'.format(len(train_set), len(train_loader)))

netG = RRDBNet(**opt['network_G'])
cri_pix = nn.L1Loss()
optimizer_G = torch.optim.Adam(netG.parameters(), lr=opt['lr_G'], betas=(0.9, 0.99))

current_step = 0
epoch = 0
t0 = time.time()
while current_step < opt['niter']:
    epoch += 1
    for train_data in train_loader:
        current_step += 1
        var_L = train_data['LQ']
        real_H = train_data['GT']

        optimizer_G.zero_grad()
        fake_H = netG(var_L)
        l_pix = cri_pix(fake_H, real_H)
        l_pix.backward()
        optimizer_G.step()

        if current_step % opt['print_freq'] == 0:
            print('<epoch:{:3d}, iter:{:4d}> l_pix: {:.4e} psnr: {:.2f} dB ({:.1f}s)'.format(
                epoch, current_step, l_pix.item(), psnr(fake_H.detach(), real_H), time.time() - t0))
        if current_step >= opt['niter']:
            break
print('End of training.')
