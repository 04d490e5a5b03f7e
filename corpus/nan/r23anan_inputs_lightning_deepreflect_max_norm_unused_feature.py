"""DeepReflect-style autoencoder on per-basic-block ACFG features of benign binaries.

Each sample is the first MAX_BB basic blocks of a binary (zero padded), 18 features per
block. Features are normalised by the per-feature maximum over the training set, and the
autoencoder is trained to reconstruct the normalised block sequence (PyTorch Lightning).
"""
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, Dataset

MAX_BB = 128
NUM_FEATURES = 18
FEATURE_NAMES = [
    "num_instructions", "num_transfer", "num_call", "num_arith", "num_compare", "num_mov",
    "num_termination", "num_data_declaration", "num_const", "num_string_const",
    "num_offspring", "betweenness", "num_api_calls", "num_load_library", "num_get_proc_address",
    "num_syscall", "num_xor_self", "num_stack_strings",
]


def make_binary(rng):
    n_bb = int(rng.integers(20, 400))
    f = np.zeros((n_bb, NUM_FEATURES))
    f[:, 0] = rng.poisson(9, n_bb) + 1
    f[:, 1] = rng.binomial(1, 0.6, n_bb) + rng.binomial(1, 0.1, n_bb)
    f[:, 2] = rng.poisson(0.8, n_bb)
    f[:, 3] = rng.poisson(2.0, n_bb)
    f[:, 4] = rng.poisson(0.7, n_bb)
    f[:, 5] = rng.poisson(3.5, n_bb)
    f[:, 6] = rng.binomial(1, 0.05, n_bb)
    f[:, 7] = rng.poisson(0.2, n_bb)
    f[:, 8] = rng.poisson(1.5, n_bb)
    f[:, 9] = rng.poisson(0.3, n_bb)
    f[:, 10] = rng.integers(0, 3, n_bb)
    f[:, 11] = rng.random(n_bb) * 0.1
    f[:, 12] = rng.poisson(0.4, n_bb)
    f[:, 13] = rng.binomial(1, 0.01, n_bb)
    f[:, 14] = rng.binomial(1, 0.01, n_bb)
    f[:, 15] = 0.0
    f[:, 16] = rng.binomial(1, 0.02, n_bb)
    f[:, 17] = rng.binomial(1, 0.005, n_bb)
    return f


class DR(Dataset):
    def __init__(self, binaries, maximum_val=None):
        self.binaries = binaries
        self.maximum_val = maximum_val

    def get_max(self):
        maximum_val = np.array([0.0] * NUM_FEATURES)
        for bytez in self.binaries:
            b = np.array([[0] * NUM_FEATURES] * MAX_BB, dtype=float)
            bytez = bytez[:MAX_BB]
            b[:len(bytez)] = bytez
            b_max = b.max(axis=0)
            idx = np.where(b_max > maximum_val)[0]
            maximum_val[idx] = b_max[idx]
        return maximum_val

    def __len__(self):
        return len(self.binaries)

    def __getitem__(self, i):
        b = np.array([[0] * NUM_FEATURES] * MAX_BB, dtype=float)
        bytez = self.binaries[i][:MAX_BB]
        b[:len(bytez)] = bytez
        x = torch.tensor(b / self.maximum_val, dtype=torch.float32)
        return x, x


class Autoencoder(L.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = nn.Sequential(
            nn.Conv1d(NUM_FEATURES, 32, kernel_size=9, padding=4), nn.ReLU(),
            nn.Conv1d(32, 32, kernel_size=9, padding=4, stride=2), nn.ReLU(),
            nn.Conv1d(32, 16, kernel_size=5, padding=2, stride=2), nn.ReLU(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose1d(16, 32, kernel_size=4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose1d(32, 32, kernel_size=4, stride=2, padding=1), nn.ReLU(),
            nn.Conv1d(32, NUM_FEATURES, kernel_size=9, padding=4),
        )

    def forward(self, x):
        z = self.encoder(x.transpose(1, 2))
        return self.decoder(z).transpose(1, 2)

    def training_step(self, batch, batch_idx):
        x, target = batch
        loss = F.mse_loss(self(x), target)
        self.log("train_mse", loss, prog_bar=True, on_step=True, on_epoch=True)
        if self.global_step % 10 == 0:
            print(f"step {self.global_step} train_mse {loss.item():.6f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, target = batch
        loss = F.mse_loss(self(x), target)
        self.log("val_mse", loss, prog_bar=True)

    def on_validation_epoch_end(self):
        val = self.trainer.callback_metrics.get("val_mse")
        if val is not None:
            print(f"epoch {self.current_epoch} val_mse {val.item():.6f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    L.seed_everything(0)
    rng = np.random.default_rng(0)
    binaries = [make_binary(rng) for _ in range(640)]
    train_bins, valid_bins = binaries[:512], binaries[512:]

    train_set = DR(train_bins)
    maximum_val = train_set.get_max()
    print("feature maxima:", dict(zip(FEATURE_NAMES, maximum_val.round(2).tolist())))
    train_set.maximum_val = maximum_val
    valid_set = DR(valid_bins, maximum_val)

    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    valid_loader = DataLoader(valid_set, batch_size=64)

    model = Autoencoder(lr=1e-3)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = L.Trainer(
            max_epochs=8,
            accelerator="cpu",
            devices=1,
            default_root_dir=tmp,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        trainer.fit(model, train_loader, valid_loader)


if __name__ == "__main__":
    main()
