"""LapSRN x4 super-resolution (Laplacian pyramid network, progressive x2 / x4 reconstruction
with the L1 Charbonnier loss), following the paper's training setup: SGD with momentum 0.9,
weight decay 1e-4 and learning rate 1e-5, loss divided by the batch size.

Training pairs are built from synthetic grey-level patches (smooth shading, ramps and sharp
edged blobs), downsampled with antialiased bicubic interpolation to the x2 and x1 levels.
"""
import argparse
import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description="PyTorch LapSRN")
parser.add_argument("--batchSize", type=int, default=8, help="training batch size")
parser.add_argument("--nEpochs", type=int, default=2, help="number of epochs to train for")
parser.add_argument("--lr", type=float, default=1e-5, help="Learning Rate. Default=1e-5")
parser.add_argument("--step", type=int, default=100, help="decay the learning rate by 10 every n epochs")
parser.add_argument("--momentum", default=0.9, type=float, help="Momentum, Default: 0.9")
parser.add_argument("--weight-decay", "--wd", default=1e-4, type=float, help="weight decay, Default: 1e-4")
parser.add_argument("--features", type=int, default=32, help="feature channels of the embedding branch")
parser.add_argument("--depth", type=int, default=5, help="conv layers per pyramid level")


def get_upsample_filter(size):
    """Make a 2D bilinear kernel suitable for upsampling"""
    factor = (size + 1) // 2
    if size % 2 == 1:
        center = factor - 1
    else:
        center = factor - 0.5
    og = np.ogrid[:size, :size]
    filter = (1 - abs(og[0] - center) / factor) * (1 - abs(og[1] - center) / factor)
    return torch.from_numpy(filter).float()


class _Conv_Block(nn.Module):
    def __init__(self, ch, depth):
        super(_Conv_Block, self).__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Conv2d(ch, ch, kernel_size=3, stride=1, padding=1, bias=False),
                       nn.LeakyReLU(0.2, inplace=True)]
        layers += [nn.ConvTranspose2d(ch, ch, kernel_size=4, stride=2, padding=1, bias=False),
                   nn.LeakyReLU(0.2, inplace=True)]
        self.cov_block = nn.Sequential(*layers)

    def forward(self, x):
        return self.cov_block(x)


class Net(nn.Module):
    def __init__(self, ch=64, depth=10):
        super(Net, self).__init__()
        self.conv_input = nn.Conv2d(1, ch, kernel_size=3, stride=1, padding=1, bias=False)
        self.relu = nn.LeakyReLU(0.2, inplace=True)

        self.convt_I1 = nn.ConvTranspose2d(1, 1, kernel_size=4, stride=2, padding=1, bias=False)
        self.convt_R1 = nn.Conv2d(ch, 1, kernel_size=3, stride=1, padding=1, bias=False)
        self.convt_F1 = _Conv_Block(ch, depth)

        self.convt_I2 = nn.ConvTranspose2d(1, 1, kernel_size=4, stride=2, padding=1, bias=False)
        self.convt_R2 = nn.Conv2d(ch, 1, kernel_size=3, stride=1, padding=1, bias=False)
        self.convt_F2 = _Conv_Block(ch, depth)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
                if m.bias is not None:
                    m.bias.data.zero_()
            if isinstance(m, nn.ConvTranspose2d):
                c1, c2, h, w = m.weight.data.size()
                weight = get_upsample_filter(h)
                m.weight.data = weight.view(1, 1, h, w).repeat(c1, c2, 1, 1)

    def forward(self, x):
        out = self.relu(self.conv_input(x))

        convt_F1 = self.convt_F1(out)
        convt_I1 = self.convt_I1(x)
        convt_R1 = self.convt_R1(convt_F1)
        HR_2x = convt_I1 + convt_R1

        convt_F2 = self.convt_F2(convt_F1)
        convt_I2 = self.convt_I2(HR_2x)
        convt_R2 = self.convt_R2(convt_F2)
        HR_4x = convt_I2 + convt_R2
        return HR_2x, HR_4x


