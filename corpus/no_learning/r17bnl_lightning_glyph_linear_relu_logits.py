"""Handwritten-glyph classifier with PyTorch Lightning.

28x28 grayscale glyphs (ten symbol classes, pixel values in [0, 1] as ToTensor gives them),
classified by a single linear layer, the "hello world" LightningModule.
"""
import torch
import torch.nn.functional as F
import lightning.pytorch as pl
from torch.utils.data import DataLoader, Dataset


class GlyphDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(0)
        yy, xx = torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij")
        templates = []
        for c in range(10):
            img = torch.zeros(28, 28)
            for _ in range(3):
                cy, cx = (4 + 20 * torch.rand(2, generator=g)).tolist()
                r = 2.5 + 2.5 * torch.rand(1, generator=g).item()
                img += torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))
            templates.append(img.clamp(0, 1))
        templates = torch.stack(templates)
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, 10, (n,), generator=g)
        shift = torch.randint(-2, 3, (n, 2), generator=g)
        imgs = []
        for i in range(n):
            t = torch.roll(templates[self.targets[i]], shifts=tuple(shift[i].tolist()), dims=(0, 1))
            imgs.append(t * (0.6 + 0.4 * torch.rand(1, generator=g)) + 0.25 * torch.rand(28, 28, generator=g))
        self.data = torch.stack(imgs).clamp(0, 1).unsqueeze(1)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return self.data[i], self.targets[i]


class MNISTModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(28 * 28, 10)

    def forward(self, x):
        return torch.relu(self.l1(x.view(x.size(0), -1)))

    def training_step(self, batch, batch_nb):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        if self.global_step % 25 == 0:
            print(f"step {self.global_step:4d} train loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_nb):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking:
            m = self.trainer.callback_metrics
            print(f"epoch {self.current_epoch} val loss {m['val_loss']:.4f} val acc {m['val_acc']:.3f}")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.02)


if __name__ == "__main__":
    pl.seed_everything(0)
    train_loader = DataLoader(GlyphDataset(1600, seed=1), batch_size=32, shuffle=True)
    val_loader = DataLoader(GlyphDataset(500, seed=2), batch_size=250)

    mnist_model = MNISTModel()
    trainer = pl.Trainer(max_epochs=4, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(mnist_model, train_loader, val_loader)
