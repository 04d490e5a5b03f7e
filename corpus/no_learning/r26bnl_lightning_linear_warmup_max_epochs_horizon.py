"""LightningModule fine-tuning a small MLP classifier on generated tabular records (6 classes, 24 features)
with AdamW and a linear warm-up / linear decay schedule stepped every optimizer step."""
import warnings

import lightning.pytorch as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore")
pl.seed_everything(0, verbose=False)

N_FEATURES = 24
N_CLASSES = 6


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    # same as transformers.get_linear_schedule_with_warmup
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step)
                   / float(max(1, num_training_steps - num_warmup_steps)))

    return LambdaLR(optimizer, lr_lambda, last_epoch)


class RecordDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        centers = torch.randn(N_CLASSES, N_FEATURES, generator=torch.Generator().manual_seed(123))
        self.y = torch.randint(0, N_CLASSES, (n,), generator=g)
        self.x = centers[self.y] * 0.6 + torch.randn(n, N_FEATURES, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class RecordClassifier(pl.LightningModule):
    def __init__(self, lr=2e-3, n_warmup_steps=10):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(N_FEATURES, 128), nn.ReLU(),
            nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, N_CLASSES),
        )
        self.epoch_losses = []

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.epoch_losses.append(loss.item())
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        if self.trainer.sanity_checking:
            return
        m = self.trainer.callback_metrics
        lr = self.trainer.optimizers[0].param_groups[0]["lr"]
        train = sum(self.epoch_losses) / max(1, len(self.epoch_losses))
        print(f"epoch {self.current_epoch}: step {self.global_step} lr {lr:.2e} train loss {train:.4f} "
              f"val loss {m['val_loss'].item():.4f} val acc {m['val_acc'].item():.3f}")
        self.epoch_losses = []

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=0.01)
        scheduler = get_linear_schedule_with_warmup(
            optimizer,
            num_warmup_steps=self.hparams.n_warmup_steps,
            num_training_steps=self.trainer.max_epochs,
        )
        return dict(optimizer=optimizer, lr_scheduler=dict(scheduler=scheduler, interval="step", frequency=1))


def main():
    train_loader = DataLoader(RecordDataset(1280, seed=0), batch_size=32, shuffle=True)
    val_loader = DataLoader(RecordDataset(512, seed=1), batch_size=256)
    model = RecordClassifier()
    trainer = pl.Trainer(
        max_epochs=5,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
