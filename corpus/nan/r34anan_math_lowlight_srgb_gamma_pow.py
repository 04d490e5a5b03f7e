"""Low-light photo enhancement with a residual CNN, loss computed in linear light.

The network takes an under-exposed sRGB image (values in [0, 1]) and predicts the
well-exposed sRGB image as input + residual. Because exposure is a linear-light
quantity, prediction and target are both converted from sRGB to linear RGB with
the usual gamma of 2.2 before the L1 loss. Synthetic scenes: smooth colour fields
with shadows and dark letterbox bars, darkened by a random exposure factor.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

IMG = 24
GAMMA = 2.2


class LowLightPairs(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.dark, self.bright = [], []
        for _ in range(n):
            base = torch.rand(3, 4, 4, generator=g)
            scene = F.interpolate(base[None], size=(IMG, IMG), mode="bilinear", align_corners=False)[0]
            shade = torch.rand(1, 1, 1, generator=g) * 0.6
            yy = torch.linspace(0, 1, IMG).view(1, IMG, 1)
            scene = scene * (1 - shade * (yy > 0.5).float())
            bar = int(torch.randint(0, 4, (1,), generator=g))
            if bar:
                scene[:, :bar, :] = 0.0
                scene[:, -bar:, :] = 0.0
            scene = scene.clamp(0, 1)
            exposure = 0.1 + 0.25 * torch.rand(1, generator=g)
            linear = scene ** GAMMA
            dark_linear = linear * exposure + 0.002 * torch.randn(3, IMG, IMG, generator=g)
            dark = dark_linear.clamp(0, 1) ** (1 / GAMMA)
            self.dark.append(dark)
            self.bright.append(scene)
        self.dark = torch.stack(self.dark)
        self.bright = torch.stack(self.bright)

    def __len__(self):
        return len(self.dark)

    def __getitem__(self, i):
        return self.dark[i], self.bright[i]


class EnhanceNet(nn.Module):
    def __init__(self, ch=24):
        super().__init__()
        self.head = nn.Conv2d(3, ch, 3, padding=1)
        self.body = nn.Sequential(
            nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(inplace=True),
        )
        self.tail = nn.Conv2d(ch, 3, 3, padding=1)
        nn.init.zeros_(self.tail.weight)
        nn.init.zeros_(self.tail.bias)

    def forward(self, x):
        feat = F.relu(self.head(x))
        return x + self.tail(self.body(feat))


def srgb_to_linear(img):
    return img ** GAMMA


def main():
    train_set = LowLightPairs(384, seed=1)
    val_set = LowLightPairs(96, seed=2)
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=32)

    model = EnhanceNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    criterion = nn.L1Loss()

    step = 0
    for epoch in range(8):
        model.train()
        running = 0.0
        for dark, bright in train_loader:
            pred = model(dark)
            loss = criterion(srgb_to_linear(pred), srgb_to_linear(bright))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            if step % 10 == 0:
                print(f"step {step:4d}  loss {loss.item():.5f}")
            step += 1

        model.eval()
        with torch.no_grad():
            psnr = 0.0
            for dark, bright in val_loader:
                pred = model(dark).clamp(0, 1)
                mse = F.mse_loss(pred, bright, reduction="none").mean(dim=[1, 2, 3])
                psnr += (10 * torch.log10(1.0 / mse)).sum().item()
            psnr /= len(val_set)
        print(f"epoch {epoch}  train L1(linear) {running / len(train_loader):.5f}  val PSNR {psnr:.2f} dB")


if __name__ == "__main__":
    main()
