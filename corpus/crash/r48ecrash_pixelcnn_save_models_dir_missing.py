"""PixelCNN-style autoregressive model on small quantized images (a scaled-down pixel-cnn-pp
main.py): masked convolutions, gated residual blocks, per-pixel softmax over 8 intensity levels,
bits/dim printed every few iterations, a checkpoint saved every save_interval epochs."""
import os
import tempfile
import time
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

parser = argparse.ArgumentParser()
parser.add_argument('-l', '--lr', type=float, default=0.0002 * 10)
parser.add_argument('-r', '--nr_resnet', type=int, default=2)
parser.add_argument('-n', '--nr_filters', type=int, default=32)
parser.add_argument('-b', '--batch_size', type=int, default=16)
parser.add_argument('-x', '--max_epochs', type=int, default=3)
parser.add_argument('-p', '--print_every', type=int, default=10)
parser.add_argument('-s', '--seed', type=int, default=1)
parser.add_argument('--save_interval', type=int, default=1)
parser.add_argument('--levels', type=int, default=8)
args = parser.parse_args()

torch.manual_seed(args.seed)
np.random.seed(args.seed)


class Shapes(Dataset):
    def __init__(self, n, size=12, levels=8):
        rng = np.random.RandomState(0 if n > 100 else 1)
        imgs = np.zeros((n, 1, size, size), dtype=np.float32)
        for i in range(n):
            r0, c0 = rng.randint(0, size - 4, size=2)
            h, w = rng.randint(3, 6, size=2)
            imgs[i, 0, r0:r0 + h, c0:c0 + w] = rng.uniform(0.5, 1.0)
            imgs[i] += rng.uniform(0, 0.15, size=(1, size, size))
        self.x = torch.from_numpy(np.clip(np.floor(imgs * levels), 0, levels - 1)).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *a, **k):
        super().__init__(*a, **k)
        kh, kw = self.kernel_size
        mask = torch.ones_like(self.weight)
        mask[:, :, kh // 2, kw // 2 + (mask_type == 'B'):] = 0
        mask[:, :, kh // 2 + 1:] = 0
        self.register_buffer('mask', mask)

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, self.bias, self.stride, self.padding)


class GatedResnet(nn.Module):
    def __init__(self, nf):
        super().__init__()
        self.conv_in = MaskedConv2d('B', nf, nf, 3, padding=1)
        self.conv_out = MaskedConv2d('B', nf, 2 * nf, 3, padding=1)

    def forward(self, x):
        h = self.conv_in(F.elu(x))
        a, b = self.conv_out(F.elu(h)).chunk(2, dim=1)
        return x + a * torch.sigmoid(b)


class PixelCNN(nn.Module):
    def __init__(self, nr_resnet, nr_filters, levels):
        super().__init__()
        self.levels = levels
        self.init_conv = MaskedConv2d('A', 1, nr_filters, 5, padding=2)
        self.layers = nn.ModuleList([GatedResnet(nr_filters) for _ in range(nr_resnet)])
        self.nin_out = nn.Conv2d(nr_filters, levels, 1)

    def forward(self, x):
        x = x.float() / (self.levels - 1) * 2 - 1
        u = self.init_conv(x)
        for layer in self.layers:
            u = layer(u)
        return self.nin_out(F.elu(u))


def loss_op(logits, x):
    return F.cross_entropy(logits, x.squeeze(1), reduction='sum')


workdir = tempfile.mkdtemp()
os.chdir(workdir)

model_name = 'pcnn_lr:{:.5f}_nr-resnet{}_nr-filters{}'.format(args.lr, args.nr_resnet, args.nr_filters)
train_loader = DataLoader(Shapes(400, levels=args.levels), batch_size=args.batch_size, shuffle=True, drop_last=True)
test_loader = DataLoader(Shapes(64, levels=args.levels), batch_size=args.batch_size, shuffle=False)

model = PixelCNN(args.nr_resnet, args.nr_filters, args.levels)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.999995)

print('starting training')
for epoch in range(args.max_epochs):
    model.train(True)
    train_loss = 0.
    time_ = time.time()
    for batch_idx, input in enumerate(train_loader):
        output = model(input)
        loss = loss_op(output, input)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        if (batch_idx + 1) % args.print_every == 0:
            deno = args.print_every * args.batch_size * np.prod(input.shape[1:]) * np.log(2.)
            print('loss : {:.4f}, time : {:.4f}'.format(train_loss / deno, time.time() - time_))
            train_loss = 0.
            time_ = time.time()

    scheduler.step()
    model.eval()
    test_loss = 0.
    with torch.no_grad():
        for input in test_loader:
            test_loss += loss_op(model(input), input).item()
    deno = len(test_loader.dataset) * np.prod(input.shape[1:]) * np.log(2.)
    print('test loss : %s' % (test_loss / deno))

    if (epoch + 1) % args.save_interval == 0:
        torch.save(model.state_dict(), 'models/{}_{}.pth'.format(model_name, epoch))
        print('saved models/{}_{}.pth'.format(model_name, epoch))
