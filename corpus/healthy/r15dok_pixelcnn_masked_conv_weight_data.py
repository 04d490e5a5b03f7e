"""PixelCNN (van den Oord et al., 2016) on small grey-level images, after jzbontar/pixelcnn-pytorch
(main.py): a stack of masked 7x7 convolutions (mask 'A' on the first layer, 'B' after), a
256-way softmax per pixel trained with cross-entropy against the pixel's own 8-bit value,
SGD with Nesterov momentum, and row-by-row sampling after every epoch.

MNIST is replaced by synthetic 10x10 strokes (bars and blocks of a random grey level on a
dark background), stored as uint8 and scaled to [0, 1] like ToTensor does.
"""
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils import data

torch.manual_seed(0)
np.random.seed(0)


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super(MaskedConv2d, self).__init__(*args, **kwargs)
        assert mask_type in {'A', 'B'}
        self.register_buffer('mask', self.weight.data.clone())
        _, _, kH, kW = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, kH // 2, kW // 2 + (mask_type == 'B'):] = 0
        self.mask[:, :, kH // 2 + 1:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super(MaskedConv2d, self).forward(x)


class Strokes(data.Dataset):
    """10x10 uint8 images: one to three horizontal/vertical bars or blocks of one grey level each."""

    def __init__(self, n, size=10, seed=0):
        rng = np.random.RandomState(seed)
        imgs = np.zeros((n, size, size), dtype=np.uint8)
        for i in range(n):
            for _ in range(rng.randint(1, 4)):
                level = rng.choice([96, 160, 255])
                if rng.rand() < 0.5:
                    r = rng.randint(0, size)
                    c0 = rng.randint(0, size // 2)
                    imgs[i, r, c0:c0 + rng.randint(3, size)] = level
                else:
                    c = rng.randint(0, size)
                    r0 = rng.randint(0, size // 2)
                    imgs[i, r0:r0 + rng.randint(3, size), c] = level
        self.imgs = torch.from_numpy(imgs)

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, idx):
        return self.imgs[idx].unsqueeze(0).float() / 255., 0


fm = 16
net = nn.Sequential(
    MaskedConv2d('A', 1,   fm, 7, 1, 3), nn.ReLU(True),
    MaskedConv2d('B', fm,  fm, 7, 1, 3), nn.ReLU(True),
    MaskedConv2d('B', fm,  fm, 7, 1, 3), nn.ReLU(True),
    MaskedConv2d('B', fm,  fm, 7, 1, 3), nn.ReLU(True),
    MaskedConv2d('B', fm,  fm, 7, 1, 3), nn.ReLU(True),
    MaskedConv2d('B', fm, 256, 7, 1, 3))

train_set = Strokes(1440)
print('training images: %d, lit fraction %.3f' % (len(train_set), (train_set.imgs > 0).float().mean().item()))
tr = data.DataLoader(train_set, batch_size=32, shuffle=True)
sample = torch.Tensor(16, 1, 10, 10)
optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9, nesterov=True)
t0 = time.time()
step = 0
for epoch in range(3):
    # train
    err = []
    for input, _ in tr:
        target = (input.data[:, 0] * 255).long()
        loss = F.cross_entropy(net(input), target)
        err.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step == 1 or step % 25 == 0:
            print('step', step, 'loss %.4f' % np.mean(err[-25:]))

    # sample
    sample.fill_(0)
    with torch.no_grad():
        for i in range(10):
            for j in range(10):
                out = net(sample)
                probs = F.softmax(out[:, :, i, j], dim=1)
                sample[:, :, i, j] = torch.multinomial(probs, 1).float() / 255.
    lit = (sample > 0).float().mean().item()
    print(epoch, np.mean(err), 'sampled lit fraction %.3f' % lit, '%.1fs' % (time.time() - t0))
