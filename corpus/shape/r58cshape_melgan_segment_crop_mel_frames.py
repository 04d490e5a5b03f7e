"""MelGAN vocoder training (generator + multi-scale discriminator, feature matching)
on a small custom speech set: a long recording split on silence into 2-5 s clips,
mel spectrograms precomputed once, random mel/audio segments cropped per item.
"""
import math
import random
import itertools
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

SEED = 40
torch.manual_seed(SEED)
np.random.seed(SEED)
random.seed(SEED)

hp = SimpleNamespace(
    train=SimpleNamespace(rep_discriminator=1, num_workers=0, batch_size=4,
                          adam=SimpleNamespace(lr=0.0001, beta1=0.5, beta2=0.9)),
    audio=SimpleNamespace(n_mel_channels=40, segment_length=2000, filter_length=1024, hop_length=256,
                          win_length=1024, sampling_rate=16000, mel_fmin=0.0, mel_fmax=8000.0),
    model=SimpleNamespace(feat_match=10.0),
    log=SimpleNamespace(summary_interval=10, validation_interval=2, epochs=6),
)


# ---------------------------------------------------------------- audio utils
def mel_filterbank(sr, n_fft, n_mels, fmin, fmax):
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    mels = np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2)
    hz = mel_to_hz(mels)
    bins = np.fft.rfftfreq(n_fft, 1.0 / sr)
    fb = np.zeros((n_mels, len(bins)), dtype=np.float32)
    for m in range(n_mels):
        lo, c, hi = hz[m], hz[m + 1], hz[m + 2]
        up = (bins - lo) / (c - lo)
        down = (hi - bins) / (hi - c)
        fb[m] = np.maximum(0.0, np.minimum(up, down))
    return torch.from_numpy(fb)


class TacotronSTFT:
    def __init__(self, filter_length, hop_length, win_length, n_mel_channels, sampling_rate, mel_fmin, mel_fmax):
        self.filter_length, self.hop_length, self.win_length = filter_length, hop_length, win_length
        self.window = torch.hann_window(win_length)
        self.mel_basis = mel_filterbank(sampling_rate, filter_length, n_mel_channels, mel_fmin, mel_fmax)

    def mel_spectrogram(self, y):
        # y: (1, T) in [-1, 1]; reflect-padded by filter_length / 2 on both sides like librosa
        spec = torch.stft(y, self.filter_length, self.hop_length, self.win_length, window=self.window,
                          center=True, pad_mode='reflect', return_complex=True)
        magnitudes = spec.abs()
        mel_output = torch.matmul(self.mel_basis, magnitudes)
        return torch.log(torch.clamp(mel_output, min=1e-5))


def record_podcast(rng, n_clips, sr):
    """Synthetic speech-like clips: voiced syllables (harmonics of a drifting f0) and noise bursts."""
    clips = []
    for _ in range(n_clips):
        n = int(rng.uniform(2.0, 5.0) * sr)
        t = np.arange(n) / sr
        f0 = rng.uniform(90, 220) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(0.5, 2.0) * t))
        phase = 2 * np.pi * np.cumsum(f0) / sr
        voiced = sum((0.6 / k) * np.sin(k * phase) for k in range(1, 8))
        env = np.clip(np.sin(2 * np.pi * rng.uniform(2.0, 5.0) * t + rng.uniform(0, 6.28)), 0, None) ** 2
        noise = rng.normal(0, 0.05, n) * (1 - env)
        wav = 0.5 * env * voiced + noise
        wav = np.round(wav / np.abs(wav).max() * 0.9 * 32767) / 32768.0
        clips.append(wav.astype(np.float32))
    return clips


# ---------------------------------------------------------------- data
class MelFromDisk(Dataset):
    def __init__(self, hp, wavs, mels, train):
        self.hp = hp
        self.train = train
        self.wavs, self.mels = wavs, mels
        self.mel_segment_length = hp.audio.segment_length // hp.audio.hop_length + 1
        self.mapping = [i for i in range(len(self.wavs))]

    def __len__(self):
        return len(self.wavs)

    def __getitem__(self, idx):
        if self.train:
            idx1 = idx
            idx2 = self.mapping[idx1]
            return self.my_getitem(idx1), self.my_getitem(idx2)
        else:
            return self.my_getitem(idx)

    def shuffle_mapping(self):
        random.shuffle(self.mapping)

    def my_getitem(self, idx):
        audio = torch.from_numpy(self.wavs[idx]).unsqueeze(0)
        mel = self.mels[idx]

        if self.train:
            max_mel_start = mel.size(1) - self.mel_segment_length
            mel_start = random.randint(0, max_mel_start)
            mel_end = mel_start + self.mel_segment_length
            mel = mel[:, mel_start:mel_end]

            audio_start = mel_start * self.hp.audio.hop_length
            audio = audio[:, audio_start:audio_start + self.hp.audio.segment_length]

        audio = audio + (1 / 32768) * torch.randn_like(audio)
        return mel, audio


