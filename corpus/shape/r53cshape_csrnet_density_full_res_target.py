"""CSRNet-style crowd counting: regress a density map whose sum is the head count.

Synthetic "crowd" images: blurred bright dots on a noisy background; the
ground-truth density map has one Gaussian of mass 1 per head.
"""
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
H, W = 64, 96


def gaussian_kernel(size=7, sigma=1.5):
    ax = torch.arange(size) - size // 2
    k = torch.exp(-(ax[:, None] ** 2 + ax[None, :] ** 2) / (2 * sigma ** 2))
    return (k / k.sum())[None, None]


class CrowdDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        kernel = gaussian_kernel()
        dots = torch.zeros(n, 1, H, W)
        for i in range(n):
            count = int(torch.randint(5, 60, (1,), generator=g))
            ys = torch.randint(0, H, (count,), generator=g)
            xs = torch.randint(0, W, (count,), generator=g)
            dots[i, 0].index_put_((ys, xs), torch.ones(count), accumulate=True)
        self.density = F.conv2d(dots, kernel, padding=3)
        glow = F.conv2d(dots, gaussian_kernel(7, 1.0), padding=3)
        noise = 0.1 * torch.rand(n, 3, H, W, generator=g)
        self.images = (glow * 4).clamp(max=1).repeat(1, 3, 1, 1) + noise

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = self.images[i]
        target = self.density[i]
        return img, target


def make_layers(cfg, in_channels=3, dilation=1):
    layers = []
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(in_channels, v, 3, padding=dilation, dilation=dilation), nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


class CSRNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.frontend = make_layers([16, "M", 32, "M", 32, "M", 64])
        self.backend = make_layers([64, 32, 16], in_channels=64, dilation=2)
        self.output_layer = nn.Conv2d(16, 1, 1)

    def forward(self, x):
        x = self.frontend(x)
        x = self.backend(x)
        return self.output_layer(x)


def train(train_list, model, criterion, optimizer, epoch):
    model.train()
    for i, (img, target) in enumerate(train_list):
        output = model(img)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 10 == 0:
            print(f"epoch {epoch} [{i}/{len(train_list)}] loss {loss.item():.6f}")


def validate(val_list, model):
    model.eval()
    mae = 0.0
    with torch.no_grad():
        for img, target in val_list:
            output = model(img)
            mae += (output.sum(dim=(1, 2, 3)) - target.sum(dim=(1, 2, 3))).abs().sum().item()
    return mae / len(val_list.dataset)


def main():
    train_list = DataLoader(CrowdDataset(320, 1), batch_size=8, shuffle=True)
    val_list = DataLoader(CrowdDataset(80, 2), batch_size=20)
    model = CSRNet()
    criterion = nn.MSELoss(reduction="sum")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.time()
    for epoch in range(4):
        train(train_list, model, criterion, optimizer, epoch)
        print(f" * epoch {epoch} val MAE {validate(val_list, model):.3f} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
