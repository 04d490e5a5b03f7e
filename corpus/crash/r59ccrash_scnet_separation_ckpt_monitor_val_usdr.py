"""Music source separation (drums / bass / other / vocals) with a small SCNet-style
separator in Lightning: STFT -> band-split conv encoder -> dual-path RNN -> decoder that
predicts one complex mask per source -> iSTFT. Loss: RMSE on the complex spectrograms,
metric: global SDR (uSDR). The best 3 epochs are checkpointed.
"""
import tempfile
from types import SimpleNamespace
from typing import Dict

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader, random_split
from lightning.pytorch import LightningModule, Trainer, seed_everything
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.utilities import grad_norm
from torchmetrics.audio import SignalDistortionRatio

OUTPUT_DIR = tempfile.mkdtemp(prefix="scnet_")

cfg = SimpleNamespace(
    seed=42,
    sources=["drums", "bass", "other", "vocals"],
    dataset=SimpleNamespace(sources=["drums", "bass", "other", "vocals"], sample_rate=4000,
                            window_size=1.0, n_tracks=116),
    train_val_split=[100, 16],
    separator=SimpleNamespace(n_fft=256, hop_length=64, dims=[4, 24, 32], rnn_hidden_dim=32),
    optimizer=SimpleNamespace(lr=2e-3),
    loader=SimpleNamespace(train=dict(batch_size=4, shuffle=True, drop_last=True),
                           validation=dict(batch_size=4, shuffle=False, drop_last=False)),
    trainer=dict(accelerator="cpu", devices=1, max_epochs=3, check_val_every_n_epoch=1,
                 num_sanity_val_steps=2, log_every_n_steps=10, gradient_clip_val=5, precision=32,
                 enable_progress_bar=False, deterministic=False),
)


# ------------------------------------------------------------------ data
class SourceSeparationDataset(Dataset):
    """Synthetic stereo multitrack stems: a drum loop, a bass line, chords, a sung melody."""

    def __init__(self, sources, sample_rate, window_size, n_tracks):
        self.sources = sources
        self.sr = sample_rate
        self.n = int(window_size * sample_rate)
        rng = np.random.default_rng(0)
        self.items = [self._make_track(rng) for _ in range(n_tracks)]

    def _make_track(self, rng):
        sr, n = self.sr, self.n
        t = np.arange(n) / sr
        bpm = rng.uniform(90, 140)
        beat = 60.0 / bpm
        drums = np.zeros(n)
        for k, b in enumerate(np.arange(rng.uniform(0, beat), 1.0, beat / 2)):
            i = int(b * sr)
            m = n - i
            tt = np.arange(m) / sr
            if k % 2 == 0:
                drums[i:] += np.sin(2 * np.pi * (55 + 60 * np.exp(-tt * 30)) * tt) * np.exp(-tt * 18)
            else:
                hat = rng.normal(0, 1, m)
                drums[i:] += 0.4 * np.diff(hat, prepend=0) * np.exp(-tt * 60)
        notes = rng.uniform(41, 110, 4)
        f_bass = np.repeat(notes, n // 4 + 1)[:n]
        bass = 0.8 * np.sin(2 * np.pi * np.cumsum(f_bass) / sr)
        root = rng.uniform(220, 440)
        other = sum(0.3 * np.sin(2 * np.pi * root * r * t + rng.uniform(0, 6.28)) for r in (1.0, 1.26, 1.5))
        f0 = rng.uniform(180, 380) * (1 + 0.02 * np.sin(2 * np.pi * 5.5 * t))
        ph = 2 * np.pi * np.cumsum(f0) / sr
        env = 0.5 * (1 - np.cos(2 * np.pi * rng.uniform(1, 3) * t))
        vocals = env * sum((0.5 / h) * np.sin(h * ph) for h in range(1, 6))
        stems = []
        for s in (drums, bass, other, vocals):
            s = s / (np.abs(s).max() + 1e-8) * rng.uniform(0.3, 0.7)
            pan = rng.uniform(0.3, 0.7)
            stems.append(np.stack([s * pan, s * (1 - pan)]))
        sources = torch.tensor(np.stack(stems), dtype=torch.float32)  # (S, C, T)
        return {"mixture": sources.sum(0), "sources": sources}

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]

    def get_train_val_split(self, lengths):
        return random_split(self, lengths, generator=torch.Generator().manual_seed(0))


