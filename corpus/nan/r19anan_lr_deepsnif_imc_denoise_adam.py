"""Self-supervised denoising of one imaging mass cytometry (IMC) channel, DeepSNiF-style, in
PyTorch: image patches of ion counts are normalised by a truncated maximum, a small fraction of
pixels in each patch is replaced by a random neighbour (Noise2Void blind-spot masking), and a
residual U-Net with a softplus output is trained to predict the original counts at the masked
pixels with the I-divergence loss plus a small high-frequency (second-derivative) penalty.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(42)
np.random.seed(42)

PATCH = 24
N_PATCHES = 400
BATCH_SIZE = 8
EPOCHS = 3
MASK_PERC_PIX = 2.0
LAMBDA_HF = 3e-6
TRUNCATED_MAX_RATE = 0.99999
train_initial_lr = 1


def simulate_channel(rng, n):
    """Poisson ion counts of a membrane marker: cells as bright rings on a dark background."""
    yy, xx = np.mgrid[0:PATCH, 0:PATCH]
    patches = np.zeros((n, PATCH, PATCH), dtype=np.float32)
    for k in range(n):
        rate = np.full((PATCH, PATCH), 0.05)
        for _ in range(rng.integers(2, 7)):
            cy, cx = rng.uniform(0, PATCH, 2)
            r = np.hypot(yy - cy, xx - cx)
            rate += rng.uniform(3, 12) * np.exp(-((r - rng.uniform(3, 6)) ** 2) / 1.5)
        patches[k] = rng.poisson(rate)
        hot = rng.random((PATCH, PATCH)) < 0.002
        patches[k][hot] += rng.integers(20, 60, hot.sum())
    return patches


class DeepSNiFTrainData(Dataset):
    def __init__(self, X, mask_perc_pix, radius=2):
        self.X = X
        self.n_mask = max(1, int(round(PATCH * PATCH * mask_perc_pix / 100.0)))
        self.radius = radius
        self.rng = np.random.default_rng(7)

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        target = self.X[i]
        inp = target.copy()
        mask = np.zeros_like(target)
        ys = self.rng.integers(0, PATCH, self.n_mask)
        xs = self.rng.integers(0, PATCH, self.n_mask)
        for y, x in zip(ys, xs):
            ny = np.clip(y + self.rng.integers(-self.radius, self.radius + 1), 0, PATCH - 1)
            nx = np.clip(x + self.rng.integers(-self.radius, self.radius + 1), 0, PATCH - 1)
            inp[y, x] = target[ny, nx]
            mask[y, x] = 1.0
        return (torch.from_numpy(inp)[None], torch.from_numpy(target)[None],
                torch.from_numpy(mask)[None])


class ResBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.skip = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn_act = nn.BatchNorm2d(cout)

    def forward(self, x):
        h = self.conv2(F.relu(self.bn1(self.conv1(x))))
        return F.relu(self.bn_act(h + self.skip(x)))


class DeepSNiFNet(nn.Module):
    def __init__(self, f=32):
        super().__init__()
        self.enc1 = ResBlock(1, f)
        self.enc2 = ResBlock(f, 2 * f)
        self.enc3 = ResBlock(2 * f, 4 * f)
        self.drop = nn.Dropout(0.5)
        self.dec2 = ResBlock(6 * f, 2 * f)
        self.dec1 = ResBlock(3 * f, f)
        self.prediction = nn.Conv2d(f, 1, 1, bias=False)

    def forward(self, x):
        f1 = self.enc1(x)
        f2 = self.enc2(F.max_pool2d(f1, 2))
        f3 = self.drop(self.enc3(F.max_pool2d(f2, 2)))
        d2 = self.dec2(torch.cat([f2, F.interpolate(f3, scale_factor=2)], 1))
        d1 = self.dec1(torch.cat([f1, F.interpolate(d2, scale_factor=2)], 1))
        return F.softplus(self.prediction(d1))


def hf_regularization(img):
    dx = img[:, :, 1:, :] - img[:, :, :-1, :]
    dy = img[:, :, :, 1:] - img[:, :, :, :-1]
    dxx = dx[:, :, 1:, :] - dx[:, :, :-1, :]
    dyy = dy[:, :, :, 1:] - dy[:, :, :, :-1]
    dxy = dx[:, :, :, 1:] - dx[:, :, :, :-1]
    return (dxx.abs().sum((1, 2, 3)) + dyy.abs().sum((1, 2, 3))
            + 2 ** 0.5 * dxy.abs().sum((1, 2, 3)))


def weighted_i_divergence(target, mask, y_pred, lambda_hf=LAMBDA_HF):
    loss1 = target * torch.log(target + 1e-15)
    loss2 = target * torch.log(y_pred)
    i_div = (loss1 - loss2 - target + y_pred) * mask
    return i_div.sum() / mask.sum() + lambda_hf * hf_regularization(y_pred).mean()


def main():
    rng = np.random.default_rng(42)
    X = simulate_channel(rng, N_PATCHES)
    range_val = 1.1 * np.quantile(X, TRUNCATED_MAX_RATE)
    X = np.clip(X / range_val, 0.0, 1.0).astype(np.float32)
    print(f"patches {X.shape}, range value {range_val:.2f}")
    n_val = int(0.15 * len(X))
    train_loader = DataLoader(DeepSNiFTrainData(X[n_val:], MASK_PERC_PIX), batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(DeepSNiFTrainData(X[:n_val], MASK_PERC_PIX), batch_size=64)

    model = DeepSNiFNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=train_initial_lr)

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        losses = []
        for inp, target, mask in train_loader:
            y_pred = model(inp)
            loss = weighted_i_divergence(target, mask, y_pred)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
            if step % 10 == 0 or step <= 5:
                print(f"epoch {epoch + 1} step {step} loss {loss.item():.5f}")
        model.eval()
        with torch.no_grad():
            val = [weighted_i_divergence(t, m, model(i)).item() for i, t, m in val_loader]
        print(f"Epoch {epoch + 1}/{EPOCHS} - loss: {np.mean(losses):.5f} - val_loss: {np.mean(val):.5f}")


if __name__ == "__main__":
    main()
