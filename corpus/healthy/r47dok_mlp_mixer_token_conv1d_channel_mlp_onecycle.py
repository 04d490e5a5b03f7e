"""MLP-Mixer (Tolstikhin et al. 2021) image classifier trained from scratch on a small synthetic
texture dataset: 6 pattern classes on 32x32 RGB images, 4x4 patches."""
from functools import partial
import math
import torch
from torch import nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class TextureDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 6, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
        imgs = []
        for y in self.labels.tolist():
            freq = 2 * math.pi / (4 + 4 * torch.rand(1, generator=g).item())
            phase = 2 * math.pi * torch.rand(1, generator=g).item()
            cy, cx = (8 + 16 * torch.rand(2, generator=g)).tolist()
            if y == 0:
                pat = torch.sin(freq * yy + phase)
            elif y == 1:
                pat = torch.sin(freq * xx + phase)
            elif y == 2:
                pat = torch.sin(freq * (xx + yy) / 1.41 + phase)
            elif y == 3:
                pat = torch.sin(freq * xx + phase) * torch.sin(freq * yy + phase)
            elif y == 4:
                pat = torch.sin(freq * torch.sqrt((yy - cy) ** 2 + (xx - cx) ** 2) + phase)
            else:
                pat = torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 30.0) * 2 - 0.5
            color = 0.5 + 0.5 * torch.rand(3, 1, 1, generator=g)
            img = pat.unsqueeze(0) * color + 1.2 * torch.randn(3, 32, 32, generator=g)
            imgs.append(img)
        self.images = torch.stack(imgs)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class PreNormResidual(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.fn = fn
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.fn(self.norm(x)) + x


def FeedForward(dim, expansion_factor=4, dropout=0.0, dense=nn.Linear):
    inner_dim = int(dim * expansion_factor)
    return nn.Sequential(
        dense(dim, inner_dim), nn.GELU(), nn.Dropout(dropout),
        dense(inner_dim, dim), nn.Dropout(dropout))


class PatchEmbed(nn.Module):
    def __init__(self, patch_size, channels, dim):
        super().__init__()
        self.p = patch_size
        self.proj = nn.Linear(patch_size * patch_size * channels, dim)

    def forward(self, x):
        b, c, h, w = x.shape
        p = self.p
        x = x.view(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1).reshape(b, (h // p) * (w // p), p * p * c)
        return self.proj(x)


def MLPMixer(*, image_size, channels, patch_size, dim, depth, num_classes, expansion_factor=4,
             expansion_factor_token=0.5, dropout=0.0):
    num_patches = (image_size // patch_size) ** 2
    chan_first, chan_last = partial(nn.Conv1d, kernel_size=1), nn.Linear
    return nn.Sequential(
        PatchEmbed(patch_size, channels, dim),
        *[nn.Sequential(
            PreNormResidual(dim, FeedForward(num_patches, expansion_factor, dropout, chan_first)),
            PreNormResidual(dim, FeedForward(dim, expansion_factor_token, dropout, chan_last)),
        ) for _ in range(depth)],
        nn.LayerNorm(dim),
        Mean(dim=1),
        nn.Linear(dim, num_classes))


class Mean(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.mean(self.dim)


def evaluate(model, loader):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    return correct / total


def main():
    train_loader = DataLoader(TextureDataset(768, seed=1), batch_size=64, shuffle=True)
    val_loader = DataLoader(TextureDataset(256, seed=2), batch_size=128)
    model = MLPMixer(image_size=32, channels=3, patch_size=4, dim=48, depth=3, num_classes=6)
    print(f"params: {sum(p.numel() for p in model.parameters()):,}")
    epochs = 5
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.05)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=2e-3, total_steps=epochs * len(train_loader),
                                                    pct_start=0.15)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    print(f"epoch 0 val acc {evaluate(model, val_loader):.3f}")
    for epoch in range(1, epochs + 1):
        model.train()
        running, correct, seen = 0.0, 0, 0
        for x, y in train_loader:
            logits = model(x)
            loss = criterion(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += loss.item() * len(y)
            correct += (logits.argmax(1) == y).sum().item()
            seen += len(y)
        print(f"epoch {epoch} train loss {running / seen:.4f} train acc {correct / seen:.3f} "
              f"val acc {evaluate(model, val_loader):.3f} lr {scheduler.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
