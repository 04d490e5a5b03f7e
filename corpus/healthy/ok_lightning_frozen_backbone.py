"""Transfer learning with Lightning: a frozen pretrained encoder and a trainable head.

Step 1 pretrains an autoencoder on unlabeled data (plain PyTorch) and saves the
encoder's weights in a temporary directory. Step 2 follows the Lightning
transfer-learning guide: the LightningModule loads that encoder as a feature
extractor, freezes it (requires_grad False, eval mode, no_grad in forward) and
trains only the new classification head on a small labelled set.
"""
import os
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

IN_DIM = 48
LATENT = 16
NUM_CLASSES = 5


def make_world(seed=0):
    """Data lives near a 6-d manifold mixed nonlinearly into 48 dims; classes are clusters on it."""
    g = torch.Generator().manual_seed(seed)
    mix1 = torch.randn(6, 32, generator=g) / 6 ** 0.5
    mix2 = torch.randn(32, IN_DIM, generator=g) / 32 ** 0.5
    centers = torch.randn(NUM_CLASSES, 6, generator=g) * 1.6

    def sample(n, sg):
        y = torch.randint(0, NUM_CLASSES, (n,), generator=sg)
        z = centers[y] + torch.randn(n, 6, generator=sg)
        x = torch.tanh(z @ mix1) @ mix2 + 0.05 * torch.randn(n, IN_DIM, generator=sg)
        return x, y

    return sample


def build_encoder():
    return nn.Sequential(nn.Linear(IN_DIM, 64), nn.ReLU(), nn.Linear(64, LATENT))


def pretrain_encoder(x_unlabeled, path, steps=300):
    encoder = build_encoder()
    decoder = nn.Sequential(nn.Linear(LATENT, 64), nn.ReLU(), nn.Linear(64, IN_DIM))
    params = list(encoder.parameters()) + list(decoder.parameters())
    opt = torch.optim.Adam(params, lr=3e-3)
    for step in range(1, steps + 1):
        idx = torch.randint(0, len(x_unlabeled), (128,))
        xb = x_unlabeled[idx]
        loss = F.mse_loss(decoder(encoder(xb)), xb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"[pretrain] step {step} reconstruction mse {loss.item():.4f}")
    torch.save(encoder.state_dict(), path)


class TransferClassifier(L.LightningModule):
    def __init__(self, encoder_path, lr=1e-2):
        super().__init__()
        self.save_hyperparameters()
        self.feature_extractor = build_encoder()
        self.feature_extractor.load_state_dict(torch.load(encoder_path))
        self.feature_extractor.eval()
        self.feature_extractor.requires_grad_(False)
        self.classifier = nn.Linear(LATENT, NUM_CLASSES)
        self.epoch_losses = []

    def forward(self, x):
        with torch.no_grad():
            representations = self.feature_extractor(x)
        return self.classifier(representations)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.epoch_losses.append(loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_acc", (logits.argmax(1) == y).float().mean())
        self.log("val_loss", F.cross_entropy(logits, y))

    def on_train_epoch_end(self):
        m = self.trainer.callback_metrics
        print(f"epoch {self.current_epoch}: train_loss {sum(self.epoch_losses) / len(self.epoch_losses):.4f} "
              f"val_loss {m['val_loss']:.4f} val_acc {m['val_acc']:.3f}")
        self.epoch_losses.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.classifier.parameters(), lr=self.hparams.lr)


def main():
    L.seed_everything(0)
    sample = make_world()
    x_unlabeled, _ = sample(6000, torch.Generator().manual_seed(1))
    x_train, y_train = sample(400, torch.Generator().manual_seed(2))
    x_val, y_val = sample(400, torch.Generator().manual_seed(3))

    workdir = tempfile.mkdtemp()
    encoder_path = os.path.join(workdir, "encoder.pt")
    pretrain_encoder(x_unlabeled, encoder_path)

    model = TransferClassifier(encoder_path)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    print(f"trainable params {trainable}, frozen params {frozen}")

    trainer = L.Trainer(
        max_epochs=8,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=workdir,
    )
    trainer.fit(
        model,
        DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True),
        DataLoader(TensorDataset(x_val, y_val), batch_size=200),
    )


if __name__ == "__main__":
    main()
