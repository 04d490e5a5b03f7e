"""Fine-grained 100-class image classifier with PyTorch Lightning (CIFAR-100-style 3x16x16
crops generated here: each class is a colour/texture prototype seen through noise, shifts and
brightness changes).
"""
import torch
import torch.nn as nn
import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 100


def make_split(n, seed, prototypes):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    x = prototypes[y]
    shift = torch.randint(-2, 3, (2,), generator=g)
    x = torch.roll(x, shifts=(int(shift[0]), int(shift[1])), dims=(2, 3))
    x = x * (0.7 + 0.6 * torch.rand(n, 1, 1, 1, generator=g)) + 0.8 * torch.randn(n, 3, 16, 16, generator=g)
    return x, y


class CifarLikeDataModule(pl.LightningDataModule):
    def __init__(self, batch_size=64):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(123)
        prototypes = torch.randn(NUM_CLASSES, 3, 16, 16, generator=g)
        self.train_ds = TensorDataset(*make_split(6400, 1, prototypes))
        self.val_ds = TensorDataset(*make_split(1000, 2, prototypes))

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=500)


class LitClassifier(pl.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.model = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 4 * 4, 256), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(256, NUM_CLASSES),
            nn.Softmax(dim=1),
        )
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self(x)
        loss = self.criterion(y_hat, y)
        self.log("train_loss", loss, prog_bar=True)
        if self.global_step % 20 == 0:
            print(f"step {self.global_step:4d} train_loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self(x)
        loss = self.criterion(y_hat, y)
        acc = (y_hat.argmax(1) == y).float().mean()
        self.log_dict({"val_loss": loss, "val_acc": acc})
        print(f"epoch {self.current_epoch} val_loss {loss.item():.4f} val_acc {acc.item():.3f}")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


if __name__ == "__main__":
    pl.seed_everything(0)
    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(LitClassifier(lr=0.05), datamodule=CifarLikeDataModule())
