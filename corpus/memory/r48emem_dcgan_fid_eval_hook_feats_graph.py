"""DCGAN on small synthetic 16x16 images with an mmgen-style evaluation hook: every
eval_interval iterations the hook samples fake images in batches, feeds them through a fixed
feature extractor and reports a Frechet distance between real and fake feature statistics."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class Blobs(Dataset):
    def __init__(self, n=2048, size=16):
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing='ij')
        cx, cy = torch.rand(n) * 10 + 3, torch.rand(n) * 10 + 3
        r = torch.rand(n) * 2 + 2
        d = ((xx[None] - cx[:, None, None]) ** 2 + (yy[None] - cy[:, None, None]) ** 2).sqrt()
        self.x = (torch.sigmoid((r[:, None, None] - d) * 2) * 2 - 1).unsqueeze(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


class Generator(nn.Module):
    def __init__(self, nz=64, ngf=48):
        super().__init__()
        self.nz = nz
        self.net = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.Conv2d(ngf, 1, 3, 1, 1), nn.Tanh())

    def forward(self, z):
        return self.net(z.view(z.size(0), self.nz, 1, 1))


class Discriminator(nn.Module):
    def __init__(self, ndf=32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0))

    def forward(self, x):
        return self.net(x).view(-1)


class FeatureNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1, 1)
        self.conv3 = nn.Conv2d(64, 64, 3, 2, 1)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.conv3(x))
        return x.mean((2, 3))


def frechet_distance(real_feats, fake_feats):
    mu1, mu2 = real_feats.mean(0), fake_feats.mean(0)
    s1, s2 = torch.cov(real_feats.T), torch.cov(fake_feats.T)
    eig = torch.linalg.eigvals(s1 @ s2).real.clamp(min=0).sqrt().sum()
    return ((mu1 - mu2) ** 2).sum() + torch.trace(s1) + torch.trace(s2) - 2 * eig


class FID:
    def __init__(self, inception, real_images, num_images):
        self.inception = inception
        self.num_images = num_images
        with torch.no_grad():
            self.real_feats = torch.cat([inception(b) for b in real_images.split(256)])
        self.fake_feats = []

    def feed(self, batch):
        self.fake_feats.append(self.inception(batch))

    def summary(self):
        fake = torch.cat(self.fake_feats)[:self.num_images]
        self.fake_feats = []
        return frechet_distance(self.real_feats[:self.num_images], fake).item()


class EvalHook:
    def __init__(self, metric, interval, batch_size=128):
        self.metric = metric
        self.interval = interval
        self.batch_size = batch_size

    def after_train_iter(self, it, generator):
        if (it + 1) % self.interval != 0:
            return
        generator.eval()
        num_batches = self.metric.num_images // self.batch_size
        for _ in range(num_batches):
            fakes = generator(torch.randn(self.batch_size, generator.nz))
            self.metric.feed(fakes)
        fid = self.metric.summary()
        generator.train()
        print(f"iter {it + 1}: FID {fid:.4f}", flush=True)


dataset = Blobs()
loader = DataLoader(dataset, batch_size=64, shuffle=True, drop_last=True)
netG, netD = Generator(), Discriminator()
feat_net = FeatureNet().eval()
for p in feat_net.parameters():
    p.requires_grad_(False)
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
hook = EvalHook(FID(feat_net, dataset.x, num_images=1536), interval=20)

it = 0
for epoch in range(1):
    for real in loader:
        z = torch.randn(real.size(0), netG.nz)
        fake = netG(z)
        d_loss = F.softplus(-netD(real)).mean() + F.softplus(netD(fake.detach())).mean()
        optD.zero_grad()
        d_loss.backward()
        optD.step()
        g_loss = F.softplus(-netD(fake)).mean()
        optG.zero_grad()
        g_loss.backward()
        optG.step()
        if it % 10 == 0:
            print(f"epoch {epoch} iter {it} d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}", flush=True)
        hook.after_train_iter(it, netG)
        it += 1
