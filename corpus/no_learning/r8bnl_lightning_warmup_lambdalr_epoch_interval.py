"""Music-tag classifier trained with PyTorch Lightning.

A small Transformer encoder reads mel-spectrogram clips (32 frames x 16 mel bins) and
predicts one of 4 tags. AdamW with a linear warm-up then linear decay LambdaLR, as in the
diffusion trainer this LightningModule was adapted from.

Synthetic clips: each tag has its own band of mel bins and its own rhythm (amplitude
modulation rate), plus noise.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, Dataset

L.seed_everything(42, verbose=False)

N_MELS = 16
N_FRAMES = 32
N_TAGS = 4


class MelClips(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_TAGS, (n,), generator=g)
        t = torch.arange(N_FRAMES).float()
        mel = torch.arange(N_MELS).float()
        clips = 0.5 * torch.randn(n, N_FRAMES, N_MELS, generator=g)
        phase = 2 * math.pi * torch.rand(n, generator=g)
        for i in range(n):
            k = int(self.labels[i])
            band = torch.exp(-0.5 * ((mel - (2 + 4 * k)) / 1.5) ** 2)
            rhythm = 0.5 + 0.5 * torch.sin(2 * math.pi * (k + 1) * t / 16 + phase[i])
            clips[i] += 1.5 * rhythm[:, None] * band[None, :]
        self.clips = clips

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return {"mels": self.clips[idx], "tags": self.labels[idx]}


class TagTransformer(nn.Module):
    def __init__(self, d_model=32, nhead=4, num_layers=2):
        super().__init__()
        self.proj_in = nn.Linear(N_MELS, d_model)
        self.pos = nn.Parameter(torch.randn(1, N_FRAMES, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, N_TAGS)

    def forward(self, mels):
        h = self.encoder(self.proj_in(mels) + self.pos)
        return self.head(self.norm(h.mean(dim=1)))


class Pipeline(L.LightningModule):
    def __init__(
        self,
        learning_rate: float = 5e-4,
        weight_decay: float = 1e-2,
        max_steps: int = 20000,
        warmup_steps: int = 100,
        batch_size: int = 32,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.transformers = TagTransformer()
        self._epoch_losses = []

    def training_step(self, batch, batch_idx):
        logits = self.transformers(batch["mels"])
        loss = F.cross_entropy(logits, batch["tags"])
        acc = (logits.argmax(-1) == batch["tags"]).float().mean()
        self._epoch_losses.append((loss.item(), acc.item()))
        if batch_idx % 20 == 0:
            lr = self.lr_schedulers().get_last_lr()[0]
            print(f"epoch {self.current_epoch} step {self.global_step:4d}  train/loss {loss.item():.4f}  "
                  f"train/acc {acc.item():.3f}  lr {lr:.2e}")
        return loss

    def on_train_epoch_end(self):
        losses, accs = zip(*self._epoch_losses)
        print(f"== epoch {self.current_epoch}: mean train loss {sum(losses) / len(losses):.4f}, "
              f"mean train acc {sum(accs) / len(accs):.3f}")
        self._epoch_losses = []

    def validation_step(self, batch, batch_idx):
        logits = self.transformers(batch["mels"])
        self.log("val/loss", F.cross_entropy(logits, batch["tags"]))
        self.log("val/acc", (logits.argmax(-1) == batch["tags"]).float().mean())

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        if "val/loss" in m:
            print(f"== epoch {self.current_epoch}: val/loss {m['val/loss']:.4f}  val/acc {m['val/acc']:.3f}")

    def configure_optimizers(self):
        trainable_params = [p for name, p in self.transformers.named_parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            params=[{"params": trainable_params}],
            lr=self.hparams.learning_rate,
            weight_decay=self.hparams.weight_decay,
            betas=(0.8, 0.9),
        )
        max_steps = self.hparams.max_steps
        warmup_steps = self.hparams.warmup_steps

        # Create a scheduler that first warms up linearly, then decays linearly
        def lr_lambda(current_step):
            if current_step < warmup_steps:
                # Linear warmup from 0 to learning_rate
                return float(current_step) / float(max(1, warmup_steps))
            else:
                # Linear decay from learning_rate to 0
                progress = float(current_step - warmup_steps) / float(max(1, max_steps - warmup_steps))
                return max(0.0, 1.0 - progress)

        lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda, last_epoch=-1)
        return [optimizer], [lr_scheduler]


def main():
    train_ds = MelClips(1920, seed=0)
    val_ds = MelClips(512, seed=1)
    model = Pipeline()
    train_loader = DataLoader(train_ds, batch_size=model.hparams.batch_size, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)

    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(model, train_loader, val_loader)


if __name__ == "__main__":
    main()
