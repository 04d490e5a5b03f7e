"""Land-cover scene classification on multispectral patches with a Lightning task.

A GenericNonGeoClassificationDataModule-like datamodule serves 6-band 32x32 patches with an
integer land-cover label; a ClassificationTask (LightningModule) wraps a small CNN encoder and
a linear head, logs train/val loss and accuracy, and is fitted with a lightning Trainer.
"""
import warnings

import lightning.pytorch as pl
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*LeafSpec.*")

NUM_CLASSES = 10
BANDS = ["BLUE", "GREEN", "RED", "NIR_NARROW", "SWIR_1", "SWIR_2"]


class SyntheticEuroSATDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        signatures = torch.randn(NUM_CLASSES, len(BANDS), generator=torch.Generator().manual_seed(123))
        base = signatures[self.labels][:, :, None, None]
        texture = torch.randn(n, len(BANDS), 32, 32, generator=g)
        self.images = 0.5 * base + 2.5 * texture

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"image": self.images[i], "label": self.labels[i]}


class GenericClassificationDataModule(pl.LightningDataModule):
    def __init__(self, batch_size=32, num_workers=0):
        super().__init__()
        self.batch_size = batch_size
        self.num_workers = num_workers

    def setup(self, stage=None):
        self.train_dataset = SyntheticEuroSATDataset(1280, seed=1)
        self.val_dataset = SyntheticEuroSATDataset(320, seed=2)

    def train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.batch_size, shuffle=True,
                          num_workers=self.num_workers)

    def val_dataloader(self):
        return DataLoader(self.val_dataset, batch_size=self.batch_size, num_workers=self.num_workers)


class Encoder(nn.Module):
    def __init__(self, in_chans):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_chans, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.out_channels = 64

    def forward(self, x):
        return self.features(x)


class ClassificationModel(nn.Module):
    def __init__(self, in_chans, num_classes):
        super().__init__()
        self.encoder = Encoder(in_chans)
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(self.encoder.out_channels, num_classes))

    def forward(self, x):
        return self.head(self.encoder(x))


class ClassificationTask(pl.LightningModule):
    def __init__(self, num_classes=NUM_CLASSES, lr=1e-3, loss="ce"):
        super().__init__()
        self.save_hyperparameters()
        self.model = ClassificationModel(len(BANDS), num_classes)
        self.criterion = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x = batch["image"]
        y = batch["label"]
        model_output = self(x)
        loss = self.criterion(model_output, y.to(torch.float32))
        acc = (model_output.argmax(1) == y).float().mean()
        self.log("train/loss", loss, prog_bar=True)
        self.log("train/acc", acc, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x = batch["image"]
        y = batch["label"]
        model_output = self(x)
        loss = self.criterion(model_output, y.to(torch.float32))
        acc = (model_output.argmax(1) == y).float().mean()
        self.log("val/loss", loss, prog_bar=True)
        self.log("val/acc", acc, prog_bar=True)

    def on_train_epoch_end(self):
        m = self.trainer.callback_metrics
        print(f"epoch {self.current_epoch}: train/loss {m['train/loss']:.4f} "
              f"val/loss {m.get('val/loss', float('nan')):.4f} val/acc {m.get('val/acc', float('nan')):.3f}")

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=0.05)


def main():
    pl.seed_everything(0, workers=True)
    datamodule = GenericClassificationDataModule(batch_size=32)
    task = ClassificationTask(num_classes=NUM_CLASSES, lr=1e-3)
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=3, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(task, datamodule=datamodule)


if __name__ == "__main__":
    main()
