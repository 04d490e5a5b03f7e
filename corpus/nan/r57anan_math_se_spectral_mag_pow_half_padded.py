"""Spectral-mask speech enhancement (8 kHz): a small CNN predicts a mask on the noisy STFT,
the masked spectrum is resynthesised, and the loss is the L1 distance between the
spectral magnitudes of the enhanced and the clean waveforms."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(10)
rng = np.random.default_rng(10)

SR, SEG = 8000, 8000
N_FFT, HOP = 256, 128
WINDOW = torch.hann_window(N_FFT)


def synth_utterance(n):
    t = np.arange(n) / SR
    f0 = rng.uniform(100, 230) * (1 + 0.08 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * t))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    formants = rng.uniform([500, 1200, 2400], [800, 1800, 3000])
    x = np.zeros(n)
    for k in range(1, 25):
        fk = k * f0.mean()
        if fk > 3800:
            break
        gain = sum(np.exp(-((fk - f) / 180.0) ** 2) for f in formants) + 0.05
        x += gain / k ** 0.5 * np.sin(k * phase)
    syll = np.clip(np.sin(2 * np.pi * rng.uniform(3, 5) * t + rng.uniform(0, 6)), 0, None) ** 0.7
    x = x * (0.05 + syll)
    return (0.3 * x / (np.abs(x).max() + 1e-8)).astype(np.float32)


def synth_noise(n):
    white = rng.normal(size=n + 64)
    pink = np.convolve(white, np.exp(-np.arange(64) / 12.0), mode="valid")[:n]
    hum = 0.3 * np.sin(2 * np.pi * 50 * np.arange(n) / SR + rng.uniform(0, 6))
    return (pink / pink.std() + hum).astype(np.float32)


class NoisySpeech(Dataset):
    def __init__(self, n_utts):
        self.items = []
        for _ in range(n_utts):
            n = SEG if rng.random() > 0.01 else int(rng.uniform(0.4, 0.8) * SEG)
            clean = synth_utterance(n)
            noise = synth_noise(n)
            snr = rng.uniform(0, 10)
            noise *= np.sqrt((clean ** 2).mean() / (noise ** 2).mean() / 10 ** (snr / 10))
            self.items.append((torch.from_numpy(clean + noise), torch.from_numpy(clean)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def padded_batch(batch):
    lens = torch.tensor([len(noisy) for noisy, _ in batch])
    noisy = torch.zeros(len(batch), int(lens.max()))
    clean = torch.zeros(len(batch), int(lens.max()))
    for i, (n, c) in enumerate(batch):
        noisy[i, :len(n)] = n
        clean[i, :len(c)] = c
    return noisy, clean, lens


def compute_stft(wav):
    spec = torch.stft(wav, N_FFT, HOP, window=WINDOW, return_complex=True)
    return torch.view_as_real(spec).transpose(1, 2)  # (B, T, F, 2)


def spectral_magnitude(stft, power=1):
    spectr = stft.pow(2).sum(-1)
    return spectr.pow(power)


def resynth(stft, length):
    spec = torch.view_as_complex(stft.transpose(1, 2).contiguous())
    return torch.istft(spec, N_FFT, HOP, window=WINDOW, length=length)


class MaskNet(nn.Module):
    def __init__(self, n_freq=N_FFT // 2 + 1, hidden=128):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv1d(n_freq, hidden, 5, padding=2), nn.ReLU(),
            nn.Conv1d(hidden, hidden, 5, padding=2), nn.ReLU(),
        )
        self.out = nn.Linear(hidden, n_freq)

    def forward(self, feats):
        h = self.convs(feats.transpose(1, 2)).transpose(1, 2)
        return torch.sigmoid(self.out(h))


def enhance(model, noisy):
    noisy_stft = compute_stft(noisy)
    feats = torch.log1p(spectral_magnitude(noisy_stft, power=0.5))
    mask = model(feats)
    enhanced_stft = noisy_stft * mask.unsqueeze(-1)
    return resynth(enhanced_stft, noisy.shape[-1])


def snr_db(est, ref):
    return 10 * torch.log10((ref ** 2).sum(-1) / ((est - ref) ** 2).sum(-1).clamp_min(1e-10))


def main():
    train_set, valid_set = NoisySpeech(240), NoisySpeech(40)
    train_loader = DataLoader(train_set, batch_size=8, shuffle=True, collate_fn=padded_batch)
    valid_loader = DataLoader(valid_set, batch_size=16, collate_fn=padded_batch)
    model = MaskNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"{len(train_set)} training utterances, {sum(p.numel() for p in model.parameters())} parameters")

    step = 0
    for epoch in range(4):
        model.train()
        for noisy, clean, lens in train_loader:
            enhanced = enhance(model, noisy)
            enh_mag = spectral_magnitude(compute_stft(enhanced), power=0.5)
            clean_mag = spectral_magnitude(compute_stft(clean), power=0.5)
            loss = nn.functional.l1_loss(enh_mag, clean_mag)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d}  l1 mag loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            gains = []
            for noisy, clean, lens in valid_loader:
                enhanced = enhance(model, noisy)
                gains.append((snr_db(enhanced, clean) - snr_db(noisy, clean)).mean().item())
        print(f"epoch {epoch}  valid SNR improvement {np.mean(gains):+.2f} dB")


if __name__ == "__main__":
    main()
