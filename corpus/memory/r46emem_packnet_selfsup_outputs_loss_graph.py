"""Self-supervised monocular depth (PackNet-SfM style): a depth net and a pose net trained
with a photometric reprojection loss between a target frame and its temporal context."""
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class SyntheticDrivingClips(Dataset):
    """Three-frame clips of a textured scene translating sideways at a random speed."""

    def __init__(self, n=192, h=96, w=192):
        g = torch.Generator().manual_seed(1)
        self.scenes = F.interpolate(torch.rand(n, 3, h // 4, (w + 32) // 4, generator=g),
                                    size=(h, w + 32), mode='bilinear', align_corners=False)
        self.shift = torch.randint(2, 8, (n,), generator=g)
        self.w = w

    def __len__(self):
        return len(self.scenes)

    def __getitem__(self, i):
        s, d = self.scenes[i], int(self.shift[i])
        c = 16
        return {'rgb': s[:, :, c:c + self.w],
                'rgb_context': [s[:, :, c - d:c - d + self.w], s[:, :, c + d:c + d + self.w]]}


def conv(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.ELU())


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = conv(3, 16, 2)
        self.enc2 = conv(16, 32, 2)
        self.enc3 = conv(32, 64, 2)
        self.dec3 = conv(64, 32)
        self.dec2 = conv(32 + 32, 16)
        self.dec1 = conv(16 + 16, 16)
        self.disp = nn.Conv2d(16, 1, 3, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        e3 = self.enc3(e2)
        d3 = F.interpolate(self.dec3(e3), scale_factor=2)
        d2 = F.interpolate(self.dec2(torch.cat([d3, e2], 1)), scale_factor=2)
        d1 = F.interpolate(self.dec1(torch.cat([d2, e1], 1)), scale_factor=2)
        return torch.sigmoid(self.disp(d1))


class PoseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(conv(6, 16, 2), conv(16, 32, 2), conv(32, 64, 2),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 1))

    def forward(self, tgt, ref):
        return 0.1 * self.net(torch.cat([tgt, ref], 1))


class SelfSupModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth_net = DepthNet()
        self.pose_net = PoseNet()

    def warp(self, ref, disp, tx):
        b, _, h, w = ref.shape
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing='ij')
        flow = disp[:, 0] * tx.view(b, 1, 1) * 10.0
        grid = torch.stack([xs.expand(b, h, w) + flow, ys.expand(b, h, w)], dim=-1)
        return F.grid_sample(ref, grid, padding_mode='border', align_corners=True)

    def training_step(self, batch, batch_idx):
        rgb = batch['rgb']
        disp = self.depth_net(rgb)
        losses = []
        for k, ref in enumerate(batch['rgb_context']):
            tx = self.pose_net(rgb, ref) * (1 if k == 0 else -1)
            warped = self.warp(ref, disp, tx)
            losses.append((warped - rgb).abs().mean(1, keepdim=True))
        photometric = torch.cat(losses, 1).min(1)[0].mean()
        dx = (disp[:, :, :, 1:] - disp[:, :, :, :-1]).abs().mean()
        loss = photometric + 1e-3 * dx
        return {'loss': loss, 'metrics': {'photometric_loss': photometric.detach(),
                                          'smoothness_loss': dx.detach()}}

    def training_epoch_end(self, outputs):
        avg = torch.stack([o['loss'] for o in outputs]).mean()
        return {'avg_train-loss': avg.item()}


def train_epoch(epoch, loader, module, optimizer):
    module.train()
    outputs = []
    for i, batch in enumerate(loader):
        optimizer.zero_grad()
        output = module.training_step(batch, i)
        output['loss'].backward()
        optimizer.step()
        outputs.append(output)
        if i % 10 == 0:
            print(f"epoch {epoch} it {i:3d} loss {output['loss'].item():.4f} "
                  f"photo {output['metrics']['photometric_loss'].item():.4f}", flush=True)
    return module.training_epoch_end(outputs)


def main():
    loader = DataLoader(SyntheticDrivingClips(), batch_size=8, shuffle=True, drop_last=True)
    module = SelfSupModel()
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    t0 = time.time()
    for epoch in range(2):
        log = train_epoch(epoch, loader, module, optimizer)
        print(f"epoch {epoch} avg_train-loss {log['avg_train-loss']:.4f} ({time.time() - t0:.1f}s)")


if __name__ == '__main__':
    main()