# ---------------------------------------------------------------- models
wn = nn.utils.parametrizations.weight_norm


class ResStack(nn.Module):
    def __init__(self, channel):
        super(ResStack, self).__init__()
        self.blocks = nn.ModuleList([
            nn.Sequential(
                nn.LeakyReLU(0.2),
                nn.ReflectionPad1d(3 ** i),
                wn(nn.Conv1d(channel, channel, kernel_size=3, dilation=3 ** i)),
                nn.LeakyReLU(0.2),
                wn(nn.Conv1d(channel, channel, kernel_size=1)),
            )
            for i in range(3)
        ])
        self.shortcuts = nn.ModuleList([wn(nn.Conv1d(channel, channel, kernel_size=1)) for i in range(3)])

    def forward(self, x):
        for block, shortcut in zip(self.blocks, self.shortcuts):
            x = shortcut(x) + block(x)
        return x


class Generator(nn.Module):
    def __init__(self, mel_channel):
        super(Generator, self).__init__()
        self.mel_channel = mel_channel
        self.generator = nn.Sequential(
            nn.ReflectionPad1d(3),
            wn(nn.Conv1d(mel_channel, 64, kernel_size=7, stride=1)),
            nn.LeakyReLU(0.2),
            wn(nn.ConvTranspose1d(64, 32, kernel_size=16, stride=8, padding=4)),
            ResStack(32),
            nn.LeakyReLU(0.2),
            wn(nn.ConvTranspose1d(32, 16, kernel_size=16, stride=8, padding=4)),
            ResStack(16),
            nn.LeakyReLU(0.2),
            wn(nn.ConvTranspose1d(16, 8, kernel_size=4, stride=2, padding=1)),
            nn.LeakyReLU(0.2),
            wn(nn.ConvTranspose1d(8, 8, kernel_size=4, stride=2, padding=1)),
            nn.LeakyReLU(0.2),
            nn.ReflectionPad1d(3),
            wn(nn.Conv1d(8, 1, kernel_size=7, stride=1)),
            nn.Tanh(),
        )

    def forward(self, mel):
        mel = (mel + 5.0) / 5.0  # roughly normalize spectrogram
        return self.generator(mel)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.discriminator = nn.ModuleList([
            nn.Sequential(nn.ReflectionPad1d(7), wn(nn.Conv1d(1, 8, kernel_size=15, stride=1)), nn.LeakyReLU(0.2, inplace=True)),
            nn.Sequential(wn(nn.Conv1d(8, 16, kernel_size=41, stride=4, padding=20, groups=4)), nn.LeakyReLU(0.2, inplace=True)),
            nn.Sequential(wn(nn.Conv1d(16, 32, kernel_size=41, stride=4, padding=20, groups=8)), nn.LeakyReLU(0.2, inplace=True)),
            nn.Sequential(wn(nn.Conv1d(32, 32, kernel_size=5, stride=1, padding=2)), nn.LeakyReLU(0.2, inplace=True)),
            wn(nn.Conv1d(32, 1, kernel_size=3, stride=1, padding=1)),
        ])

    def forward(self, x):
        features = list()
        for module in self.discriminator:
            x = module(x)
            features.append(x)
        return features[:-1], features[-1]


class MultiScaleDiscriminator(nn.Module):
    def __init__(self):
        super(MultiScaleDiscriminator, self).__init__()
        self.discriminators = nn.ModuleList([Discriminator() for _ in range(3)])
        self.pooling = nn.ModuleList(
            [nn.Identity()] + [nn.AvgPool1d(kernel_size=4, stride=2, padding=1, count_include_pad=False) for _ in range(1, 3)])

    def forward(self, x):
        ret = list()
        for pool, disc in zip(self.pooling, self.discriminators):
            x = pool(x)
            ret.append(disc(x))
        return ret  # [(feat, score), (feat, score), (feat, score)]


# ---------------------------------------------------------------- train / validate
def validate(hp, generator, discriminator, valloader, step):
    generator.eval()
    discriminator.eval()
    loss_g_sum = 0.0
    for mel, audio in valloader:
        fake_audio = generator(mel)[:, :, :audio.size(2)]
        disc_fake = discriminator(fake_audio)
        disc_real = discriminator(audio)
        loss_g = 0.0
        for (feats_fake, score_fake), (feats_real, _) in zip(disc_fake, disc_real):
            loss_g += torch.mean(torch.sum(torch.pow(score_fake - 1.0, 2), dim=[1, 2]))
            for feat_f, feat_r in zip(feats_fake, feats_real):
                loss_g += hp.model.feat_match * torch.mean(torch.abs(feat_f - feat_r))
        loss_g_sum += loss_g.item()
    print("validation | step %d | g %.4f" % (step, loss_g_sum / len(valloader)))
    generator.train()
    discriminator.train()


