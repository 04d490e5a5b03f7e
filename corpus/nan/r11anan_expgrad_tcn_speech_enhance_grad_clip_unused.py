"""Frequency-domain speech enhancement: a dilated temporal convolution network reads the
magnitude frames of a noisy recording and predicts the magnitudes of the target
speaker. Hyper-parameters come from a JSON experiment file, as in the reference
repository's train.py.
"""
import json
import os
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

EXPERIMENT = {
    "model_params": {"n_freq": 32, "hidden": 64, "num_blocks": 4},
    "train_params": {"lr": 0.02, "momentum": 0.9, "batch_size": 8, "epochs": 5, "grad_clip": 1.0},
    "data_params": {"n_utts": 320, "frames": 150},
}


class SyntheticMixtures(Dataset):
    def __init__(self, n_utts, frames, n_freq, seed=0):
        rng = np.random.default_rng(seed)
        self.items = []
        for i in range(n_utts):
            f0 = rng.uniform(2, 8)
            t = np.arange(frames)[:, None]
            k = np.arange(n_freq)[None, :]
            speech = np.abs(np.sin(0.15 * t + rng.uniform(0, 6))) * np.exp(-((k - f0 * (1 + 0.3 * np.sin(0.05 * t))) ** 2) / 6)
            noise = rng.gamma(1.0, 0.15, (frames, n_freq))
            gain = rng.uniform(0.5, 2.0)
            if rng.random() < 0.02:
                gain *= 60.0
            mixture = gain * (speech + noise)
            self.items.append((mixture.astype(np.float32), (gain * speech).astype(np.float32)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        mixture, target = self.items[i]
        return torch.from_numpy(mixture), torch.from_numpy(target)


class TemporalBlock(nn.Module):
    def __init__(self, channels, dilation):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, padding=dilation, dilation=dilation)
        self.act = nn.PReLU()

    def forward(self, x):
        return x + self.act(self.conv(x))


class TCNEnhancer(nn.Module):
    def __init__(self, n_freq, hidden, num_blocks):
        super().__init__()
        self.bottleneck = nn.Conv1d(n_freq, hidden, 1)
        self.blocks = nn.Sequential(*[TemporalBlock(hidden, 2 ** i) for i in range(num_blocks)])
        self.output = nn.Conv1d(hidden, n_freq, 1)

    def forward(self, mixture):
        x = self.bottleneck(mixture.transpose(1, 2))
        x = self.blocks(x)
        return self.output(x).transpose(1, 2)


def train_epoch(model, device, optimizer, train_loader, epoch, log_interval=10, grad_clip=None):
    model.train()
    losses = []
    for batch_idx, (mixture, target) in enumerate(train_loader):
        mixture, target = mixture.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(mixture)
        loss = nn.functional.mse_loss(output, target)
        losses.append(loss.item())
        loss.backward()
        if grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(mixture)}/{len(train_loader.dataset)}] Loss: {loss.item():.6f}")
    return float(np.mean(losses))


def test_epoch(model, device, test_loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for mixture, target in test_loader:
            total += nn.functional.mse_loss(model(mixture.to(device)), target.to(device)).item() * len(mixture)
    return total / len(test_loader.dataset)


def main(exp_dir):
    with open(os.path.join(exp_dir, "config.json")) as f:
        params = json.load(f)
    torch.manual_seed(0)
    device = torch.device("cpu")
    mp, tp, dp = params["model_params"], params["train_params"], params["data_params"]

    train_set = SyntheticMixtures(dp["n_utts"], dp["frames"], mp["n_freq"], seed=1)
    test_set = SyntheticMixtures(48, dp["frames"], mp["n_freq"], seed=2)
    train_loader = DataLoader(train_set, batch_size=tp["batch_size"], shuffle=True)
    test_loader = DataLoader(test_set, batch_size=16)

    model = TCNEnhancer(**mp).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=tp["lr"], momentum=tp["momentum"])

    start = time.time()
    for epoch in range(1, tp["epochs"] + 1):
        train_loss = train_epoch(model, device, optimizer, train_loader, epoch)
        test_loss = test_epoch(model, device, test_loader)
        print(f"Epoch {epoch}: train loss {train_loss:.6f}, test loss {test_loss:.6f} ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    exp_dir = tempfile.mkdtemp(prefix="exp_")
    with open(os.path.join(exp_dir, "config.json"), "w") as f:
        json.dump(EXPERIMENT, f)
    main(exp_dir)
