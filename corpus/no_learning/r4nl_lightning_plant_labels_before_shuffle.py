"""Kaggle Plant Pathology 2021 with Lightning: classify apple leaves by their disease.

The table has one row per image ("image", "labels") as in train.csv; the leaf images are
rendered here (green leaf, disease spots of a given colour and size) and kept in memory in
place of the train_images/ folder.
"""
import itertools
import random
import tempfile

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

DISEASES = ["healthy", "scab", "rust", "frog_eye_leaf_spot", "powdery_mildew", "complex"]
SPOT_COLOURS = {
    "scab": (0.25, 0.2, 0.1),
    "rust": (0.9, 0.45, 0.05),
    "frog_eye_leaf_spot": (0.5, 0.1, 0.3),
    "powdery_mildew": (0.95, 0.95, 0.9),
}


YY, XX = torch.meshgrid(torch.arange(24), torch.arange(24), indexing="ij")
LEAF_GREEN = torch.tensor([0.2, 0.55, 0.15]).view(3, 1, 1)


def render_leaf(label, g, size=24):
    img = LEAF_GREEN.expand(3, size, size).clone()
    diseases = list(SPOT_COLOURS) if label == "complex" else ([] if label == "healthy" else [label])
    for disease in diseases:
        colour = torch.tensor(SPOT_COLOURS[disease]).view(3, 1)
        for cy, cx in torch.randint(3, size - 3, (3 if label == "complex" else 6, 2), generator=g).tolist():
            mask = ((YY - cy) ** 2 + (XX - cx) ** 2) <= 4
            img[:, mask] = colour
    return (img + 0.08 * torch.randn(3, size, size, generator=g)).clamp(0, 1)


def make_table_and_images(n_images, seed=0):
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    rows, images = [], {}
    for i in range(n_images):
        name = f"{rng.getrandbits(64):016x}.jpg"
        label = rng.choice(DISEASES)
        rows.append({"image": name, "labels": label})
        images[name] = render_leaf(label, g)
    return rows, images


class PlantPathologyDataset(Dataset):
    """The full dataset with one-hot encoding for multi-label case."""

    def __init__(self, df_data, images, transforms=None, mode="train", split=0.8, uq_labels=None, random_state=42):
        self.images = images
        self.transforms = transforms
        self.mode = mode
        self.data = list(df_data)

        # take over existing table or load from file
        self.raw_labels = [row["labels"] for row in self.data]
        if uq_labels:
            self.labels_unique = uq_labels
        else:
            labels_all = list(itertools.chain(*[lbs.split(" ") for lbs in self.raw_labels]))
            self.labels_unique = sorted(set(labels_all))
        self.labels_lut = {lb: i for i, lb in enumerate(self.labels_unique)}
        self.num_classes = len(self.labels_unique)

        # shuffle data
        random.Random(random_state).shuffle(self.data)

        # split dataset
        assert 0.0 <= split <= 1.0, f"split {split} is out of range"
        frac = int(split * len(self.data))
        self.data = self.data[:frac] if mode == "train" else self.data[frac:]
        self.img_names = [row["image"] for row in self.data]
        self.labels = self._prepare_labels()

    def _prepare_labels(self):
        return [torch.tensor(self.to_onehot_encoding(lb)) if lb else None for lb in self.raw_labels]

    def to_onehot_encoding(self, labels):
        one_hot = [0] * len(self.labels_unique)
        for lb in labels.split(" "):
            one_hot[self.labels_lut[lb]] = 1
        return tuple(one_hot)

    def __getitem__(self, idx):
        img_name = self.img_names[idx]
        label = self.labels[idx]
        img = self.images[img_name]
        if self.transforms:
            img = self.transforms(img)
        return img, label

    def __len__(self):
        return len(self.data)


class PlantPathologySimpleDataset(PlantPathologyDataset):
    """Simplified version; one class index per image."""

    def _prepare_labels(self):
        labels = super()._prepare_labels()
        return [int(torch.argmax(lb)) for lb in labels]


class PlantPathologyDM(L.LightningDataModule):
    def __init__(self, rows, images, batch_size=32, split=0.8, random_state=42):
        super().__init__()
        self.rows = rows
        self.images = images
        self.batch_size = batch_size
        self.split = split
        self.random_state = random_state
        self.labels_unique = tuple(sorted(set(r["labels"] for r in rows)))

    def setup(self, stage=None):
        ds_kw = dict(split=self.split, uq_labels=self.labels_unique, random_state=self.random_state)
        self.train_dataset = PlantPathologySimpleDataset(self.rows, self.images, mode="train", **ds_kw)
        self.valid_dataset = PlantPathologySimpleDataset(self.rows, self.images, mode="valid", **ds_kw)
        print(f"training dataset: {len(self.train_dataset)}, validation dataset: {len(self.valid_dataset)}")

    @property
    def num_classes(self):
        return len(self.labels_unique)

    def train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.valid_dataset, batch_size=self.batch_size, shuffle=False)


class LeafNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


class LitPlantPathology(L.LightningModule):
    def __init__(self, model, lr=3e-3):
        super().__init__()
        self.model = model
        self.learn_rate = lr

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self(x)
        loss = F.cross_entropy(y_hat, y)
        acc = (y_hat.argmax(1) == y).float().mean()
        self.log("train_loss", loss)
        if self.global_step % 25 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step:4d}  train_loss {loss.item():.4f}  train_acc {acc.item():.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        y_hat = self(x)
        self.log("valid_loss", F.cross_entropy(y_hat, y))
        self.log("valid_acc", (y_hat.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "valid_loss" in m:
            print(f"== epoch {self.current_epoch}: valid_loss {m['valid_loss']:.4f}  valid_acc {m['valid_acc']:.3f}")

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.learn_rate)


def main():
    L.seed_everything(42)
    rows, images = make_table_and_images(1500)
    dm = PlantPathologyDM(rows, images, batch_size=32)
    model = LitPlantPathology(LeafNet(num_classes=dm.num_classes))
    trainer = L.Trainer(
        max_epochs=5,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=tempfile.mkdtemp(),
    )
    trainer.fit(model, datamodule=dm)


if __name__ == "__main__":
    main()
