"""Waveform classifier (1-D CNN) trained with Lightning *manual optimization*, following the
recipes of the Lightning "Manual Optimization" guide: the loss is scaled by 1/N and gradients are
accumulated over N=4 batches (zero_grad only after each step), gradients are clipped with
self.clip_gradients before opt.step(), and the StepLR scheduler is stepped by hand on the last
batch of every epoch. The data are synthetic noisy sine / square / sawtooth / triangle waves with
random frequency, phase and amplitude.
"""
import math
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

N_ACCUM = 4
SEQ_LEN = 64
CLASSES = ["sine", "square", "sawtooth", "triangle"]


class WaveformDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.linspace(0, 1, SEQ_LEN)
        self.labels = torch.randint(0, len(CLASSES), (n,), generator=g)
        freq = torch.empty(n, 1).uniform_(2.0, 6.0, generator=g)
        phase = torch.rand(n, 1, generator=g)
        amp = torch.empty(n, 1).uniform_(0.5, 2.0, generator=g)
        cycles = freq * t[None, :] + phase
        frac = cycles - torch.floor(cycles)
        waves = torch.stack([
            torch.sin(2 * math.pi * cycles),
            torch.sign(torch.sin(2 * math.pi * cycles)),
            2 * frac - 1,
            4 * torch.abs(frac - 0.5) - 1,
        ], dim=1)  # n, 4, T
        x = waves[torch.arange(n), self.labels] * amp
        self.x = (x + 0.4 * torch.randn(n, SEQ_LEN, generator=g)).unsqueeze(1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.x[idx], self.labels[idx]


class WaveformClassifier(L.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        # Important: This property activates manual optimization.
        self.automatic_optimization = False
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(16, 32, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(32, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(32, len(CLASSES)))

    def forward(self, x):
        return self.classifier(self.features(x))

    def compute_loss(self, batch):
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits, y), (logits.argmax(1) == y).float().mean()

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()

        loss, acc = self.compute_loss(batch)
        # scale losses by 1/N (for N batches of gradient accumulation)
        self.manual_backward(loss / N_ACCUM)

        # accumulate gradients of N batches
        if (batch_idx + 1) % N_ACCUM == 0:
            # clip gradients
            self.clip_gradients(opt, gradient_clip_val=0.5, gradient_clip_algorithm="norm")
            opt.step()
            opt.zero_grad()

        # step every epoch
        sch = self.lr_schedulers()
        if self.trainer.is_last_batch:
            sch.step()

        self.log_dict({"train_loss": loss, "train_acc": acc}, prog_bar=True)
        if batch_idx % 16 == 0:
            print(f"epoch {self.current_epoch} batch {batch_idx:3d} optimizer steps {self.global_step:3d} "
                  f"loss {loss.item():.4f} acc {acc.item():.3f} lr {sch.get_last_lr()[0]:.2e}")

    def validation_step(self, batch, batch_idx):
        loss, acc = self.compute_loss(batch)
        self.log_dict({"val_loss": loss, "val_acc": acc})

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        print(f"epoch {self.current_epoch}: val_loss {m['val_loss']:.4f} val_acc {m['val_acc']:.3f}")

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return [optimizer], [scheduler]


if __name__ == "__main__":
    L.seed_everything(7)
    train_loader = DataLoader(WaveformDataset(2048, seed=0), batch_size=32, shuffle=True)
    val_loader = DataLoader(WaveformDataset(512, seed=1), batch_size=128)
    model = WaveformClassifier(lr=3e-3)
    with tempfile.TemporaryDirectory() as tmp_dir:
        trainer = L.Trainer(
            max_epochs=5,
            accelerator="cpu",
            devices=1,
            default_root_dir=tmp_dir,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            num_sanity_val_steps=0,
        )
        trainer.fit(model, train_loader, val_loader)
