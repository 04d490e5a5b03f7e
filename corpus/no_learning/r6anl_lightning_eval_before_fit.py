"""Churn-style tabular classifier: a deep MLP (Linear / BatchNorm1d / ReLU / Dropout blocks)
trained with Lightning.

Synthetic customer table: 24 standardised numeric features, 4 churn-risk classes given by a
small random "teacher" network over the features. Before training, the script looks at what
the untrained model predicts on the validation set, then fits it with SGD.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, TensorDataset

L.seed_everything(7, verbose=False)

N_FEATURES = 24
N_CLASSES = 4


def make_table(n, seed):
    g = torch.Generator().manual_seed(seed)
    teacher = torch.Generator().manual_seed(1234)
    w1 = torch.randn(N_FEATURES, 16, generator=teacher)
    w2 = torch.randn(16, N_CLASSES, generator=teacher)
    x = torch.randn(n, N_FEATURES, generator=g)
    y = (torch.tanh(x @ w1 / 3) @ w2).argmax(dim=1)
    return TensorDataset(x, y)


class ChurnMLP(L.LightningModule):
    def __init__(self, hidden=128, n_blocks=8, dropout=0.2, lr=0.05):
        super().__init__()
        self.save_hyperparameters()
        blocks = []
        in_dim = N_FEATURES
        for _ in range(n_blocks):
            blocks += [nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(dropout)]
            in_dim = hidden
        self.backbone = nn.Sequential(*blocks)
        self.head = nn.Linear(hidden, N_CLASSES)

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("train_loss", loss)
        if self.global_step % 16 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step:4d} loss {loss.item():.4f} acc {acc.item():.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "val_loss" in m:
            print(f"epoch {self.current_epoch} val_loss {m['val_loss']:.4f} val_acc {m['val_acc']:.3f}")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9, weight_decay=1e-4)


def main():
    train_ds = make_table(2048, seed=0)
    val_ds = make_table(512, seed=1)
    train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)

    model = ChurnMLP()

    model.eval()
    with torch.no_grad():
        x_val, y_val = val_ds.tensors
        untrained_acc = (model(x_val).argmax(1) == y_val).float().mean().item()
    print(f"untrained model: val acc {untrained_acc:.3f} (class balance {torch.bincount(y_val).tolist()})")

    trainer = L.Trainer(max_epochs=6, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        num_sanity_val_steps=0)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