def train(hp, trainloader, valloader):
    model_g = Generator(hp.audio.n_mel_channels)
    model_d = MultiScaleDiscriminator()
    optim_g = torch.optim.Adam(model_g.parameters(), lr=hp.train.adam.lr, betas=(hp.train.adam.beta1, hp.train.adam.beta2))
    optim_d = torch.optim.Adam(model_d.parameters(), lr=hp.train.adam.lr, betas=(hp.train.adam.beta1, hp.train.adam.beta2))

    step = 0
    model_g.train()
    model_d.train()
    for epoch in itertools.count(0):
        if epoch == hp.log.epochs:
            break
        if epoch % hp.log.validation_interval == 0:
            with torch.no_grad():
                validate(hp, model_g, model_d, valloader, step)

        trainloader.dataset.shuffle_mapping()
        for (melG, audioG), (melD, audioD) in trainloader:
            # generator
            optim_g.zero_grad()
            fake_audio = model_g(melG)[:, :, :hp.audio.segment_length]
            disc_fake = model_d(fake_audio)
            disc_real = model_d(audioG)
            loss_g = 0.0
            for (feats_fake, score_fake), (feats_real, _) in zip(disc_fake, disc_real):
                loss_g += torch.mean(torch.sum(torch.pow(score_fake - 1.0, 2), dim=[1, 2]))
                for feat_f, feat_r in zip(feats_fake, feats_real):
                    loss_g += hp.model.feat_match * torch.mean(torch.abs(feat_f - feat_r))
            loss_g.backward()
            optim_g.step()

            # discriminator
            fake_audio = model_g(melD)[:, :, :hp.audio.segment_length]
            fake_audio = fake_audio.detach()
            loss_d_sum = 0.0
            for _ in range(hp.train.rep_discriminator):
                optim_d.zero_grad()
                disc_fake = model_d(fake_audio)
                disc_real = model_d(audioD)
                loss_d = 0.0
                for (_, score_fake), (_, score_real) in zip(disc_fake, disc_real):
                    loss_d += torch.mean(torch.sum(torch.pow(score_real - 1.0, 2), dim=[1, 2]))
                    loss_d += torch.mean(torch.sum(torch.pow(score_fake, 2), dim=[1, 2]))
                loss_d.backward()
                optim_d.step()
                loss_d_sum += loss_d

            step += 1
            loss_g = loss_g.item()
            loss_d_avg = (loss_d_sum / hp.train.rep_discriminator).item()
            if any([loss_g > 1e8, math.isnan(loss_g), loss_d_avg > 1e8, math.isnan(loss_d_avg)]):
                raise Exception("Loss exploded")
            if step % hp.log.summary_interval == 0:
                print("epoch %d | g %.4f d %.4f | step %d" % (epoch, loss_g, loss_d_avg, step))
    with torch.no_grad():
        validate(hp, model_g, model_d, valloader, step)


def main():
    rng = np.random.RandomState(1)
    stft = TacotronSTFT(filter_length=hp.audio.filter_length, hop_length=hp.audio.hop_length,
                        win_length=hp.audio.win_length, n_mel_channels=hp.audio.n_mel_channels,
                        sampling_rate=hp.audio.sampling_rate, mel_fmin=hp.audio.mel_fmin, mel_fmax=hp.audio.mel_fmax)
    wavs = record_podcast(rng, 102, hp.audio.sampling_rate)
    # preprocess: wav -> mel, once
    mels = [stft.mel_spectrogram(torch.from_numpy(w).unsqueeze(0)).squeeze(0) for w in wavs]
    print("%d clips, %.1f s of audio, mel frames %d..%d" % (
        len(wavs), sum(len(w) for w in wavs) / hp.audio.sampling_rate, min(m.size(1) for m in mels), max(m.size(1) for m in mels)))

    trainset = MelFromDisk(hp, wavs[:100], mels[:100], train=True)
    valset = MelFromDisk(hp, wavs[100:], mels[100:], train=False)
    trainloader = DataLoader(dataset=trainset, batch_size=hp.train.batch_size, shuffle=True,
                             num_workers=hp.train.num_workers, drop_last=True)
    valloader = DataLoader(dataset=valset, batch_size=1, shuffle=False, num_workers=hp.train.num_workers, drop_last=False)
    train(hp, trainloader, valloader)


if __name__ == '__main__':
    main()
