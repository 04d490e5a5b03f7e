"""Image inpainting with partial convolutions (PConv U-Net), mixed precision.

Partial convolution layer as in NVIDIA's partialconv (Liu et al. 2018), a small
encoder-decoder, valid/hole L1 loss. Trained with torch.autocast float16 and a
GradScaler to save memory, on synthetic textured images with rectangular holes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
SIZE = 32


class PartialConv2d(nn.Conv2d):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.weight_maskUpdater = torch.ones(1, 1, self.kernel_size[0], self.kernel_size[1])
        self.slide_winsize = self.weight_maskUpdater.shape[1] * self.weight_maskUpdater.shape[2] * \
            self.weight_maskUpdater.shape[3]

    def forward(self, input, mask_in):
        with torch.no_grad():
            self.update_mask = F.conv2d(mask_in, self.weight_maskUpdater, bias=None, stride=self.stride,
                                        padding=self.padding, dilation=self.dilation, groups=1)
            self.mask_ratio = self.slide_winsize / (self.update_mask + 1e-8)
            self.update_mask = torch.clamp(self.update_mask, 0, 1)
            self.mask_ratio = torch.mul(self.mask_ratio, self.update_mask)

        raw_out = super().forward(torch.mul(input, mask_in))
        bias_view = self.bias.view(1, self.out_channels, 1, 1)
        output = torch.mul(raw_out - bias_view, self.mask_ratio) + bias_view
        output = torch.mul(output, self.update_mask)
        return output, self.update_mask


class PConvBlock(nn.Module):
    def __init__(self, cin, cout, k, stride, bn=True, act="relu"):
        super().__init__()
        self.conv = PartialConv2d(cin, cout, k, stride, k // 2, bias=True)
        self.bn = nn.BatchNorm2d(cout) if bn else nn.Identity()
        self.act = nn.ReLU() if act == "relu" else (nn.LeakyReLU(0.2) if act == "leaky" else nn.Identity())

    def forward(self, x, m):
        x, m = self.conv(x, m)
        return self.act(self.bn(x)), m


class PConvUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = PConvBlock(3, 8, 5, 2, bn=False)
        self.enc2 = PConvBlock(8, 16, 3, 2)
        self.enc3 = PConvBlock(16, 16, 3, 2)
        self.dec3 = PConvBlock(16 + 16, 16, 3, 1, act="leaky")
        self.dec2 = PConvBlock(16 + 8, 8, 3, 1, act="leaky")
        self.dec1 = PConvBlock(8 + 3, 3, 3, 1, bn=False, act="none")

    def forward(self, img, mask):
        h1, m1 = self.enc1(img, mask)
        h2, m2 = self.enc2(h1, m1)
        h3, m3 = self.enc3(h2, m2)
        h, m = h3, m3
        for dec, skip_h, skip_m in ((self.dec3, h2, m2), (self.dec2, h1, m1), (self.dec1, img, mask)):
            h = F.interpolate(h, scale_factor=2, mode="nearest")
            m = F.interpolate(m, scale_factor=2, mode="nearest")
            h, m = dec(torch.cat([h, skip_h], 1), torch.cat([m, skip_m], 1)[:, :1])
        return h


class TextureHoles(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.linspace(0, 1, SIZE), torch.linspace(0, 1, SIZE), indexing="ij")
        self.images, self.masks = [], []
        for _ in range(n):
            f = torch.rand(3, 2, generator=g) * 8 + 1
            ph = torch.rand(3, generator=g) * 6.28
            img = torch.stack([torch.sin(f[c, 0] * xx * 6.28 + f[c, 1] * yy * 3 + ph[c]) for c in range(3)])
            mask = torch.ones(1, SIZE, SIZE)
            for _ in range(2):
                h, w = torch.randint(6, 14, (2,), generator=g).tolist()
                y0, x0 = torch.randint(0, SIZE - h, (1,), generator=g).item(), torch.randint(0, SIZE - w, (1,), generator=g).item()
                mask[:, y0:y0 + h, x0:x0 + w] = 0
            self.images.append(0.5 * img)
            self.masks.append(mask)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


def inpainting_loss(output, gt, mask):
    valid = F.l1_loss(mask * output, mask * gt)
    hole = F.l1_loss((1 - mask) * output, (1 - mask) * gt)
    return valid + 6.0 * hole, hole


train_loader = DataLoader(TextureHoles(160, seed=1), batch_size=16, shuffle=True)
model = PConvUNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")

for epoch in range(1, 5):
    model.train()
    total, total_hole, n = 0.0, 0.0, 0
    for step, (gt, mask) in enumerate(train_loader):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            output = model(gt * mask, mask)
            loss, hole = inpainting_loss(output.float(), gt, mask)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        total += loss.item()
        total_hole += hole.item()
        n += 1
        if step % 4 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f} hole_l1 {hole.item():.4f} "
                  f"scale {scaler.get_scale():.0f}")
    print(f"epoch {epoch} mean loss {total / n:.4f} mean hole_l1 {total_hole / n:.4f}")
