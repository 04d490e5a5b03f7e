"""Image reconstruction from (simulated) fMRI voxel patterns, bdpy style: a generator
maps voxel responses to images and is trained with a pixel loss plus a feature loss
computed by a fixed CNN encoder through a hook-based FeatureExtractor."""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

n_voxels = 1000
img_size = 32
batch_size = 16
n_epochs = 3
lr = 2e-4
layers = ['features[1]', 'features[3]', 'features[6]']
feature_weight = 0.5


class FeatureExtractor(object):
    def __init__(self, encoder, layers=None, device='cpu', detach=True):
        self._encoder = encoder
        self.__layers = layers
        self.__detach = detach
        self.__device = device

        self._extractor = FeatureExtractorHandle()

        self._encoder.to(self.__device)

        for layer in self.__layers:
            eval('self._encoder.{}.register_forward_hook(self._extractor)'.format(layer))

    def __call__(self, x):
        return self.run(x)

    def run(self, x):
        self._extractor.clear()
        self._encoder.forward(x)
        features = {layer: self._extractor.outputs[i] for i, layer in enumerate(self.__layers)}
        if self.__detach:
            features = {k: v.cpu().detach().numpy() for k, v in features.items()}
        return features


class FeatureExtractorHandle(object):
    def __init__(self):
        self.outputs = []

    def __call__(self, module, module_in, module_out):
        self.outputs.append(module_out)

    def clear(self):
        self.outputs = []


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        )

    def forward(self, x):
        return self.features(x)


class Generator(nn.Module):
    def __init__(self, n_in):
        super().__init__()
        self.fc = nn.Linear(n_in, 64 * 4 * 4)
        self.deconv = nn.Sequential(
            nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
            nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
            nn.ConvTranspose2d(16, 3, 4, stride=2, padding=1),
        )

    def forward(self, v):
        h = F.leaky_relu(self.fc(v), 0.2).view(-1, 64, 4, 4)
        return torch.sigmoid(self.deconv(h))


class VoxelImageDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(-1, 1, img_size), torch.linspace(-1, 1, img_size), indexing='ij')
        cx, cy = torch.rand(n, 1, 1, generator=g) * 1.2 - 0.6, torch.rand(n, 1, 1, generator=g) * 1.2 - 0.6
        r = 0.2 + 0.3 * torch.rand(n, 1, 1, generator=g)
        color = torch.rand(n, 3, 1, 1, generator=g)
        mask = (((xx - cx) ** 2 + (yy - cy) ** 2) < r ** 2).float().unsqueeze(1)
        self.images = 0.1 + mask * color
        proj = torch.randn(3 * img_size * img_size // 16, n_voxels, generator=g) / 16.0
        small = F.avg_pool2d(self.images, 4).reshape(n, -1)
        self.voxels = small @ proj + 0.05 * torch.randn(n, n_voxels, generator=g)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.voxels[i], self.images[i]


train_loader = DataLoader(VoxelImageDataset(512, 1), batch_size=batch_size, shuffle=True, drop_last=True)

encoder = Encoder().eval()
for p in encoder.parameters():
    p.requires_grad = False
generator = Generator(n_voxels)
optimizer = torch.optim.Adam(generator.parameters(), lr=lr, betas=(0.5, 0.999))


def feature_loss(recon, target):
    feature_extractor = FeatureExtractor(encoder, layers, detach=False)
    feat_recon = feature_extractor.run(recon)
    feat_target = feature_extractor.run(target)
    return sum(F.mse_loss(feat_recon[l], feat_target[l].detach()) for l in layers)


step = 0
for epoch in range(n_epochs):
    t0 = time.time()
    running_pix, running_feat = 0.0, 0.0
    for voxels, images in train_loader:
        recon = generator(voxels)
        pix_loss = F.mse_loss(recon, images)
        feat_loss = feature_loss(recon, images)
        loss = pix_loss + feature_weight * feat_loss

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        step += 1
        running_pix += pix_loss.item()
        running_feat += feat_loss.item()
        if step % 8 == 0:
            print('epoch {} step {:3d}  pixel loss {:.4f}  feature loss {:.4f}'.format(
                epoch + 1, step, pix_loss.item(), feat_loss.item()))
    n = len(train_loader)
    print('== epoch {}: mean pixel loss {:.4f}, mean feature loss {:.4f} ({:.1f}s)'.format(
        epoch + 1, running_pix / n, running_feat / n, time.time() - t0))
