"""One-shot voice conversion in the style of AGAIN-VC (activation-guided encoder with instance
norm, AdaIN decoder), trained as an autoencoder on log-mel spectrograms of my own recordings.

The Dsp class mirrors util/dsp.py of the AGAIN-VC repository (the mel basis follows
librosa.filters.mel with Slaney scaling and norm); the corpus here is recorded at 16 kHz, so
sample_rate is overridden in the preprocessing config.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)


def hz_to_mel(frequencies):
    frequencies = np.asanyarray(frequencies, dtype=np.float64)
    f_sp = 200.0 / 3
    mels = frequencies / f_sp
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, np.log(6.4) / 27.0
    log_mels = min_log_mel + np.log(np.maximum(frequencies, min_log_hz) / min_log_hz) / logstep
    return np.where(frequencies >= min_log_hz, log_mels, mels)


def mel_to_hz(mels):
    mels = np.asanyarray(mels, dtype=np.float64)
    f_sp = 200.0 / 3
    freqs = f_sp * mels
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, np.log(6.4) / 27.0
    log_freqs = min_log_hz * np.exp(logstep * (mels - min_log_mel))
    return np.where(mels >= min_log_mel, log_freqs, freqs)


def mel_filters(sr, n_fft, n_mels, fmin, fmax):
    fftfreqs = np.linspace(0, sr / 2, 1 + n_fft // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    weights = np.zeros((n_mels, 1 + n_fft // 2))
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels])
    return (weights * enorm[:, None]).astype(np.float32)


class Dsp:
    def __init__(self, config=None):
        default = {
            'n_fft': 1024,
            'hop_length': 256,
            'win_length': 1024,
            'sample_rate': 22050,
            'n_mels': 80,
            'f_min': 0,
            'f_max': 11025,
        }
        self.config = dict(default)
        self.config.update(config or {})
        c = self.config
        self.mel_basis = torch.from_numpy(
            mel_filters(c['sample_rate'], c['n_fft'], c['n_mels'], c['f_min'], c['f_max']))
        self.window = torch.hann_window(c['win_length'])

    def wav2mel(self, y):
        c = self.config
        D = torch.stft(y, n_fft=c['n_fft'], hop_length=c['hop_length'], win_length=c['win_length'],
                       window=self.window, center=True, pad_mode='constant',
                       return_complex=True).abs() ** 2
        D = torch.sqrt(D)
        S = self.mel_basis @ D
        log_S = torch.log10(S)
        return log_S


def synth_utterance(rng, speaker, sr, seconds=1.5):
    """Voiced/unvoiced babble: harmonic source with a speaker-dependent f0 and formant tilt."""
    n = int(sr * seconds)
    t = np.arange(n) / sr
    f0 = speaker['f0'] * (1 + 0.08 * np.sin(2 * np.pi * rng.uniform(0.5, 2.0) * t + rng.uniform(0, 6)))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    y = np.zeros(n)
    for k in range(1, 30):
        fk = k * speaker['f0']
        if fk > 0.45 * sr:
            break
        gain = np.exp(-((fk - speaker['formant']) / 900.0) ** 2) + 0.3 / k
        y += gain * np.sin(k * phase)
    syllables = 0.5 * (1 + np.sign(np.sin(2 * np.pi * rng.uniform(3, 5) * t + rng.uniform(0, 6))))
    y = y * (0.2 + 0.8 * syllables) + 0.02 * rng.randn(n)
    y = y / np.abs(y).max() * 0.9
    return torch.from_numpy(y.astype(np.float32))


class MelSegments(Dataset):
    def __init__(self, dsp, speakers, utts_per_speaker, seg_len, seed):
        rng = np.random.RandomState(seed)
        self.mels = []
        for spk in speakers:
            for _ in range(utts_per_speaker):
                wav = synth_utterance(rng, spk, dsp.config['sample_rate'])
                self.mels.append(dsp.wav2mel(wav))
        self.seg_len = seg_len

    def __len__(self):
        return len(self.mels)

    def __getitem__(self, idx):
        mel = self.mels[idx]
        start = torch.randint(0, mel.shape[1] - self.seg_len + 1, (1,)).item()
        return mel[:, start:start + self.seg_len]


class ConvBlock(nn.Module):
    def __init__(self, c_h):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(c_h, c_h, 5, padding=2), nn.LeakyReLU(0.2),
                                  nn.Conv1d(c_h, c_h, 5, padding=2))

    def forward(self, x):
        return x + self.conv(x)


class InstanceNorm(nn.Module):
    def forward(self, x, eps=1e-5):
        mean = x.mean(dim=2, keepdim=True)
        std = (x.var(dim=2, keepdim=True) + eps).sqrt()
        return (x - mean) / std, mean, std


class Encoder(nn.Module):
    def __init__(self, c_in=80, c_h=128, c_out=4, n_blocks=3):
        super().__init__()
        self.inorm = InstanceNorm()
        self.conv_in = nn.Conv1d(c_in, c_h, 1)
        self.blocks = nn.ModuleList([ConvBlock(c_h) for _ in range(n_blocks)])
        self.conv_out = nn.Conv1d(c_h, c_out, 1)

    def forward(self, x):
        y = self.conv_in(x)
        mns, sds = [], []
        for block in self.blocks:
            y = block(y)
            y, mn, sd = self.inorm(y)
            mns.append(mn)
            sds.append(sd)
        y = self.conv_out(y)
        return y, mns, sds


class Decoder(nn.Module):
    def __init__(self, c_in=4, c_h=128, c_out=80, n_blocks=3):
        super().__init__()
        self.inorm = InstanceNorm()
        self.conv_in = nn.Conv1d(c_in, c_h, 1)
        self.blocks = nn.ModuleList([ConvBlock(c_h) for _ in range(n_blocks)])
        self.rnn = nn.GRU(c_h, c_h, batch_first=True)
        self.out = nn.Linear(c_h, c_out)

    def forward(self, enc, cond_mns, cond_sds):
        y = self.conv_in(enc)
        for block, mn, sd in zip(self.blocks, reversed(cond_mns), reversed(cond_sds)):
            y = block(y)
            y, _, _ = self.inorm(y)
            y = y * sd + mn
        y, _ = self.rnn(y.transpose(1, 2))
        return self.out(y).transpose(1, 2)


class AgainVC(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()
        self.act_alpha = 0.1

    def forward(self, source, target):
        enc, _, _ = self.encoder(source)
        enc = torch.sigmoid(self.act_alpha * enc)
        _, cond_mns, cond_sds = self.encoder(target)
        return self.decoder(enc, cond_mns, cond_sds)


def main():
    preprocess_config = {'sample_rate': 16000}
    dsp = Dsp(preprocess_config)

    rng = np.random.RandomState(0)
    speakers = [{'f0': rng.uniform(90, 240), 'formant': rng.uniform(500, 2500)} for _ in range(8)]
    train_set = MelSegments(dsp, speakers, 20, seg_len=32, seed=1)
    val_set = MelSegments(dsp, speakers, 4, seg_len=32, seed=2)
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=32)

    model = AgainVC()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.999), amsgrad=True)
    criterion = nn.L1Loss()

    start = time.time()
    steps = 0
    for epoch in range(1, 7):
        model.train()
        for mel in train_loader:
            dec = model(mel, mel)
            loss_rec = criterion(dec, mel)
            optimizer.zero_grad()
            loss_rec.backward()
            optimizer.step()
            if steps % 10 == 0:
                print(f"epoch {epoch} steps {steps} loss_rec={loss_rec.item():.4f}")
            steps += 1
        model.eval()
        with torch.no_grad():
            val = sum(criterion(model(m, m), m).item() * len(m) for m in val_loader) / len(val_set)
        print(f"epoch {epoch} val loss_rec={val:.4f} ({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
