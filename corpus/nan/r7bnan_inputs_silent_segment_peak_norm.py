"""HiFi-GAN style vocoder generator trained with the mel-spectrogram L1 loss (the reconstruction
term of HiFi-GAN, here without the discriminators), with the data pipeline of bshall/hifigan:
MelDataset crops a random segment of every utterance, applies a random gain and polarity flip
while peak-normalising the segment, and computes the log-mel spectrogram that the generator has
to turn back into a waveform.

The "recordings" are synthetic 8 kHz voiced utterances (harmonic source with a pitch contour
and formant-like amplitude envelope) of one to two seconds, stored as float waveforms in memory
instead of wav files.
"""
import math
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

random.seed(2)
np.random.seed(2)
torch.manual_seed(2)

SAMPLE_RATE = 8000
N_FFT = 512
HOP_LENGTH = 128
N_MELS = 40
SEGMENT_LENGTH = 2048


def mel_filterbank(sr, n_fft, n_mels, fmin=0.0, fmax=None):
    fmax = fmax or sr / 2
    hz_to_mel = lambda f: 2595.0 * np.log10(1.0 + f / 700.0)
    mel_to_hz = lambda m: 700.0 * (10 ** (m / 2595.0) - 1.0)
    mels = np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2)
    hz = mel_to_hz(mels)
    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    fb = np.zeros((n_mels, n_fft // 2 + 1))
    for i in range(n_mels):
        lower = (freqs - hz[i]) / (hz[i + 1] - hz[i])
        upper = (hz[i + 2] - freqs) / (hz[i + 2] - hz[i + 1])
        fb[i] = np.maximum(0, np.minimum(lower, upper)) * 2.0 / (hz[i + 2] - hz[i])
    return torch.tensor(fb, dtype=torch.float32)


class LogMelSpectrogram(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(N_FFT))
        self.register_buffer("mel_basis", mel_filterbank(SAMPLE_RATE, N_FFT, N_MELS))

    def forward(self, wav):
        wav = F.pad(wav, ((N_FFT - HOP_LENGTH) // 2, (N_FFT - HOP_LENGTH) // 2), "reflect")
        spec = torch.stft(wav.squeeze(1), N_FFT, HOP_LENGTH, N_FFT, self.window, center=False, return_complex=True)
        mel = torch.matmul(self.mel_basis, spec.abs())
        logmel = torch.log(torch.clamp(mel, min=1e-5))
        return logmel


def synth_utterance(rng):
    n = int(SAMPLE_RATE * rng.uniform(0.9, 1.6))
    t = np.arange(n) / SAMPLE_RATE
    f0 = rng.uniform(90, 220) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(1, 3) * t))
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    formant = rng.uniform(400, 1200)
    wav = sum(np.exp(-((k * f0 - formant) / 600.0) ** 2) * np.sin(k * phase) / k for k in range(1, 16))
    syllables = np.abs(np.sin(np.pi * rng.uniform(2, 5) * t)) ** 0.5
    wav = wav * syllables + 0.005 * rng.standard_normal(n)
    wav = 0.3 * wav / np.abs(wav).max()
    if rng.random() < 0.005:
        wav = np.concatenate([wav, np.zeros(int(SAMPLE_RATE * rng.uniform(1.0, 1.5)))])
    return torch.tensor(wav, dtype=torch.float32).unsqueeze(0)


class MelDataset(Dataset):
    def __init__(self, n_utterances, segment_length, train=True):
        rng = np.random.default_rng(0)
        self.wavs = [synth_utterance(rng) for _ in range(n_utterances)]
        self.segment_length = segment_length
        self.train = train
        self.logmel = LogMelSpectrogram()

    def __len__(self):
        return len(self.wavs)

    def __getitem__(self, index):
        wav = self.wavs[index]
        frame_diff = wav.size(-1) - self.segment_length
        frame_offset = random.randint(0, max(frame_diff, 0))
        wav = wav[:, frame_offset:frame_offset + self.segment_length]
        if wav.size(-1) < self.segment_length:
            wav = F.pad(wav, (0, self.segment_length - wav.size(-1)))

        if self.train:
            gain = random.random() * (0.99 - 0.4) + 0.4
            flip = -1 if random.random() > 0.5 else 1
            wav = flip * gain * wav / wav.abs().max()

        tgt_logmel = self.logmel(wav.unsqueeze(0)).squeeze(0)
        src_logmel = tgt_logmel.clone()
        return wav, src_logmel, tgt_logmel


class Generator(nn.Module):
    def __init__(self, n_mels=N_MELS, channels=64):
        super().__init__()
        self.conv_pre = nn.Conv1d(n_mels, channels, 7, padding=3)
        self.ups = nn.ModuleList([
            nn.ConvTranspose1d(channels, channels // 2, 16, stride=8, padding=4),
            nn.ConvTranspose1d(channels // 2, channels // 4, 16, stride=8, padding=4),
            nn.ConvTranspose1d(channels // 4, channels // 8, 4, stride=2, padding=1),
        ])
        self.resblocks = nn.ModuleList([
            nn.Conv1d(channels // 2, channels // 2, 7, padding=3),
            nn.Conv1d(channels // 4, channels // 4, 7, padding=3),
            nn.Conv1d(channels // 8, channels // 8, 7, padding=3),
        ])
        self.conv_post = nn.Conv1d(channels // 8, 1, 7, padding=3)

    def forward(self, x):
        x = self.conv_pre(x)
        for up, res in zip(self.ups, self.resblocks):
            x = up(F.leaky_relu(x, 0.1))
            x = x + res(F.leaky_relu(x, 0.1))
        return torch.tanh(self.conv_post(F.leaky_relu(x, 0.1)))


def main():
    dataset = MelDataset(200, SEGMENT_LENGTH, train=True)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, drop_last=True)
    generator = Generator()
    melspectrogram = LogMelSpectrogram()
    optimizer = torch.optim.AdamW(generator.parameters(), lr=2e-4, betas=(0.8, 0.99))
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.999)

    global_step = 0
    for epoch in range(1, 7):
        generator.train()
        average_loss = 0.0
        for i, (wavs, src_logmels, tgt_logmels) in enumerate(loader, 1):
            wavs_ = generator(src_logmels)
            logmels_ = melspectrogram(wavs_)
            loss = F.l1_loss(logmels_, tgt_logmels)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            global_step += 1

            average_loss += (loss.item() - average_loss) / i
            if global_step % 10 == 0:
                print(f"train -- epoch: {epoch}, step: {global_step}, mel loss: {loss.item():.4f}")
        print(f"=== epoch {epoch} average mel loss: {average_loss:.4f}")


if __name__ == "__main__":
    main()
