"""Convolutional auto-encoder on natural image patches, ported from the torch7 demo
train-autoencoder.lua (unsup package, Koray Kavukcuoglu / Clement Farabet), run as
    -model conv -inputsize 25 -nfiltersout 16 -kernelsize 9 -eta 2e-3 -etadecay 1e-5 -hessian false
Encoder: conv 9x9 -> tanh -> diag; decoder: full convolution 9x9; loss: un-averaged squared error
(unsup.AutoEncoder's MSECriterion with sizeAverage = false); one patch per SGD step."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1)

parser = argparse.ArgumentParser(description="Training a simple sparse coding dictionary on Berkeley images")
parser.add_argument("--inputsize", type=int, default=25)
parser.add_argument("--nfiltersin", type=int, default=1)
parser.add_argument("--nfiltersout", type=int, default=16)
parser.add_argument("--kernelsize", type=int, default=9)
parser.add_argument("--beta", type=float, default=1.0)
parser.add_argument("--eta", type=float, default=2e-3)
parser.add_argument("--etadecay", type=float, default=1e-5)
parser.add_argument("--momentum", type=float, default=0.0)
parser.add_argument("--maxiter", type=int, default=600)
parser.add_argument("--statinterval", type=int, default=50)
params = parser.parse_args()


# ---- data: tr-berkeley-N5K-M56x56-lcn (natural images, local contrast normalised) -------------
def berkeley_like_images(n=300, size=56, seed=1):
    """1/f-spectrum grey-level images with a few occluding surfaces, standing in for the
    56x56 Berkeley crops of the original data file."""
    rng = np.random.default_rng(seed)
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.fftfreq(size)[None, :]
    f = np.sqrt(fx ** 2 + fy ** 2)
    f[0, 0] = 1.0
    images = []
    for _ in range(n):
        spec = (rng.normal(size=(size, size)) + 1j * rng.normal(size=(size, size))) / f
        im = np.real(np.fft.ifft2(spec))
        for _ in range(rng.integers(1, 4)):
            y0, x0 = rng.integers(0, size, 2)
            h, w = rng.integers(6, 30, 2)
            im[y0:y0 + h, x0:x0 + w] += rng.normal(0, 3) * im.std()
        images.append(im)
    return np.stack(images).astype(np.float32)


def local_contrast_normalize(images, k=9):
    x = torch.from_numpy(images)[:, None]
    g = torch.exp(-((torch.arange(k) - k // 2) ** 2) / (2 * (k / 4) ** 2))
    g = g[:, None] * g[None, :]
    g = (g / g.sum())[None, None]
    mean = F.conv2d(F.pad(x, (k // 2,) * 4, mode="reflect"), g)
    centered = x - mean
    std = F.conv2d(F.pad(centered * centered, (k // 2,) * 4, mode="reflect"), g).sqrt()
    div = torch.maximum(std, std.mean(dim=(1, 2, 3), keepdim=True))
    return (centered / div)[:, 0]


class PatchDataset:
    """getdata(): every index returns a random inputsize x inputsize patch whose std > 0.2."""

    def __init__(self, images, inputsize, std=0.2, seed=2):
        self.images = images
        self.inputsize = inputsize
        self.std = std
        self.rng = np.random.default_rng(seed)

    def select_patch(self):
        n, rows, cols = self.images.shape
        while True:
            i = self.rng.integers(n)
            ri = self.rng.integers(rows - self.inputsize)
            ci = self.rng.integers(cols - self.inputsize)
            patch = self.images[i, ri:ri + self.inputsize, ci:ci + self.inputsize]
            if patch.std() > self.std:
                return patch

    def __getitem__(self, index):
        sample = self.select_patch()[None].clone()
        return sample, sample


class Diag(nn.Module):
    def __init__(self, nfeature):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(nfeature))

    def forward(self, x):
        return x * self.weight[None, :, None, None]


class AutoEncoder(nn.Module):
    def __init__(self, encoder, decoder, beta):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.beta = beta
        self.loss = nn.MSELoss(reduction="sum")

    def forward(self, input, target):
        code = self.encoder(input)
        recon = self.decoder(code)
        return self.beta * self.loss(recon, target)


def main():
    images = local_contrast_normalize(berkeley_like_images())
    dataset = PatchDataset(images, params.inputsize)
    print(f"==> {images.shape[0]} images {tuple(images.shape[1:])}, patch {params.inputsize}x{params.inputsize}")

    kw = params.kernelsize
    encoder = nn.Sequential(
        nn.Conv2d(params.nfiltersin, params.nfiltersout, kw),
        nn.Tanh(),
        Diag(params.nfiltersout),
    )
    decoder = nn.Sequential(nn.ConvTranspose2d(params.nfiltersout, params.nfiltersin, kw))
    module = AutoEncoder(encoder, decoder, params.beta)
    print("==> constructed convolutional auto-encoder")

    sgd = torch.optim.SGD(module.parameters(), lr=params.eta, momentum=params.momentum)
    schedule = torch.optim.lr_scheduler.LambdaLR(sgd, lambda nevals: 1.0 / (1.0 + nevals * params.etadecay))

    print("==> training model")
    err = 0.0
    for t in range(1, params.maxiter + 1):
        input, target = dataset[t]
        f = module(input[None], target[None])
        sgd.zero_grad()
        f.backward()
        sgd.step()
        schedule.step()
        err += f.item()

        if t % params.statinterval == 0:
            eweight = module.encoder[0].weight
            dweight = module.decoder[0].weight
            print(f"==> iteration = {t}, average loss = {err / params.statinterval:.4f}  "
                  f"|enc w| {eweight.abs().max().item():.3f}  |dec w| {dweight.abs().max().item():.3f}  "
                  f"diag {module.encoder[2].weight.mean().item():.3f}")
            err = 0.0


if __name__ == "__main__":
    main()
