"""Classify video frames into actions by fine-tuning a pretrained CNN with PyTorch Lightning.

Two-stage recipe (as in the Keras InceptionV3 fine-tuning guide): first train only the new,
randomly initialised top layers with the pretrained base frozen, later unfreeze the last block
of the base as well.  Frames are generated here (each action has its own colour palette and
motion-streak orientation); the "pretrained" base is loaded from a checkpoint file.
"""
import math
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning.pytorch as pl
from lightning.pytorch.callbacks import BaseFinetuning
from torch.utils.data import DataLoader, TensorDataset

ACTIONS = ["ApplyEyeMakeup", "Archery", "BabyCrawling", "BalanceBeam",
           "BandMarching", "BaseballPitch", "Basketball", "BenchPress"]


def make_frames(n, seed):
    g = torch.Generator().manual_seed(seed)
    palette = torch.rand(len(ACTIONS), 3, 1, 1, generator=torch.Generator().manual_seed(99))
    ys, xs = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    labels = torch.randint(0, len(ACTIONS), (n,), generator=g)
    frames = []
    for c in labels.tolist():
        ang = c * math.pi / len(ACTIONS)
        streak = torch.sin(0.6 * (xs * math.cos(ang) + ys * math.sin(ang)) + 6.28 * torch.rand(1, generator=g))
        frame = palette[c] * (0.6 + 0.4 * streak) + 0.2 * torch.randn(3, 32, 32, generator=g)
        frames.append(frame)
    return torch.stack(frames), labels


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class BaseCNN(nn.Module):
    """Convolutional base without its ImageNet top (include_top=False)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.layer1 = BasicBlock(16, 32, 2)
        self.layer2 = BasicBlock(32, 64, 2)
        self.layer3 = BasicBlock(64, 64, 1)
        self.out_channels = 64

    def forward(self, x):
        return self.layer3(self.layer2(self.layer1(self.stem(x))))


def load_pretrained_base(path):
    base = BaseCNN()
    base.load_state_dict(torch.load(path))
    return base


class FrameClassifier(pl.LightningModule):
    def __init__(self, base_ckpt, num_classes, lr=1e-4):
        super().__init__()
        self.save_hyperparameters()
        self.base_model = load_pretrained_base(base_ckpt)
        self.top = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(self.base_model.out_channels, 256), nn.ReLU(),
            nn.Linear(256, num_classes),
        )

    def forward(self, x):
        return self.top(self.base_model(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        if self.global_step % 25 == 0:
            acc = (logits.argmax(1) == y).float().mean()
            print(f"step {self.global_step:4d} loss {loss.item():.4f} acc {acc:.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), prog_bar=False)
        self.log("val_acc", (logits.argmax(1) == y).float().mean(), prog_bar=False)

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking:
            m = self.trainer.callback_metrics
            print(f"epoch {self.current_epoch} val_loss {m['val_loss']:.4f} val_acc {m['val_acc']:.3f}")

    def configure_optimizers(self):
        return torch.optim.RMSprop(filter(lambda p: p.requires_grad, self.parameters()), lr=self.hparams.lr)


class TopThenBaseFinetuning(BaseFinetuning):
    def __init__(self, unfreeze_at_epoch=10):
        super().__init__()
        self._unfreeze_at_epoch = unfreeze_at_epoch

    def freeze_before_training(self, pl_module):
        # first: train only the top layers (which were randomly initialized)
        self.freeze(pl_module)

    def finetune_function(self, pl_module, current_epoch, optimizer):
        if current_epoch == self._unfreeze_at_epoch:
            self.unfreeze_and_add_param_group(
                modules=pl_module.base_model.layer3, optimizer=optimizer, train_bn=True,
            )


def main():
    pl.seed_everything(0)
    x_tr, y_tr = make_frames(1600, seed=1)
    x_va, y_va = make_frames(400, seed=2)
    train_dl = DataLoader(TensorDataset(x_tr, y_tr), batch_size=32, shuffle=True)
    val_dl = DataLoader(TensorDataset(x_va, y_va), batch_size=200)

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "base_cnn_imagenet_notop.pt")
        torch.save(BaseCNN().state_dict(), ckpt)
        model = FrameClassifier(ckpt, num_classes=len(ACTIONS))

        trainer = pl.Trainer(
            max_epochs=4,
            accelerator="cpu",
            devices=1,
            callbacks=[TopThenBaseFinetuning(unfreeze_at_epoch=10)],
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
        trainer.fit(model, train_dl, val_dl)


if __name__ == "__main__":
    main()
