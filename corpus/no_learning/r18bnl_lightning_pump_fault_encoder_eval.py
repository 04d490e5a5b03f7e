"""Pump fault classification from multichannel sensor windows with PyTorch Lightning.

Each sample is a 64-step window of five raw sensor channels (discharge pressure in Pa, motor
current in A, bearing temperature in degC, shaft speed in rpm, vibration in mm/s).  A 1-D conv
encoder (BatchNorm on the raw channels, then conv/BN/ReLU blocks) is built through the same
`from_pretrained` helper the team uses for its checkpointed encoders, and a linear head
predicts one of four states: normal, cavitation, bearing wear, impeller imbalance.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

CLASSES = ["normal", "cavitation", "bearing_wear", "imbalance"]


def make_windows(n, seed, length=64):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    t = torch.arange(length, dtype=torch.float32)
    phase = 2 * torch.pi * torch.rand(n, 1, generator=g)
    pressure = 2.4e5 + 4e3 * torch.randn(n, 1, generator=g) + 1.5e3 * torch.randn(n, length, generator=g)
    current = 18 + 1.5 * torch.randn(n, 1, generator=g) + 0.3 * torch.randn(n, length, generator=g)
    temp = 55 + 4 * torch.randn(n, 1, generator=g) + 0.2 * torch.randn(n, length, generator=g)
    rpm = 1480 + 15 * torch.randn(n, 1, generator=g) + 3 * torch.randn(n, length, generator=g)
    vib = 2.0 + 0.4 * torch.randn(n, length, generator=g)

    cav = (y == 1).float().unsqueeze(1)
    pressure = pressure - cav * (1.2e4 + 6e3 * torch.rand(n, length, generator=g))
    vib = vib + cav * 1.2 * torch.rand(n, length, generator=g)
    wear = (y == 2).float().unsqueeze(1)
    temp = temp + wear * (6 + 0.15 * t)
    current = current + wear * 1.5
    imb = (y == 3).float().unsqueeze(1)
    vib = vib + imb * 2.5 * torch.sin(2 * torch.pi * t / 8 + phase)
    rpm = rpm - imb * 12

    x = torch.stack([pressure, current, temp, rpm, vib], dim=1)
    return x, y


class ConvBlock(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(nn.Conv1d(cin, cout, 5, padding=2), nn.BatchNorm1d(cout), nn.ReLU(),
                         nn.MaxPool1d(2))


class SensorEncoder(nn.Module):
    def __init__(self, in_channels=5, width=32, out_dim=64):
        super().__init__()
        self.input_norm = nn.BatchNorm1d(in_channels)
        self.blocks = nn.Sequential(ConvBlock(in_channels, width), ConvBlock(width, width),
                                    ConvBlock(width, out_dim))
        self.out_dim = out_dim

    def forward(self, x):
        h = self.blocks(self.input_norm(x))
        return h.mean(dim=-1)

    @classmethod
    def from_pretrained(cls, checkpoint=None, **kwargs):
        model = cls(**kwargs)
        if checkpoint is not None:
            model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
        model.eval()
        return model


class PumpDataModule(pl.LightningDataModule):
    def __init__(self, batch_size=32):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        x, y = make_windows(1600, seed=0)
        self.train_ds = TensorDataset(x[:1280], y[:1280])
        self.val_ds = TensorDataset(x[1280:], y[1280:])

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=160)


class PumpFaultClassifier(pl.LightningModule):
    def __init__(self, encoder_checkpoint=None, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = SensorEncoder.from_pretrained(encoder_checkpoint, in_channels=5)
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(self.encoder.out_dim, len(CLASSES)))
        self.val_stats = []

    def forward(self, x):
        return self.head(self.encoder(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss)
        if self.global_step % 20 == 0:
            acc = (logits.argmax(1) == y).float().mean()
            print(f"step {self.global_step:4d} train loss {loss.item():.4f} acc {acc:.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.val_stats.append((F.cross_entropy(logits, y, reduction="sum").item(),
                               (logits.argmax(1) == y).sum().item(), len(y)))

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking:
            loss = sum(s[0] for s in self.val_stats) / sum(s[2] for s in self.val_stats)
            acc = sum(s[1] for s in self.val_stats) / sum(s[2] for s in self.val_stats)
            print(f"epoch {self.current_epoch} val loss {loss:.4f} val acc {acc:.3f}")
        self.val_stats.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    pl.seed_everything(0)
    model = PumpFaultClassifier(encoder_checkpoint=None)
    trainer = pl.Trainer(
        max_epochs=5,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=PumpDataModule())


if __name__ == "__main__":
    main()
