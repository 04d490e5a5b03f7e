"""Stand-alone self-attention network on images (attention between pixels instead of convolutions).

A 1x1 lifting layer embeds every pixel, then self-attention blocks mix information between
pixels (globally, or inside local windows of patch_size x patch_size pixels), followed
by global pooling and a linear classifier. Trained on a synthetic 4-class shape data set.
"""
import argparse
import logging
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger("sa_train")


def make_shapes(n, size, seed):
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    images = np.zeros((n, 1, size, size), dtype=np.float32)
    labels = rng.randint(0, 4, size=n)
    for i in range(n):
        cx, cy, r = rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7), rng.uniform(0.12, 0.25)
        dx, dy = xx - cx, yy - cy
        if labels[i] == 0:
            m = dx ** 2 + dy ** 2 < r ** 2
        elif labels[i] == 1:
            m = (np.abs(dx) < r) & (np.abs(dy) < r)
        elif labels[i] == 2:
            m = (np.abs(dx) + np.abs(dy)) < r
        else:
            m = ((np.abs(dx) < r) & (np.abs(dy) < r / 4)) | ((np.abs(dy) < r) & (np.abs(dx) < r / 4))
        images[i, 0] = m + 0.3 * rng.randn(size, size)
    return torch.from_numpy(images), torch.from_numpy(labels)


class PixelSelfAttention(nn.Module):
    def __init__(self, dim, num_heads, patch_size):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.patch_size = patch_size
        self.qkv = nn.Conv2d(dim, 3 * dim, kernel_size=1)
        self.proj = nn.Conv2d(dim, dim, kernel_size=1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=1)
        scale = 1.0 / math.sqrt(self.head_dim)
        if self.patch_size == -1:
            q = q.reshape(b, self.num_heads, self.head_dim, h * w).transpose(-1, -2)
            k = k.reshape(b, self.num_heads, self.head_dim, h * w)
            v = v.reshape(b, self.num_heads, self.head_dim, h * w).transpose(-1, -2)
            attn = torch.matmul(q, k) * scale
            attn = attn.softmax(dim=-1)
            out = torch.matmul(attn, v).transpose(-1, -2)
        else:
            p = self.patch_size
            def windows(t):
                t = t.reshape(b, self.num_heads, self.head_dim, h // p, p, w // p, p)
                return t.permute(0, 1, 3, 5, 4, 6, 2).reshape(b, self.num_heads, -1, p * p, self.head_dim)
            qw, kw, vw = windows(q), windows(k), windows(v)
            attn = torch.matmul(qw, kw.transpose(-1, -2)) * scale
            attn = attn.softmax(dim=-1)
            out = torch.matmul(attn, vw)
            out = out.reshape(b, self.num_heads, h // p, w // p, p, p, self.head_dim)
            out = out.permute(0, 1, 6, 2, 4, 3, 5)
        return self.proj(out.reshape(b, c, h, w))


class SelfAttentionNet(nn.Module):
    def __init__(self, in_channels, hidden, num_blocks, num_heads, patch_size, num_classes):
        super().__init__()
        self.lifting = nn.Conv2d(in_channels, hidden, kernel_size=1)
        self.blocks = nn.ModuleList()
        for _ in range(num_blocks):
            self.blocks.append(nn.ModuleDict({
                "norm1": nn.BatchNorm2d(hidden),
                "attention": PixelSelfAttention(hidden, num_heads, patch_size),
                "norm2": nn.BatchNorm2d(hidden),
                "mlp": nn.Sequential(nn.Conv2d(hidden, 2 * hidden, 1), nn.ReLU(),
                                     nn.Conv2d(2 * hidden, hidden, 1)),
            }))
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x):
        x = self.lifting(x)
        for blk in self.blocks:
            x = x + blk["attention"](blk["norm1"](x))
            x = x + blk["mlp"](blk["norm2"](x))
        return self.head(x.mean(dim=(2, 3)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--image_size", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--num_blocks", type=int, default=2)
    parser.add_argument("--num_heads", type=int, default=4)
    parser.add_argument("--patch_size", type=int, default=-1, help="-1: global self-attention")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)

    x_train, y_train = make_shapes(256, args.image_size, seed=1)
    x_test, y_test = make_shapes(128, args.image_size, seed=2)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=32)

    model = SelfAttentionNet(1, args.hidden, args.num_blocks, args.num_heads, args.patch_size, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    log.info("model with %d parameters, image %dx%d, patch_size %d",
             sum(p.numel() for p in model.parameters()), args.image_size, args.image_size,
             args.patch_size)

    for epoch in range(args.epochs):
        model.train()
        start = time.time()
        for i, (inputs, labels) in enumerate(train_loader):
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            if i % 8 == 0:
                log.info("epoch %d iter %3d loss %.4f", epoch, i, loss.item())
        model.eval()
        correct = 0
        with torch.no_grad():
            for inputs, labels in test_loader:
                correct += (model(inputs).argmax(1) == labels).sum().item()
        log.info("epoch %d done in %.1fs, test accuracy %.3f", epoch, time.time() - start,
                 correct / len(x_test))


if __name__ == "__main__":
    main()
