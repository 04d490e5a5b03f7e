"""Mixup training (facebookresearch/mixup-cifar10) of a small pre-activation ResNet, written as a
LightningModule: every batch is mixed with a shuffled copy of itself (lam ~ Beta(alpha, alpha)),
the loss is lam * CE(pred, y_a) + (1 - lam) * CE(pred, y_b) with label smoothing, SGD with
Nesterov momentum and CosineAnnealingWarmRestarts stepped every batch.

Synthetic 10-class "CIFAR": 3x16x16 images, each class a fixed colour texture, plus noise.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(10, 3, 16, 16, generator=torch.Generator().manual_seed(123))
    prototypes = F.avg_pool2d(prototypes, 3, stride=1, padding=1)
    y = torch.randint(0, 10, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    x = torch.stack([torch.roll(prototypes[c], tuple(s.tolist()), dims=(1, 2)) for c, s in zip(y, shift)])
    x = x + 0.8 * torch.randn(x.shape, generator=g)
    return TensorDataset(x, y)


def mixup_data(x, y, alpha=1.0):
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1
    batch_size = x.size()[0]
    index = torch.randperm(batch_size)
    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


class PreActBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.shortcut = None
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Conv2d(in_planes, planes, 1, stride, bias=False)

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        return out + shortcut


class PreActResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.layer1 = PreActBlock(16, 16)
        self.layer2 = PreActBlock(16, 32, stride=2)
        self.bn = nn.BatchNorm2d(32)
        self.linear = nn.Linear(32, num_classes)

    def forward(self, x):
        out = self.layer2(self.layer1(self.conv1(x)))
        out = F.adaptive_avg_pool2d(F.relu(self.bn(out)), 1).flatten(1)
        return self.linear(out)


class MixupClassifier(L.LightningModule):
    def __init__(self, lr=0.1, alpha=1.0, smoothing=0.1, t0_steps=40):
        super().__init__()
        self.save_hyperparameters()
        self.net = PreActResNet()
        self.criterion = nn.CrossEntropyLoss(label_smoothing=smoothing)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        inputs, targets = batch
        inputs, targets_a, targets_b, lam = mixup_data(inputs, targets, self.hparams.alpha)
        outputs = self(inputs)
        loss = mixup_criterion(self.criterion, outputs, targets_a, targets_b, lam)
        self.log("train_loss", loss, prog_bar=True)
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step} lam {lam:.2f} "
                  f"loss {loss.item():.4f} lr {self.optimizers().param_groups[0]['lr']:.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        acc = (logits.argmax(1) == y).float().mean()
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", acc)

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "val_acc" in m:
            print(f"epoch {self.current_epoch} val_loss {m['val_loss']:.4f} val_acc {m['val_acc']:.3f}")

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9,
                                    nesterov=True, weight_decay=5e-4)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=self.hparams.t0_steps, T_mult=2)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def main():
    train_loader = DataLoader(make_split(2048, 0), batch_size=64, shuffle=True)
    val_loader = DataLoader(make_split(512, 1), batch_size=256)
    model = MixupClassifier()
    trainer = L.Trainer(max_epochs=5, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