# ------------------------------------------------------------------ model
class SDBlock(nn.Module):
    """Band-split down-sampling: low / mid / high bands get different frequency strides."""

    def __init__(self, c_in, c_out, n_freq):
        super().__init__()
        self.splits = [int(n_freq * 0.175), int(n_freq * 0.392)]
        self.splits.append(n_freq - sum(self.splits))
        self.convs = nn.ModuleList([
            nn.Sequential(nn.Conv2d(c_in, c_out, (s, 3), stride=(s, 1), padding=(0, 1)), nn.GELU())
            for s in (1, 2, 4)
        ])

    def forward(self, x):
        outs = []
        for band, conv in zip(torch.split(x, self.splits, dim=2), self.convs):
            outs.append(conv(band))
        return torch.cat(outs, dim=2)


class DualPathRNN(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm_t = nn.GroupNorm(1, dim)
        self.rnn_t = nn.GRU(dim, hidden, batch_first=True, bidirectional=True)
        self.fc_t = nn.Linear(2 * hidden, dim)
        self.norm_f = nn.GroupNorm(1, dim)
        self.rnn_f = nn.GRU(dim, hidden, batch_first=True, bidirectional=True)
        self.fc_f = nn.Linear(2 * hidden, dim)

    def forward(self, x):
        B, C, Fq, T = x.shape
        y = self.norm_t(x).permute(0, 2, 3, 1).reshape(B * Fq, T, C)
        y = self.fc_t(self.rnn_t(y)[0]).reshape(B, Fq, T, C).permute(0, 3, 1, 2)
        x = x + y
        y = self.norm_f(x).permute(0, 3, 2, 1).reshape(B * T, Fq, C)
        y = self.fc_f(self.rnn_f(y)[0]).reshape(B, T, Fq, C).permute(0, 3, 2, 1)
        return x + y


class SCNet(nn.Module):
    def __init__(self, n_fft, dims, rnn_hidden_dim, n_sources, n_channels=2):
        super().__init__()
        n_freq = n_fft // 2 + 1
        self.n_sources, self.n_channels = n_sources, n_channels
        self.inp = nn.Conv2d(2 * n_channels, dims[1], 1)
        self.sd = SDBlock(dims[1], dims[2], n_freq)
        n_down = self.sd.splits[0] + self.sd.splits[1] // 2 + self.sd.splits[2] // 4
        self.dprnn = DualPathRNN(dims[2], rnn_hidden_dim)
        self.up = nn.Sequential(nn.Conv2d(dims[2], dims[1], 1), nn.GELU())
        self.n_down, self.n_freq = n_down, n_freq
        self.out = nn.Conv2d(dims[1] + dims[1], 2 * n_channels * n_sources, 1)

    def forward(self, x):
        # x: (B, 2C, F, T) real/imag of the mixture
        h0 = self.inp(x)
        h = self.dprnn(self.sd(h0))
        h = self.up(h)
        h = nn.functional.interpolate(h, size=(self.n_freq, x.shape[-1]), mode="nearest")
        return self.out(torch.cat([h, h0], dim=1))


class Separator(nn.Module):
    def __init__(self, n_fft, hop_length, dims, rnn_hidden_dim, n_sources=4):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)
        self.net = SCNet(n_fft, dims, rnn_hidden_dim, n_sources)

    def apply_stft(self, wav):
        shape = wav.shape
        spec = torch.stft(wav.reshape(-1, shape[-1]), self.n_fft, self.hop, window=self.window,
                          return_complex=True)
        spec = torch.view_as_real(spec)
        return spec.reshape(*shape[:-1], *spec.shape[-3:]), shape[-1]

    def apply_istft(self, spec, length):
        shape = spec.shape
        spec = torch.view_as_complex(spec.reshape(-1, *shape[-3:]).contiguous())
        wav = torch.istft(spec, self.n_fft, self.hop, window=self.window, length=length)
        return wav.reshape(*shape[:-3], length)

    def forward(self, wav_mix):
        spec_mix, length = self.apply_stft(wav_mix)  # (B, C, F, T, 2)
        B, C, Fq, T, _ = spec_mix.shape
        x = spec_mix.permute(0, 1, 4, 2, 3).reshape(B, 2 * C, Fq, T)
        mask = self.net(x).reshape(B, -1, C, 2, Fq, T).permute(0, 1, 2, 4, 5, 3)
        m = torch.view_as_complex(mask.contiguous())
        spec_src_hat = torch.view_as_real(m * torch.view_as_complex(spec_mix.contiguous()).unsqueeze(1))
        wav_src_hat = self.apply_istft(spec_src_hat, length)
        return wav_src_hat, spec_src_hat


