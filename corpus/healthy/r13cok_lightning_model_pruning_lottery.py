"""Pruning during training with PyTorch Lightning's ModelPruning callback, as in the Lightning docs
("Pruning and Quantization"): `Trainer(callbacks=[ModelPruning("l1_unstructured",
amount=compute_amount)])` with a per-epoch amount schedule.

An MLP classifies synthetic 8x8 "digit" glyphs (10 stroke prototypes, random shifts, thickness
and pixel noise, 64 features). The callback keeps its defaults: global L1 unstructured pruning of
every Linear weight and bias at the end of the scheduled epochs, the lottery-ticket reset of the
surviving weights to their initial values after each pruning round, and the masks made
permanent when fitting ends.
"""
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback, ModelPruning
from torch.utils.data import DataLoader, TensorDataset

L.seed_everything(3)


def make_glyphs(n, seed):
    g = torch.Generator().manual_seed(99)
    protos = (torch.rand(10, 1, 6, 6, generator=g) > 0.55).float()
    protos = F.pad(protos, (1, 1, 1, 1))
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y].clone()
    shifts = torch.randint(-1, 2, (n, 2), generator=g)
    for i in range(n):
        x[i] = torch.roll(x[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(1, 2))
    x = F.avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), 3, stride=1) * (0.8 + 0.8 * torch.rand(n, 1, 1, 1, generator=g))
    x = x + 0.15 * torch.randn(x.shape, generator=g)
    return TensorDataset(x.view(n, 64), y)


class GlyphMLP(L.LightningModule):
    def __init__(self, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.layer_1 = nn.Linear(64, 256)
        self.layer_2 = nn.Linear(256, 128)
        self.layer_3 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.layer_1(x))
        x = F.relu(self.layer_2(x))
        return self.layer_3(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def compute_amount(epoch):
    # the sum of all returned values need to be smaller than 1
    if epoch == 1:
        return 0.5
    elif epoch == 3:
        return 0.25
    elif 4 < epoch < 7:
        return 0.01


class SparsityReport(Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        m = trainer.callback_metrics
        zeros = total = 0
        for layer in (pl_module.layer_1, pl_module.layer_2, pl_module.layer_3):
            zeros += int((layer.weight == 0).sum()) + int((layer.bias == 0).sum())
            total += layer.weight.numel() + layer.bias.numel()
        print(f"epoch {trainer.current_epoch}  train_loss {m.get('train_loss', float('nan')):.4f}  "
              f"val_loss {m.get('val_loss', float('nan')):.4f}  val_acc {m.get('val_acc', float('nan')):.3f}  "
              f"(weights zero before this epoch's pruning: {zeros / total:.1%})")


def main():
    train_loader = DataLoader(make_glyphs(2560, seed=1), batch_size=64, shuffle=True)
    val_loader = DataLoader(make_glyphs(1000, seed=2), batch_size=500)
    model = GlyphMLP()

    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            max_epochs=8,
            accelerator="cpu",
            devices=1,
            default_root_dir=root,
            callbacks=[SparsityReport(), ModelPruning("l1_unstructured", amount=compute_amount)],
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=False,
            logger=False,
            num_sanity_val_steps=0,
        )
        trainer.fit(model, train_loader, val_loader)
        result = trainer.validate(model, val_loader, verbose=False)[0]

    zeros = sum(int((p == 0).sum()) for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())
    print(f"pruned model: {zeros}/{total} parameters zero ({zeros / total:.1%})  "
          f"val_loss {result['val_loss']:.4f}  val_acc {result['val_acc']:.3f}")


if __name__ == "__main__":
    main()
