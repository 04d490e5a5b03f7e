"""Energy-use regression on standardised tabular features, trained with Lightning.

Linear learning-rate warm-up to LR_INIT over WARMUP_EPOCHS, then cosine decay to LR_END,
as a LambdaLR stepped every batch.
"""
import math
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

LR_INIT = 1.0
LR_END = 1e-4
WARMUP_EPOCHS = 5
EPOCHS = 30


def make_data(n=2048, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g)
    y = 2.0 * torch.sin(x[:, :1]) + 0.5 * x @ w + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


class EnergyRegressor(L.LightningModule):
    def __init__(self, steps_per_epoch):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
        self.steps_per_epoch = steps_per_epoch

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        if self.global_step % 10 == 0:
            lr = self.trainer.optimizers[0].param_groups[0]["lr"]
            print(f"step {self.global_step:4d} lr {lr:.4f} train_mse {loss.item():.4f}")
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=LR_INIT, momentum=0.9)
        warmup_steps = WARMUP_EPOCHS * self.steps_per_epoch
        total_steps = EPOCHS * self.steps_per_epoch

        def lr_lambda(step):
            if step < warmup_steps:
                return (step + 1) / warmup_steps
            progress = (step - warmup_steps) / (total_steps - warmup_steps)
            return (LR_END + 0.5 * (LR_INIT - LR_END) * (1 + math.cos(math.pi * progress))) / LR_INIT

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def main():
    L.seed_everything(0, verbose=False)
    loader = DataLoader(make_data(), batch_size=32, shuffle=True)
    model = EnergyRegressor(steps_per_epoch=len(loader))
    trainer = L.Trainer(
        max_epochs=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tempfile.mkdtemp(),
    )
    trainer.fit(model, loader)


if __name__ == "__main__":
    main()
