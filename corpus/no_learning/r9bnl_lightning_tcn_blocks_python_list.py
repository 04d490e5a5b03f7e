"""Temporal convolutional network (TCN) for event-order classification, with Lightning.

Each sensor trace (2 channels, 64 time steps) contains one "click" on channel 0 and one
"chirp" on channel 1 at random times, on top of noise; the label says which of the two came
first. The network stacks `num_levels` residual blocks of dilated causal convolutions
(dilation 1, 2, 4, ...) so that the receptive field covers the whole trace, and classifies
from the last time step.
"""
import argparse
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_traces(n, length=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = 0.3 * torch.randn(n, 2, length, generator=g)
    t_click = torch.randint(2, length - 8, (n,), generator=g)
    t_chirp = torch.randint(2, length - 8, (n,), generator=g)
    same = t_click == t_chirp
    t_chirp[same] = (t_chirp[same] + 5) % (length - 8) + 2
    ramp = torch.tensor([0.5, 1.0, -1.0, 0.5])
    for i in range(n):
        x[i, 0, t_click[i]] += 2.0
        x[i, 1, t_chirp[i]:t_chirp[i] + 4] += ramp
    y = (t_click < t_chirp).long()
    return x, y


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, dilation, dropout):
        super().__init__()
        self.pad = (kernel_size - 1) * dilation
        self.conv1 = nn.Conv1d(n_inputs, n_outputs, kernel_size, dilation=dilation)
        self.conv2 = nn.Conv1d(n_outputs, n_outputs, kernel_size, dilation=dilation)
        self.dropout = nn.Dropout(dropout)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None

    def forward(self, x):
        out = self.dropout(F.relu(self.conv1(F.pad(x, (self.pad, 0)))))
        out = self.dropout(F.relu(self.conv2(F.pad(out, (self.pad, 0)))))
        res = x if self.downsample is None else self.downsample(x)
        return F.relu(out + res)


class TCNClassifier(L.LightningModule):
    def __init__(self, input_size=2, num_channels=32, num_levels=5, kernel_size=3, dropout=0.0,
                 num_classes=2, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.blocks = []
        for i in range(num_levels):
            in_ch = input_size if i == 0 else num_channels
            self.blocks.append(TemporalBlock(in_ch, num_channels, kernel_size, 2 ** i, dropout))
        self.linear = nn.Linear(num_channels, num_classes)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.linear(x[:, :, -1])

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_loss", loss, prog_bar=True)
        if self.global_step % 20 == 0:
            print(f"step {self.global_step:4d}  loss {loss.item():.4f}  acc {acc.item():.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "val_acc" in m:
            print(f"epoch {self.current_epoch}: val_loss {m['val_loss']:.4f}  val_acc {m['val_acc']:.3f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    L.seed_everything(7)
    x_train, y_train = make_traces(2560, seed=1)
    x_val, y_val = make_traces(512, seed=2)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=256)

    model = TCNClassifier(lr=args.lr)
    trainer = L.Trainer(max_epochs=args.epochs, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, default_root_dir=tempfile.mkdtemp())
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
