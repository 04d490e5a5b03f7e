"""Transfer learning with a frozen-then-unfrozen backbone in Lightning, after
Lightning-AI/pytorch-lightning examples/pytorch/domain_templates/computer_vision_fine_tuning.py.

The cats-vs-dogs download and the ImageNet ResNet-50 are replaced by a small BN conv backbone
"pretrained" here for a few dozen steps on a synthetic 4-shape task (its state_dict saved to and
loaded from a temporary directory), and a synthetic binary target task (disc vs ring, 1x16x16,
noisy). The MilestonesFinetuning callback (backbone frozen, last block unfrozen at the first
milestone, the rest at the second, each added as a new param group at lr/10, BN kept frozen),
the TransferLearningModel head, binary_cross_entropy_with_logits, Adam over the trainable
parameters and MultiStepLR on the milestones follow the example.
"""
import os
import tempfile

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks.finetuning import BaseFinetuning
from torch import nn, optim
from torch.optim.lr_scheduler import MultiStepLR
from torch.optim.optimizer import Optimizer
from torch.utils.data import DataLoader, TensorDataset

SIZE = 16


def make_shapes(n, kinds, seed):
    g = torch.Generator().manual_seed(seed)
    coords = torch.arange(SIZE).float()
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    labels = torch.randint(0, len(kinds), (n,), generator=g)
    cx = torch.randint(5, SIZE - 5, (n, 1, 1), generator=g).float()
    cy = torch.randint(5, SIZE - 5, (n, 1, 1), generator=g).float()
    r = 2.5 + 2 * torch.rand(n, 1, 1, generator=g)
    d = torch.sqrt((xx - cx) ** 2 + (yy - cy) ** 2)
    shapes = {
        "disc": (d <= r).float(),
        "ring": ((d <= r) & (d >= r - 1.5)).float(),
        "square": (((xx - cx).abs() <= r) & ((yy - cy).abs() <= r)).float(),
        "cross": ((((xx - cx).abs() <= 1) & ((yy - cy).abs() <= r)) | (((yy - cy).abs() <= 1) & ((xx - cx).abs() <= r))).float(),
        "hbar": (((xx - cx).abs() <= r) & ((yy - cy).abs() <= 1)).float(),
        "frame": ((((xx - cx).abs() <= r) & ((yy - cy).abs() <= r)) & ~(((xx - cx).abs() <= r - 1.5) & ((yy - cy).abs() <= r - 1.5))).float(),
    }
    imgs = torch.zeros(n, SIZE, SIZE)
    for k, name in enumerate(kinds):
        sel = labels == k
        imgs[sel] = shapes[name][sel]
    imgs = imgs * (0.5 + torch.rand(n, 1, 1, generator=g)) + 0.6 * torch.randn(n, SIZE, SIZE, generator=g)
    return imgs.unsqueeze(1), labels


def backbone():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
    )


def pretrain_backbone(path):
    """Stand-in for torchvision's ImageNet weights: a short supervised run on another task."""
    torch.manual_seed(0)
    net = nn.Sequential(backbone(), nn.Flatten(), nn.Linear(64, 4))
    x, y = make_shapes(1536, ["square", "cross", "hbar", "frame"], seed=10)
    opt = optim.Adam(net.parameters(), lr=3e-3)
    for epoch in range(2):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 64):
            idx = perm[i:i + 64]
            loss = F.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    print(f"pretraining done, last loss {loss.item():.3f}")
    torch.save(net[0].state_dict(), path)


class MilestonesFinetuning(BaseFinetuning):
    def __init__(self, milestones: tuple = (5, 10), train_bn: bool = False):
        super().__init__()
        self.milestones = milestones
        self.train_bn = train_bn

    def freeze_before_training(self, pl_module: L.LightningModule):
        self.freeze(modules=pl_module.feature_extractor, train_bn=self.train_bn)

    def finetune_function(self, pl_module: L.LightningModule, epoch: int, optimizer: Optimizer):
        if epoch == self.milestones[0]:
            # unfreeze 5 last layers
            self.unfreeze_and_add_param_group(
                modules=pl_module.feature_extractor[-5:], optimizer=optimizer, train_bn=self.train_bn
            )

        elif epoch == self.milestones[1]:
            # unfreeze remaining layers
            self.unfreeze_and_add_param_group(
                modules=pl_module.feature_extractor[:-5], optimizer=optimizer, train_bn=self.train_bn
            )


