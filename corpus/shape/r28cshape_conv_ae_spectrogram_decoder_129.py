"""Convolutional autoencoder on audio spectrograms (deep_audio_features style).

Each clip is turned into a (1, 128, 201) spectrogram (128 frequency bins, 201
frames); the encoder compresses it and the decoder reconstructs it. The
bottleneck features are later used for audio classification.
"""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

SPECTOGRAM_SIZE = (128, 201)


class SpectrogramDataset(Dataset):
    """Synthetic harmonic sounds with a moving pitch and some noise, log-scaled to [0, 1]."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        n_freq, n_frames = SPECTOGRAM_SIZE
        freqs = torch.arange(n_freq).float()[:, None]
        t = torch.linspace(0, 1, n_frames)[None, :]
        self.items = []
        for _ in range(n):
            f0 = 6 + 10 * torch.rand(1, generator=g).item()
            slope = (torch.rand(1, generator=g).item() - 0.5) * 8
            spec = torch.zeros(n_freq, n_frames)
            for h in range(1, 6):
                centre = h * (f0 + slope * t)
                spec += torch.exp(-0.5 * ((freqs - centre) / 1.5) ** 2) / h
            onset = torch.rand(1, generator=g).item() * 0.5
            spec = spec * torch.sigmoid((t - onset) * 30)
            spec = spec + 0.05 * torch.rand(n_freq, n_frames, generator=g)
            spec = torch.log1p(10 * spec) / math.log1p(10 * 2.5)
            self.items.append(spec.clamp(0, 1).unsqueeze(0))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class ConvAE(nn.Module):
    def __init__(self):
        super(ConvAE, self).__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 5, stride=2, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=2),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=0),
            nn.ReLU(True),
            nn.ConvTranspose2d(16, 16, 5, stride=3, padding=2, output_padding=0),
            nn.ReLU(True),
            nn.ConvTranspose2d(16, 1, 7, stride=3, padding=2, output_padding=0),
            nn.Sigmoid(),
        )

    def forward(self, x):
        encoder = self.encoder(x)
        decoder = self.decoder(encoder)
        return encoder, decoder


def train_model(model, train_loader, valid_loader, epochs=4, lr=0.002):
    criterion = nn.MSELoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for epoch in range(1, epochs + 1):
        model.train()
        train_loss = 0.0
        for spectrograms in train_loader:
            optimizer.zero_grad()
            _, reconstructed = model(spectrograms)
            loss = criterion(reconstructed, spectrograms)
            loss.backward()
            optimizer.step()
            train_loss += loss.item() * spectrograms.size(0)
        train_loss /= len(train_loader.dataset)

        model.eval()
        valid_loss = 0.0
        with torch.no_grad():
            for spectrograms in valid_loader:
                _, reconstructed = model(spectrograms)
                valid_loss += criterion(reconstructed, spectrograms).item() * spectrograms.size(0)
        valid_loss /= len(valid_loader.dataset)
        print(f"Epoch {epoch}: train loss {train_loss:.5f}  valid loss {valid_loss:.5f}")
    return model


if __name__ == "__main__":
    train_loader = DataLoader(SpectrogramDataset(160, 1), batch_size=16, shuffle=True)
    valid_loader = DataLoader(SpectrogramDataset(48, 2), batch_size=16)
    model = ConvAE()
    train_model(model, train_loader, valid_loader)
