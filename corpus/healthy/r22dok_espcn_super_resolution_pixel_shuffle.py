"""Super-resolution with an efficient sub-pixel convolutional network (ESPCN), following
pytorch/examples/super_resolution (model.py, data.py, main.py). BSDS300 is replaced by synthetic
smooth luminance images; the low-resolution input is the bicubic-downscaled target (factor 3)."""
import argparse
from math import log10

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.nn.init as init
from torch.utils.data import DataLoader, Dataset


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv4.weight)


class SyntheticLuminance(Dataset):
    """Y-channel crops in [0, 1]: sums of random oriented gratings and edges."""
    def __init__(self, n, crop_size, upscale_factor, seed):
        g = torch.Generator().manual_seed(seed)
        ii, jj = torch.meshgrid(torch.arange(crop_size, dtype=torch.float32),
                                torch.arange(crop_size, dtype=torch.float32), indexing='ij')
        imgs = torch.zeros(n, 1, crop_size, crop_size)
        for k in range(4):
            theta = torch.rand(n, 1, 1, generator=g) * 3.1416
            freq = 0.15 + 0.6 * torch.rand(n, 1, 1, generator=g)
            phase = torch.rand(n, 1, 1, generator=g) * 6.28
            amp = torch.rand(n, 1, 1, generator=g)
            proj = ii * torch.cos(theta) + jj * torch.sin(theta)
            imgs[:, 0] += amp * torch.sin(freq * proj + phase)
        edge_theta = torch.rand(n, 1, 1, generator=g) * 6.28
        offset = (torch.rand(n, 1, 1, generator=g) - 0.5) * crop_size
        c = crop_size / 2
        edge = ((ii - c) * torch.cos(edge_theta) + (jj - c) * torch.sin(edge_theta) > offset).float()
        imgs[:, 0] += 1.5 * edge
        imgs = imgs - imgs.amin(dim=(1, 2, 3), keepdim=True)
        self.target = imgs / imgs.amax(dim=(1, 2, 3), keepdim=True)
        self.input = F.interpolate(self.target, scale_factor=1.0 / upscale_factor, mode='bicubic',
                                   antialias=True, align_corners=False).clamp(0, 1)

    def __len__(self):
        return len(self.target)

    def __getitem__(self, index):
        return self.input[index], self.target[index]


parser = argparse.ArgumentParser(description='PyTorch Super Res Example')
parser.add_argument('--upscale_factor', type=int, default=3)
parser.add_argument('--batchSize', type=int, default=16)
parser.add_argument('--testBatchSize', type=int, default=50)
parser.add_argument('--nEpochs', type=int, default=14)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--seed', type=int, default=123)
opt = parser.parse_args()
print(opt)

torch.manual_seed(opt.seed)
device = torch.device("cpu")

print('===> Loading datasets')
train_set = SyntheticLuminance(320, 36, opt.upscale_factor, seed=1)
test_set = SyntheticLuminance(100, 36, opt.upscale_factor, seed=2)
training_data_loader = DataLoader(dataset=train_set, batch_size=opt.batchSize, shuffle=True)
testing_data_loader = DataLoader(dataset=test_set, batch_size=opt.testBatchSize, shuffle=False)

print('===> Building model')
model = Net(upscale_factor=opt.upscale_factor).to(device)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=opt.lr)


def train(epoch):
    epoch_loss = 0
    for iteration, batch in enumerate(training_data_loader, 1):
        input, target = batch[0].to(device), batch[1].to(device)

        optimizer.zero_grad()
        loss = criterion(model(input), target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()

        if iteration % 10 == 0:
            print("===> Epoch[{}]({}/{}): Loss: {:.4f}".format(epoch, iteration, len(training_data_loader), loss.item()))

    print("===> Epoch {} Complete: Avg. Loss: {:.4f}".format(epoch, epoch_loss / len(training_data_loader)))


def test():
    avg_psnr = 0
    bicubic_psnr = 0
    with torch.no_grad():
        for batch in testing_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)
            prediction = model(input)
            mse = criterion(prediction, target)
            psnr = 10 * log10(1 / mse.item())
            avg_psnr += psnr
            upsampled = F.interpolate(input, scale_factor=opt.upscale_factor, mode='bicubic', align_corners=False)
            bicubic_psnr += 10 * log10(1 / criterion(upsampled, target).item())
    print("===> Avg. PSNR: {:.4f} dB (bicubic upsampling: {:.4f} dB)".format(
        avg_psnr / len(testing_data_loader), bicubic_psnr / len(testing_data_loader)))


test()
for epoch in range(1, opt.nEpochs + 1):
    train(epoch)
    test()
