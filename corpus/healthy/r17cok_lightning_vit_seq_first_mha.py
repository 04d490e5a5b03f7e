"""Vision Transformer trained from scratch in Lightning, after the UvA-DL tutorial 11 "Vision
Transformers" (Lightning-AI/tutorials, course_UvA-DL/11-vision-transformer).

CIFAR10 is replaced by 10 synthetic classes of 3x16x16 images (noisy colour templates with random
shifts and horizontal flips), the model is scaled down (embed 64, 2 layers, 16 patches of 4x4).
The Pre-LN AttentionBlock on nn.MultiheadAttention, img_to_patch, the CLS token and learned
positional embedding, the transpose to [T, B, E] before the transformer, AdamW with MultiStepLR,
ModelCheckpoint on val_acc and the reload of the best checkpoint follow the tutorial.
"""
import os
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

CHECKPOINT_PATH = tempfile.mkdtemp()
L.seed_everything(42)

NUM_CLASSES, SIZE = 10, 16


def make_images(n_per_class, generator):
    g = torch.Generator().manual_seed(0)
    templates = torch.rand(NUM_CLASSES, 3, SIZE // 4, SIZE // 4, generator=g)
    templates = F.interpolate(templates, scale_factor=4, mode="nearest")
    labels = torch.arange(NUM_CLASSES).repeat_interleave(n_per_class)
    imgs = templates[labels].clone()
    shifts = torch.randint(-2, 3, (len(labels), 2), generator=generator)
    imgs = torch.stack([torch.roll(im, (int(s[0]), int(s[1])), dims=(1, 2)) for im, s in zip(imgs, shifts)])
    imgs = imgs * (0.8 + 0.4 * torch.rand(len(labels), 3, 1, 1, generator=generator))
    imgs = imgs + 0.35 * torch.randn(imgs.shape, generator=generator)
    return imgs, labels


class ImageSet(data.Dataset):
    def __init__(self, imgs, labels, train=False):
        self.imgs = (imgs - 0.5) / 0.3
        self.labels = labels
        self.train = train

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        img = self.imgs[idx]
        if self.train and torch.rand(1).item() < 0.5:
            img = img.flip(-1)
        return img, self.labels[idx]


train_set = ImageSet(*make_images(256, torch.Generator().manual_seed(1)), train=True)
val_set = ImageSet(*make_images(50, torch.Generator().manual_seed(2)))
test_set = ImageSet(*make_images(50, torch.Generator().manual_seed(3)))

train_loader = data.DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
val_loader = data.DataLoader(val_set, batch_size=128, shuffle=False, drop_last=False)
test_loader = data.DataLoader(test_set, batch_size=128, shuffle=False, drop_last=False)


def img_to_patch(x, patch_size, flatten_channels=True):
    B, C, H, W = x.shape
    x = x.reshape(B, C, H // patch_size, patch_size, W // patch_size, patch_size)
    x = x.permute(0, 2, 4, 1, 3, 5)  # [B, H', W', C, p_H, p_W]
    x = x.flatten(1, 2)  # [B, H'*W', C, p_H, p_W]
    if flatten_channels:
        x = x.flatten(2, 4)  # [B, H'*W', C*p_H*p_W]
    return x


class AttentionBlock(nn.Module):
    def __init__(self, embed_dim, hidden_dim, num_heads, dropout=0.0):
        super().__init__()
        self.layer_norm_1 = nn.LayerNorm(embed_dim)
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.layer_norm_2 = nn.LayerNorm(embed_dim)
        self.linear = nn.Sequential(
            nn.Linear(embed_dim, hidden_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, embed_dim),
            nn.Dropout(dropout),
        )

    def forward(self, x):
        inp_x = self.layer_norm_1(x)
        x = x + self.attn(inp_x, inp_x, inp_x)[0]
        x = x + self.linear(self.layer_norm_2(x))
        return x


class VisionTransformer(nn.Module):
    def __init__(self, embed_dim, hidden_dim, num_channels, num_heads, num_layers, num_classes, patch_size,
                 num_patches, dropout=0.0):
        super().__init__()
        self.patch_size = patch_size
        self.input_layer = nn.Linear(num_channels * (patch_size**2), embed_dim)
        self.transformer = nn.Sequential(
            *(AttentionBlock(embed_dim, hidden_dim, num_heads, dropout=dropout) for _ in range(num_layers))
        )
        self.mlp_head = nn.Sequential(nn.LayerNorm(embed_dim), nn.Linear(embed_dim, num_classes))
        self.dropout = nn.Dropout(dropout)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, 1 + num_patches, embed_dim))

    def forward(self, x):
        x = img_to_patch(x, self.patch_size)
        B, T, _ = x.shape
        x = self.input_layer(x)

        cls_token = self.cls_token.repeat(B, 1, 1)
        x = torch.cat([cls_token, x], dim=1)
        x = x + self.pos_embedding[:, : T + 1]

        x = self.dropout(x)
        x = x.transpose(0, 1)
        x = self.transformer(x)

        cls = x[0]
        out = self.mlp_head(cls)
        return out


