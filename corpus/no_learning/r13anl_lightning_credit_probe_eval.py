"""Credit-default classifier on tabular applicant data with PyTorch Lightning.

Raw features (age, income, balance, tenure, transactions, bureau score) go straight into the
network; the first BatchNorm1d standardises them.  At the start of every epoch the model scores a
fixed probe set of applicants so the predicted default rate can be followed between epochs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

FEATURES = ["age", "income", "balance", "tenure", "n_transactions", "bureau_score"]


def make_applicants(n, seed):
    g = torch.Generator().manual_seed(seed)
    age = 18 + 60 * torch.rand(n, generator=g)
    income = torch.exp(torch.randn(n, generator=g) * 0.5 + 10.8)
    balance = torch.randn(n, generator=g) * 900 + 1500
    tenure = torch.randint(0, 40, (n,), generator=g).float()
    n_tx = torch.poisson(torch.full((n,), 30.0), generator=g)
    score = 300 + 550 * torch.rand(n, generator=g)
    x = torch.stack([age, income, balance, tenure, n_tx, score], dim=1)
    z = (x - x.mean(0)) / x.std(0)
    risk = 1.5 * z[:, 5] - 1.2 * z[:, 2] * z[:, 0] + torch.tanh(2 * z[:, 1]) - 0.8 * z[:, 3] ** 2 + 0.8
    y = (risk + 0.3 * torch.randn(n, generator=g) > 0).long()
    return x, y


class CreditDataModule(pl.LightningDataModule):
    def __init__(self, batch_size=64):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        x, y = make_applicants(4096, seed=0)
        self.train_ds = TensorDataset(x[:3584], y[:3584])
        self.val_ds = TensorDataset(x[3584:], y[3584:])

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=512)


class CreditNet(pl.LightningModule):
    def __init__(self, n_features=6, hidden=64, lr=1e-3, probe=None):
        super().__init__()
        self.save_hyperparameters(ignore=["probe"])
        self.net = nn.Sequential(
            nn.BatchNorm1d(n_features),
            nn.Linear(n_features, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(hidden, 2),
        )
        self.register_buffer("probe_x", probe)
        self.val_correct = 0
        self.val_seen = 0
        self.val_loss_sum = 0.0

    def forward(self, x):
        return self.net(x)

    def on_train_epoch_start(self):
        self.eval()
        with torch.no_grad():
            p_default = torch.softmax(self(self.probe_x), dim=-1)[:, 1]
        print(f"epoch {self.current_epoch} probe: mean p(default) {p_default.mean():.3f}")

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        if self.global_step % 20 == 0:
            acc = (logits.argmax(1) == y).float().mean()
            print(f"step {self.global_step:4d} train loss {loss.item():.4f} acc {acc:.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.val_loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        self.val_correct += (logits.argmax(1) == y).sum().item()
        self.val_seen += len(y)

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking:
            print(f"epoch {self.current_epoch} val loss {self.val_loss_sum / self.val_seen:.4f} "
                  f"val acc {self.val_correct / self.val_seen:.3f}")
        self.val_correct, self.val_seen, self.val_loss_sum = 0, 0, 0.0

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def main():
    pl.seed_everything(0)
    probe_x, _ = make_applicants(256, seed=7)
    model = CreditNet(probe=probe_x)
    trainer = pl.Trainer(
        max_epochs=4,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=CreditDataModule())


if __name__ == "__main__":
    main()