class TransferLearningModel(L.LightningModule):
    def __init__(self, backbone_path: str, milestones: tuple = (2, 4), lr: float = 1e-3,
                 lr_scheduler_gamma: float = 1e-1):
        super().__init__()
        self.backbone_path = backbone_path
        self.milestones = milestones
        self.lr = lr
        self.lr_scheduler_gamma = lr_scheduler_gamma
        self.__build_model()
        self.save_hyperparameters()

    def __build_model(self):
        # 1. Load pre-trained network:
        self.feature_extractor = backbone()
        self.feature_extractor.load_state_dict(torch.load(self.backbone_path))

        # 2. Classifier:
        _fc_layers = [nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.Linear(16, 1)]
        self.fc = nn.Sequential(*_fc_layers)

        # 3. Loss:
        self.loss_func = F.binary_cross_entropy_with_logits

    def forward(self, x):
        # 1. Feature extraction:
        x = self.feature_extractor(x)
        x = x.squeeze(-1).squeeze(-1)

        # 2. Classifier (returns logits):
        return self.fc(x)

    def loss(self, logits, labels):
        return self.loss_func(input=logits, target=labels)

    def training_step(self, batch, batch_idx):
        x, y = batch
        y_logits = self.forward(x)
        y_scores = torch.sigmoid(y_logits)
        y_true = y.view((-1, 1)).type_as(x)

        train_loss = self.loss(y_logits, y_true)
        acc = ((y_scores > 0.5).float() == y_true).float().mean()
        self.log("train_acc", acc, prog_bar=True, on_step=False, on_epoch=True)
        self.log("train_loss", train_loss, prog_bar=True, on_step=False, on_epoch=True)
        return train_loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        y_logits = self.forward(x)
        y_scores = torch.sigmoid(y_logits)
        y_true = y.view((-1, 1)).type_as(x)

        self.log("val_loss", self.loss(y_logits, y_true), prog_bar=True)
        self.log("val_acc", ((y_scores > 0.5).float() == y_true).float().mean(), prog_bar=True)

    def on_train_epoch_end(self):
        m = self.trainer.callback_metrics
        if "train_loss" in m:
            trainable = sum(p.numel() for p in self.parameters() if p.requires_grad)
            groups = [f"{g['lr']:.1e}" for g in self.trainer.optimizers[0].param_groups]
            print(f"epoch {self.current_epoch}: train_loss {m['train_loss']:.4f} train_acc {m['train_acc']:.3f} "
                  f"val_loss {m['val_loss']:.4f} val_acc {m['val_acc']:.3f} "
                  f"trainable params {trainable} param group lrs {groups}")

    def configure_optimizers(self):
        parameters = list(self.parameters())
        trainable_parameters = list(filter(lambda p: p.requires_grad, parameters))
        print(f"The model will start training with only {len(trainable_parameters)} "
              f"trainable parameters out of {len(parameters)}.")
        optimizer = optim.Adam(trainable_parameters, lr=self.lr)
        scheduler = MultiStepLR(optimizer, milestones=self.milestones, gamma=self.lr_scheduler_gamma)
        return [optimizer], [scheduler]


def main():
    L.seed_everything(1234)
    root = tempfile.mkdtemp()
    backbone_path = os.path.join(root, "backbone.pt")
    pretrain_backbone(backbone_path)

    L.seed_everything(1234)
    x_tr, y_tr = make_shapes(1280, ["disc", "ring"], seed=1)
    x_va, y_va = make_shapes(512, ["disc", "ring"], seed=2)
    train_loader = DataLoader(TensorDataset(x_tr, y_tr), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_va, y_va), batch_size=128)

    model = TransferLearningModel(backbone_path, milestones=(2, 4), lr=3e-3, lr_scheduler_gamma=0.3)
    trainer = L.Trainer(
        max_epochs=6,
        accelerator="cpu",
        default_root_dir=root,
        callbacks=[MilestonesFinetuning(milestones=(2, 4))],
        enable_progress_bar=False,
        enable_checkpointing=False,
        logger=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
