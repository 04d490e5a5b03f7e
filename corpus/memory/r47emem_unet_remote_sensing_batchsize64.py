"""U-Net (jakeoung/Unet_pytorch layout: five conv stages 16..256, transposed-conv
upsampling with skip concatenation, sigmoid output, MSE) for building segmentation
on remote-sensing tiles.

Offline stand-in for the tiles: grayscale 48x48 crops with bright rectangular
roofs and roads on a textured background; the mask marks the roofs."""
import argparse
import time

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument('--workers', type=int, help='number of data loading workers', default=0)
parser.add_argument('--batchSize', type=int, default=64, help='input batch size')
parser.add_argument('--niter', type=int, default=3, help='number of epochs to train for')
parser.add_argument('--lr', type=float, default=0.01, help='learning rate, default=0.01')
parser.add_argument('--imageSize', type=int, default=48, help='tile size')
parser.add_argument('--useBN', action='store_true', default=True, help='enables batch normalization')
args = parser.parse_args()
print(args)
torch.manual_seed(0)


class RemoteSensingTiles(Dataset):
    def __init__(self, n, size, seed=0):
        self.n, self.size, self.seed = n, size, seed

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        g = torch.Generator().manual_seed(self.seed * 10007 + idx)
        s = self.size
        img = 0.3 + 0.08 * torch.randn(1, s, s, generator=g)
        mask = torch.zeros(1, s, s)
        r = int(torch.randint(0, s - 4, (1,), generator=g))
        img[0, r:r + 3, :] += 0.25
        for _ in range(int(torch.randint(2, 6, (1,), generator=g))):
            h, w = [int(v) for v in torch.randint(5, 13, (2,), generator=g)]
            y0 = int(torch.randint(0, s - h, (1,), generator=g))
            x0 = int(torch.randint(0, s - w, (1,), generator=g))
            img[0, y0:y0 + h, x0:x0 + w] = 0.75 + 0.05 * torch.randn(h, w, generator=g)
            mask[0, y0:y0 + h, x0:x0 + w] = 1.0
        return img, mask


def add_conv_stage(dim_in, dim_out, kernel_size=3, stride=1, padding=1, bias=True, useBN=False):
    if useBN:
        return nn.Sequential(
            nn.Conv2d(dim_in, dim_out, kernel_size=kernel_size, stride=stride, padding=padding, bias=bias),
            nn.BatchNorm2d(dim_out),
            nn.LeakyReLU(0.1),
            nn.Conv2d(dim_out, dim_out, kernel_size=kernel_size, stride=stride, padding=padding, bias=bias),
            nn.BatchNorm2d(dim_out),
            nn.LeakyReLU(0.1)
        )
    return nn.Sequential(
        nn.Conv2d(dim_in, dim_out, kernel_size=kernel_size, stride=stride, padding=padding, bias=bias),
        nn.ReLU(),
        nn.Conv2d(dim_out, dim_out, kernel_size=kernel_size, stride=stride, padding=padding, bias=bias),
        nn.ReLU()
    )


def upsample(ch_coarse, ch_fine):
    return nn.Sequential(
        nn.ConvTranspose2d(ch_coarse, ch_fine, 4, 2, 1, bias=False),
        nn.ReLU()
    )


class Net(nn.Module):
    def __init__(self, useBN=False):
        super(Net, self).__init__()
        self.conv1 = add_conv_stage(1, 16, useBN=useBN)
        self.conv2 = add_conv_stage(16, 32, useBN=useBN)
        self.conv3 = add_conv_stage(32, 64, useBN=useBN)
        self.conv4 = add_conv_stage(64, 128, useBN=useBN)
        self.conv5 = add_conv_stage(128, 256, useBN=useBN)

        self.conv4m = add_conv_stage(256, 128, useBN=useBN)
        self.conv3m = add_conv_stage(128, 64, useBN=useBN)
        self.conv2m = add_conv_stage(64, 32, useBN=useBN)
        self.conv1m = add_conv_stage(32, 16, useBN=useBN)

        self.conv0 = nn.Sequential(nn.Conv2d(16, 1, 3, 1, 1), nn.Sigmoid())
        self.max_pool = nn.MaxPool2d(2)

        self.upsample54 = upsample(256, 128)
        self.upsample43 = upsample(128, 64)
        self.upsample32 = upsample(64, 32)
        self.upsample21 = upsample(32, 16)

        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)) and m.bias is not None:
                m.bias.data.zero_()

    def forward(self, x):
        conv1_out = self.conv1(x)
        conv2_out = self.conv2(self.max_pool(conv1_out))
        conv3_out = self.conv3(self.max_pool(conv2_out))
        conv4_out = self.conv4(self.max_pool(conv3_out))
        conv5_out = self.conv5(self.max_pool(conv4_out))

        conv5m_out = torch.cat((self.upsample54(conv5_out), conv4_out), 1)
        conv4m_out = self.conv4m(conv5m_out)
        conv4m_out_ = torch.cat((self.upsample43(conv4m_out), conv3_out), 1)
        conv3m_out = self.conv3m(conv4m_out_)
        conv3m_out_ = torch.cat((self.upsample32(conv3m_out), conv2_out), 1)
        conv2m_out = self.conv2m(conv3m_out_)
        conv2m_out_ = torch.cat((self.upsample21(conv2m_out), conv1_out), 1)
        conv1m_out = self.conv1m(conv2m_out_)
        return self.conv0(conv1m_out)


dataset = RemoteSensingTiles(128, args.imageSize)
train_loader = DataLoader(dataset, batch_size=args.batchSize, shuffle=True, num_workers=args.workers)

model = Net(args.useBN)
optimizer = optim.Adagrad(model.parameters(), lr=args.lr)
model.train()


def train(epoch):
    loss_fn = nn.MSELoss()
    loss_sum = 0
    t0 = time.time()
    for i, (x, y_true) in enumerate(train_loader):
        y_pred = model(x)
        loss = loss_fn(y_pred, y_true)

        optimizer.zero_grad()
        loss.backward()
        loss_sum += loss.item()
        optimizer.step()

        if i % 5 == 0:
            print('batch no.: {}, loss: {:.4f}'.format(i, loss.item()))

    print('epoch: {}, epoch loss: {:.4f} ({:.1f}s)'.format(epoch, loss_sum / len(train_loader), time.time() - t0))


for epoch in range(args.niter):
    train(epoch)
