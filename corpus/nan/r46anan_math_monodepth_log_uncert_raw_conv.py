"""Depth network with a disparity and an uncertainty output (monodepth2-style decoder, mono-uncertainty
"log" model), trained on synthetic image / disparity pairs."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class SyntheticDepthDataset(Dataset):
    def __init__(self, n=192, h=24, w=24):
        ys = torch.linspace(0, 1, h).view(h, 1).expand(h, w)
        xs = torch.linspace(0, 1, w).view(1, w).expand(h, w)
        self.images, self.disps = [], []
        for _ in range(n):
            a, b, c = torch.rand(3)
            disp = 0.1 + 0.8 * (a * ys + (1 - a) * 0.5 * (1 + torch.sin(6.28 * b * xs + c)))
            disp = disp.clamp(0.05, 0.95)
            img = torch.stack([disp * (0.5 + 0.5 * a), disp.sqrt() * b, 1 - disp]) + 0.05 * torch.randn(3, h, w)
            self.images.append(img)
            self.disps.append(disp.unsqueeze(0))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        return self.images[idx], self.disps[idx]


class ConvBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.nonlin = nn.ELU(inplace=True)

    def forward(self, x):
        return self.nonlin(self.conv(x))


class DepthEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = ConvBlock(3, 8)
        self.layer2 = ConvBlock(8, 16)
        self.layer3 = ConvBlock(16, 32)

    def forward(self, x):
        f1 = self.layer1(x)
        f2 = self.layer2(F.max_pool2d(f1, 2))
        f3 = self.layer3(F.max_pool2d(f2, 2))
        return [f1, f2, f3]


class DepthDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.upconv2 = ConvBlock(32 + 16, 16)
        self.upconv1 = ConvBlock(16 + 8, 8)
        self.dispconv = nn.Conv2d(8, 1, 3, padding=1)
        self.uncertconv = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, feats):
        f1, f2, f3 = feats
        x = F.interpolate(f3, scale_factor=2, mode="nearest")
        x = self.upconv2(torch.cat([x, f2], 1))
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = self.upconv1(torch.cat([x, f1], 1))
        disp = torch.sigmoid(self.dispconv(x))
        uncert = self.uncertconv(x)
        return disp, uncert


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = DepthEncoder()
        self.decoder = DepthDecoder()

    def forward(self, x):
        return self.decoder(self.encoder(x))


def compute_loss(disp, uncert, target):
    abs_diff = torch.abs(disp - target)
    return (abs_diff / uncert + torch.log(uncert)).mean()


train_set = SyntheticDepthDataset(192)
val_set = SyntheticDepthDataset(64)
train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
val_loader = DataLoader(val_set, batch_size=32)

model = DepthNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

step = 0
for epoch in range(12):
    model.train()
    running = 0.0
    for images, target in train_loader:
        disp, uncert = model(images)
        loss = compute_loss(disp, uncert, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        running += loss.item()
        if step % 10 == 0 or step <= 3:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")

    model.eval()
    abs_err, n = 0.0, 0
    with torch.no_grad():
        for images, target in val_loader:
            disp, _ = model(images)
            abs_err += torch.abs(disp - target).sum().item()
            n += target.numel()
    print(f"epoch {epoch} train loss {running / len(train_loader):.4f} val abs err {abs_err / n:.4f}")