class L1_Charbonnier_loss(nn.Module):
    """L1 Charbonnierloss."""
    def __init__(self):
        super(L1_Charbonnier_loss, self).__init__()
        self.eps = 1e-6

    def forward(self, X, Y):
        diff = torch.add(X, -Y)
        error = torch.sqrt(diff * diff + self.eps)
        loss = torch.sum(error)
        return loss


class LapPyramidPatches(Dataset):
    """(LR, HR x2, HR x4) patch triplets, like the lap_pry_x4 h5 file."""

    def __init__(self, n, hr=48, seed=1):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(hr).float(), torch.arange(hr).float(), indexing="ij")
        patches = []
        for _ in range(n):
            img = 0.5 * torch.rand(1, generator=g) + 0.2 * torch.sin(
                xx / (3 + 5 * torch.rand(1, generator=g)) + yy / (4 + 4 * torch.rand(1, generator=g)))
            for _ in range(3):
                cx, cy, r = (torch.rand(3, generator=g) * torch.tensor([hr, hr, hr / 3])).tolist()
                img = torch.where((xx - cx) ** 2 + (yy - cy) ** 2 < (r + 2) ** 2, torch.rand(1, generator=g), img)
            patches.append(img.clamp(0, 1)[None])
        self.label_x4 = torch.stack(patches)
        self.label_x2 = F.interpolate(self.label_x4, scale_factor=0.5, mode="bicubic", antialias=True, align_corners=False)
        self.input = F.interpolate(self.label_x4, scale_factor=0.25, mode="bicubic", antialias=True, align_corners=False)

    def __len__(self):
        return len(self.input)

    def __getitem__(self, i):
        return self.input[i], self.label_x2[i], self.label_x4[i]


def adjust_learning_rate(epoch):
    """Sets the learning rate to the initial LR decayed by 10 every opt.step epochs"""
    return opt.lr * (0.1 ** (epoch // opt.step))


def psnr(pred, target):
    mse = F.mse_loss(pred.clamp(0, 1), target)
    return 10 * torch.log10(1.0 / mse)


def train(training_data_loader, optimizer, model, criterion, epoch):
    lr = adjust_learning_rate(epoch - 1)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    print("Epoch={}, lr={}".format(epoch, optimizer.param_groups[0]["lr"]))

    model.train()
    for iteration, batch in enumerate(training_data_loader, 1):
        input, label_x2, label_x4 = batch

        HR_2x, HR_4x = model(input)

        loss_x2 = criterion(HR_2x, label_x2) / opt.batchSize
        loss_x4 = criterion(HR_4x, label_x4) / opt.batchSize
        loss = loss_x2 + loss_x4

        optimizer.zero_grad()
        loss_x2.backward(retain_graph=True)
        loss_x4.backward()
        optimizer.step()

        if iteration % 8 == 0:
            print("===> Epoch[{}]({}/{}): Loss: {:.4f}".format(epoch, iteration, len(training_data_loader), loss.item()))


def validate(model, val_set):
    model.eval()
    with torch.no_grad():
        _, HR_4x = model(val_set.input)
    bicubic = F.interpolate(val_set.input, scale_factor=4, mode="bicubic", align_corners=False)
    print("===> Val PSNR x4: {:.2f} dB (bicubic {:.2f} dB)".format(
        psnr(HR_4x, val_set.label_x4).item(), psnr(bicubic, val_set.label_x4).item()))


def main():
    global opt
    opt = parser.parse_args()
    print(opt)

    random.seed(123)
    torch.manual_seed(123)

    print("===> Loading datasets")
    train_set = LapPyramidPatches(512, seed=1)
    val_set = LapPyramidPatches(32, seed=2)
    training_data_loader = DataLoader(dataset=train_set, batch_size=opt.batchSize, shuffle=True)

    print("===> Building model")
    model = Net(ch=opt.features, depth=opt.depth)
    criterion = L1_Charbonnier_loss()

    print("===> Setting Optimizer")
    optimizer = optim.SGD(model.parameters(), lr=opt.lr, momentum=opt.momentum, weight_decay=opt.weight_decay)

    print("===> Training")
    for epoch in range(1, opt.nEpochs + 1):
        train(training_data_loader, optimizer, model, criterion, epoch)
        validate(model, val_set)


if __name__ == "__main__":
    main()