class ViT(L.LightningModule):
    def __init__(self, model_kwargs, lr):
        super().__init__()
        self.save_hyperparameters()
        self.model = VisionTransformer(**model_kwargs)
        self.example_input_array = next(iter(train_loader))[0]

    def forward(self, x):
        return self.model(x)

    def configure_optimizers(self):
        optimizer = optim.AdamW(self.parameters(), lr=self.hparams.lr)
        lr_scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[100, 150], gamma=0.1)
        return [optimizer], [lr_scheduler]

    def _calculate_loss(self, batch, mode="train"):
        imgs, labels = batch
        preds = self.model(imgs)
        loss = F.cross_entropy(preds, labels)
        acc = (preds.argmax(dim=-1) == labels).float().mean()

        self.log("%s_loss" % mode, loss, prog_bar=(mode != "train"))
        self.log("%s_acc" % mode, acc, prog_bar=(mode != "train"))
        return loss

    def training_step(self, batch, batch_idx):
        loss = self._calculate_loss(batch, mode="train")
        if self.global_step % 20 == 0:
            print(f"step {self.global_step:4d} | train_loss {loss.item():.4f}")
        return loss

    def validation_step(self, batch, batch_idx):
        self._calculate_loss(batch, mode="val")

    def test_step(self, batch, batch_idx):
        self._calculate_loss(batch, mode="test")

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "val_acc" in m:
            tag = "sanity" if self.trainer.sanity_checking else "epoch"
            print(f"{tag} {self.current_epoch} | val_loss {m['val_loss']:.4f} | val_acc {m['val_acc']:.3f}")


def train_model(**kwargs):
    trainer = L.Trainer(
        default_root_dir=os.path.join(CHECKPOINT_PATH, "ViT"),
        accelerator="cpu",
        devices=1,
        max_epochs=4,
        callbacks=[
            ModelCheckpoint(save_weights_only=True, mode="max", monitor="val_acc"),
            LearningRateMonitor("epoch"),
        ],
        logger=CSVLogger(CHECKPOINT_PATH, name="ViT"),
        enable_progress_bar=False,
        enable_model_summary=False,
    )

    L.seed_everything(42)
    model = ViT(**kwargs)
    trainer.fit(model, train_loader, val_loader)
    model = ViT.load_from_checkpoint(trainer.checkpoint_callback.best_model_path)

    val_result = trainer.test(model, dataloaders=val_loader, verbose=False)
    test_result = trainer.test(model, dataloaders=test_loader, verbose=False)
    result = {"test": test_result[0]["test_acc"], "val": val_result[0]["test_acc"]}
    return model, result


model, results = train_model(
    model_kwargs={
        "embed_dim": 64,
        "hidden_dim": 128,
        "num_heads": 4,
        "num_layers": 2,
        "patch_size": 4,
        "num_channels": 3,
        "num_patches": 16,
        "num_classes": NUM_CLASSES,
        "dropout": 0.1,
    },
    lr=3e-4,
)
print("ViT results", results)
