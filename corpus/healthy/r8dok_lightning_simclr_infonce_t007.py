"""SimCLR contrastive pre-training in PyTorch Lightning, after the UvA Deep Learning tutorial 13
("Self-Supervised Contrastive Learning with SimCLR", Lightning-AI/tutorials).

STL10 and torchvision are replaced by synthetic 1x16x16 "images" (a few random Gaussian blobs
each) and tensor augmentations written here: random horizontal flip, random resized crop,
brightness/contrast jitter (p=0.8), Gaussian blur and pixel noise. The model, InfoNCE loss
(cosine similarity / temperature 0.07, self-similarity masked with -9e15), ranking metrics,
AdamW and the per-epoch CosineAnnealingLR(eta_min=lr/50) follow the tutorial.
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

IMG_SIZE = 16
NUM_WORKERS = 0

L.seed_everything(42)


def make_blob_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    coords = torch.linspace(-1, 1, IMG_SIZE)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    centres = torch.rand(n, 4, 2, generator=g) * 1.6 - 0.8
    widths = torch.rand(n, 4, generator=g) * 0.25 + 0.08
    signs = torch.randint(0, 2, (n, 4), generator=g).float() * 2 - 1
    d2 = (xx[None, None] - centres[..., 0, None, None]) ** 2 + (yy[None, None] - centres[..., 1, None, None]) ** 2
    imgs = (signs[..., None, None] * torch.exp(-d2 / (2 * widths[..., None, None] ** 2))).sum(1)
    return imgs.unsqueeze(1)  # N, 1, H, W


class ContrastiveTransformations:
    def __init__(self, base_transforms, n_views=2):
        self.base_transforms = base_transforms
        self.n_views = n_views

    def __call__(self, x):
        return [self.base_transforms(x) for i in range(self.n_views)]


def contrast_transforms(img):
    # RandomHorizontalFlip
    if torch.rand(1) < 0.5:
        img = img.flip(-1)
    # RandomResizedCrop(size=16, scale=(0.5, 1.0))
    side = int(IMG_SIZE * float(torch.empty(1).uniform_(0.7, 1.0)))
    top = int(torch.randint(0, IMG_SIZE - side + 1, (1,)))
    left = int(torch.randint(0, IMG_SIZE - side + 1, (1,)))
    img = img[:, top:top + side, left:left + side]
    img = F.interpolate(img[None], size=(IMG_SIZE, IMG_SIZE), mode="bilinear", align_corners=False)[0]
    # RandomApply([ColorJitter(brightness=0.5, contrast=0.5)], p=0.8)
    if torch.rand(1) < 0.8:
        img = img * float(torch.empty(1).uniform_(0.5, 1.5)) + float(torch.empty(1).uniform_(-0.3, 0.3))
    # GaussianBlur(kernel_size=3)
    kernel = torch.tensor([1.0, 2.0, 1.0])
    kernel = (kernel[:, None] * kernel[None, :]) / 16
    img = F.conv2d(img[None], kernel[None, None], padding=1)[0]
    # pixel noise, then Normalize
    img = img + 0.05 * torch.randn_like(img)
    return (img - img.mean()) / (img.std() + 1e-5)


class UnlabeledBlobs(data.Dataset):
    def __init__(self, n, seed, transform):
        self.imgs = make_blob_images(n, seed)
        self.transform = transform

    def __len__(self):
        return len(self.imgs)

    def __getitem__(self, idx):
        return self.transform(self.imgs[idx]), -1


class SimCLR(L.LightningModule):
    def __init__(self, hidden_dim, lr, temperature, weight_decay, max_epochs=500):
        super().__init__()
        self.save_hyperparameters()
        assert self.hparams.temperature > 0.0, "The temperature must be a positive float!"
        # Base model f(.): a small CNN encoder in place of resnet18
        self.convnet = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * (IMG_SIZE // 4) ** 2, 4 * hidden_dim),  # "num_classes=4*hidden_dim"
            # The MLP for g(.) consists of Linear->ReLU->Linear
            nn.ReLU(inplace=True),
            nn.Linear(4 * hidden_dim, hidden_dim),
        )

    def configure_optimizers(self):
        optimizer = optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
        lr_scheduler = optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=self.hparams.max_epochs, eta_min=self.hparams.lr / 50
        )
        return [optimizer], [lr_scheduler]

    def info_nce_loss(self, batch, mode="train"):
        imgs, _ = batch
        imgs = torch.cat(imgs, dim=0)

        # Encode all images
        feats = self.convnet(imgs)
        # Calculate cosine similarity
        cos_sim = F.cosine_similarity(feats[:, None, :], feats[None, :, :], dim=-1)
        # Mask out cosine similarity to itself
        self_mask = torch.eye(cos_sim.shape[0], dtype=torch.bool, device=cos_sim.device)
        cos_sim.masked_fill_(self_mask, -9e15)
        # Find positive example -> batch_size//2 away from the original example
        pos_mask = self_mask.roll(shifts=cos_sim.shape[0] // 2, dims=0)
        # InfoNCE loss
        cos_sim = cos_sim / self.hparams.temperature
        nll = -cos_sim[pos_mask] + torch.logsumexp(cos_sim, dim=-1)
        nll = nll.mean()

        # Logging loss
        self.log(mode + "_loss", nll)
        # Get ranking position of positive example
        comb_sim = torch.cat(
            [cos_sim[pos_mask][:, None], cos_sim.masked_fill(pos_mask, -9e15)],  # First position positive example
            dim=-1,
        )
        sim_argsort = comb_sim.argsort(dim=-1, descending=True).argmin(dim=-1)
        # Logging ranking metrics
        self.log(mode + "_acc_top1", (sim_argsort == 0).float().mean())
        self.log(mode + "_acc_top5", (sim_argsort < 5).float().mean())
        self.log(mode + "_acc_mean_pos", 1 + sim_argsort.float().mean())

        return nll

    def training_step(self, batch, batch_idx):
        return self.info_nce_loss(batch, mode="train")

    def validation_step(self, batch, batch_idx):
        self.info_nce_loss(batch, mode="val")

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "train_loss" in m:
            print(f"epoch {self.current_epoch}: train_loss {m['train_loss']:.4f}  val_loss {m['val_loss']:.4f}  "
                  f"val_acc_top1 {m['val_acc_top1']:.3f}  val_acc_top5 {m['val_acc_top5']:.3f}  "
                  f"val_acc_mean_pos {m['val_acc_mean_pos']:.2f}")


def train_simclr(checkpoint_path, batch_size, max_epochs=500, **kwargs):
    trainer = L.Trainer(
        default_root_dir=os.path.join(checkpoint_path, "SimCLR"),
        accelerator="cpu",
        devices=1,
        max_epochs=max_epochs,
        logger=CSVLogger(checkpoint_path, name="SimCLR"),
        callbacks=[
            ModelCheckpoint(save_weights_only=True, mode="max", monitor="val_acc_top5"),
            LearningRateMonitor("epoch"),
        ],
        enable_progress_bar=False,
        log_every_n_steps=5,
        num_sanity_val_steps=0,
    )

    unlabeled_data = UnlabeledBlobs(1024, seed=0, transform=ContrastiveTransformations(contrast_transforms, n_views=2))
    train_data_contrast = UnlabeledBlobs(128, seed=1, transform=ContrastiveTransformations(contrast_transforms, n_views=2))
    train_loader = data.DataLoader(
        unlabeled_data,
        batch_size=batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=NUM_WORKERS,
    )
    val_loader = data.DataLoader(
        train_data_contrast,
        batch_size=batch_size,
        shuffle=False,
        drop_last=False,
        num_workers=NUM_WORKERS,
    )
    L.seed_everything(42)  # To be reproducible
    model = SimCLR(max_epochs=max_epochs, **kwargs)
    trainer.fit(model, train_loader, val_loader)
    return model


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as checkpoint_path:
        simclr_model = train_simclr(
            checkpoint_path, batch_size=64, hidden_dim=32, lr=5e-4, temperature=0.07, weight_decay=1e-4, max_epochs=5
        )
