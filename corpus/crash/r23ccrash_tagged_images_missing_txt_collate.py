"""Tag-conditioned image denoiser trained on a scraped folder of images + tag files.

Every image crop_XXXX.npy should come with crop_XXXX.txt holding its comma separated tags
("red, circle, large"). Tag files are preloaded into multi-hot vectors; the model learns to
reconstruct the clean image from a noisy copy and the tag vector.
"""
import os
import random
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

COLOURS = {"red": (1.0, 0.1, 0.1), "green": (0.1, 0.9, 0.2), "blue": (0.1, 0.2, 1.0), "yellow": (1.0, 0.9, 0.1)}
SHAPES = ["circle", "square"]
SIZES = {"small": 3.0, "large": 6.0}


def scrape_folder(root, n=320, size=16, seed=0):
    rnd = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    for i in range(n):
        colour = rnd.choice(list(COLOURS))
        shape = rnd.choice(SHAPES)
        sz = rnd.choice(list(SIZES))
        r = SIZES[sz]
        if shape == "circle":
            mask = (xx - 8) ** 2 + (yy - 8) ** 2 < r ** 2
        else:
            mask = (abs(xx - 8) < r) & (abs(yy - 8) < r)
        img = mask[..., None] * np.array(COLOURS[colour])[None, None, :]
        np.save(root / f"crop_{i:04d}.npy", img.astype(np.float32))
        if i in (141, 229):
            continue
        (root / f"crop_{i:04d}.txt").write_text(", ".join([colour, shape, sz]))


def get_vocab(txt_files):
    tags = set()
    for t in txt_files:
        tags.update(t.read_text().split(", "))
    return sorted(tags)


class ImageLabelDataset:
    def __init__(self, images, txts, vocab, noise=0.3):
        self.images = images
        self.vocab = {t: i for i, t in enumerate(vocab)}
        self.noise = noise
        self.txts_oh = {}
        for txt in txts:
            oh = torch.zeros(len(self.vocab))
            for tag in txt.read_text().split(", "):
                oh[self.vocab[tag]] = 1.0
            self.txts_oh[txt.stem] = oh

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        img = self.images[index]
        clean = torch.from_numpy(np.load(img)).permute(2, 0, 1)
        noisy = clean + self.noise * torch.randn_like(clean)
        muh_oh = self.txts_oh.get(img.stem, None)
        return noisy, clean, muh_oh


class CondDenoiser(nn.Module):
    def __init__(self, n_tags, dim=32):
        super().__init__()
        self.tag_proj = nn.Linear(n_tags, dim)
        self.conv_in = nn.Conv2d(3, dim, 3, padding=1)
        self.conv_mid = nn.Conv2d(dim, dim, 3, padding=1)
        self.conv_out = nn.Conv2d(dim, 3, 3, padding=1)

    def forward(self, x, tags):
        h = F.relu(self.conv_in(x) + self.tag_proj(tags)[:, :, None, None])
        h = F.relu(self.conv_mid(h))
        return self.conv_out(h)


def main():
    torch.manual_seed(0)
    random.seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "scraped"
        os.makedirs(root)
        scrape_folder(root)
        imgs = sorted(root.glob("*.npy"))
        txts = sorted(root.glob("*.txt"))
        vocab = get_vocab(txts)
        print(f"{len(imgs)} images, {len(txts)} tag files, vocab: {vocab}")

        data = ImageLabelDataset(imgs, txts, vocab)
        dl = DataLoader(data, batch_size=8, shuffle=True, num_workers=2)

        model = CondDenoiser(len(vocab))
        opt = torch.optim.Adam(model.parameters(), lr=2e-3)

        for epoch in range(1, 4):
            step = 0
            epoch_loss = 0.0
            for noisy, clean, tags in dl:
                step += 1
                loss = F.mse_loss(model(noisy, tags), clean)
                opt.zero_grad()
                loss.backward()
                opt.step()
                epoch_loss += loss.item()
                if step % 10 == 0:
                    print(f"epoch {epoch}/3 step {step}/{len(dl)} loss: {loss.item():.5f}")
            print(f"epoch {epoch} mean loss {epoch_loss / step:.5f}")


if __name__ == "__main__":
    main()