class RMSELoss(nn.Module):
    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.mse = nn.MSELoss()
        self.eps = eps

    def forward(self, pred, target):
        return torch.sqrt(self.mse(pred[..., 0], target[..., 0]) + self.mse(pred[..., 1], target[..., 1]) + self.eps)


def global_signal_distortion_ratio(preds, target, epsilon=1e-7):
    num = torch.sum(torch.square(target), dim=(-2, -1)) + epsilon
    den = torch.sum(torch.square(target - preds), dim=(-2, -1)) + epsilon
    usdr = 10 * torch.log10(num / den)
    return usdr.mean()


class GlobalSignalDistortionRatio(SignalDistortionRatio):
    def __init__(self, epsilon: float = 1e-7, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.add_state("sum_sdr", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0), dist_reduce_fx="sum")

    def update(self, preds, target):
        sdr_batch = global_signal_distortion_ratio(preds, target, self.epsilon)
        self.sum_sdr += sdr_batch.sum()
        self.total += sdr_batch.numel()


# ------------------------------------------------------------------ lightning
class LightningWrapper(LightningModule):
    def __init__(self, cfg) -> None:
        super().__init__()
        self.cfg = cfg
        self.sep = Separator(**vars(cfg.separator))
        self.loss = RMSELoss()
        self.optimizer = torch.optim.Adam(self.sep.parameters(), lr=cfg.optimizer.lr)
        self.metrics = nn.ModuleDict({"usdr": GlobalSignalDistortionRatio(epsilon=1e-7)})

    def training_step(self, batch, batch_idx):
        loss = self.step(batch, mode="train")
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step} train/loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        loss = self.step(batch, mode="val")
        return loss

    def step(self, batch, mode: str = "train") -> torch.Tensor:
        wav_mix, wav_src = batch["mixture"], batch["sources"]
        wav_src_hat, spec_src_hat = self.sep(wav_mix)
        spec_src, _ = self.sep.apply_stft(wav_src)

        loss = self.loss(spec_src_hat, spec_src)

        self.log(f"{mode}/loss", loss.detach(), prog_bar=True)

        if mode == "val":
            metrics = self.compute_metrics(wav_src_hat, wav_src)
            self.log_dict(metrics)
        return loss

    @torch.no_grad()
    def compute_metrics(self, preds: torch.Tensor, target: torch.Tensor) -> Dict[str, torch.Tensor]:
        metrics = {}
        for key in self.metrics:
            for i, source in enumerate(self.cfg.dataset.sources):
                metrics[f"{key}_{source}"] = self.metrics[key](preds[:, i], target[:, i])
            metrics[key] = self.metrics[key](preds, target)
        return metrics

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        print(f"epoch {self.current_epoch} validation: " +
              ", ".join(f"{k} {float(v):.3f}" for k, v in m.items() if "usdr" in k or k == "val/loss"))

    def on_before_optimizer_step(self, *args, **kwargs) -> None:
        norms = grad_norm(self, norm_type=2)
        norms = dict(filter(lambda elem: "_total" in elem[0], norms.items()))
        self.log_dict(norms)
        return

    def configure_optimizers(self):
        return [self.optimizer]


def train(cfg) -> None:
    seed_everything(cfg.seed, workers=True)

    dataset = SourceSeparationDataset(**vars(cfg.dataset))
    train_dataset, val_dataset = dataset.get_train_val_split(cfg.train_val_split)
    train_dataloader = DataLoader(train_dataset, **cfg.loader.train)
    val_dataloader = DataLoader(val_dataset, **cfg.loader.validation)

    lt_wrapper = LightningWrapper(cfg)

    logger = CSVLogger(save_dir=OUTPUT_DIR, name="logs")
    callbacks = [
        LearningRateMonitor(logging_interval="epoch"),
        ModelCheckpoint(
            monitor="val/usdr",
            mode="max",
            save_top_k=3,
            dirpath=f"{OUTPUT_DIR}/checkpoints",
            filename="epoch{epoch:02d}-val_usdr{val/usdr:.2f}",
            auto_insert_metric_name=False,
        ),
    ]

    trainer = Trainer(**cfg.trainer, logger=logger, callbacks=callbacks, default_root_dir=OUTPUT_DIR)
    trainer.fit(lt_wrapper, train_dataloader, val_dataloader)
    print("Training finished! best:", callbacks[1].best_model_path, callbacks[1].best_model_score)


if __name__ == "__main__":
    train(cfg)
