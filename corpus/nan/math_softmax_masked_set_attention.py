"""Set classifier (Set-Transformer style) with a hand-written masked multi-head self-attention.

Each example is a variable-size set of 2-D points drawn either from a tight blob or from a
ring; sets are padded to the longest set of the batch and a padding mask is carried along.
"""
import math
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(2)


class PointSets(Dataset):
    def __init__(self, n, min_size=3, max_size=12):
        self.sets, self.labels = [], []
        for _ in range(n):
            k = int(torch.randint(min_size, max_size + 1, ()))
            label = int(torch.randint(0, 2, ()))
            if label == 0:
                pts = 0.5 * torch.randn(k, 2)
            else:
                theta = 2 * math.pi * torch.rand(k)
                pts = torch.stack([theta.cos(), theta.sin()], 1) * 1.5 + 0.1 * torch.randn(k, 2)
            self.sets.append(pts)
            self.labels.append(label)

    def __len__(self):
        return len(self.sets)

    def __getitem__(self, i):
        return self.sets[i], self.labels[i]


def pad_collate(batch):
    max_len = max(len(s) for s, _ in batch)
    x = torch.zeros(len(batch), max_len, 2)
    valid = torch.zeros(len(batch), max_len, dtype=torch.bool)
    for i, (s, _) in enumerate(batch):
        x[i, :len(s)] = s
        valid[i, :len(s)] = True
    y = torch.tensor([label for _, label in batch])
    return x, valid, y


class MaskedSelfAttention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.d_head = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, valid):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.num_heads, self.d_head).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        e = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        mask = (valid[:, :, None] & valid[:, None, :]).unsqueeze(1)
        e = e.masked_fill(mask == 0, -float("inf"))
        attn = F.softmax(e, dim=-1)
        h = (attn @ v).transpose(1, 2).reshape(b, n, d)
        return self.out(h)


class SetClassifier(L.LightningModule):
    def __init__(self, dim=32, num_heads=4, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Linear(2, dim)
        self.attn = MaskedSelfAttention(dim, num_heads)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2))
        self.epoch_losses = []

    def forward(self, x, valid):
        h = self.embed(x)
        h = self.norm(h + self.attn(h, valid))
        h = h.masked_fill(~valid.unsqueeze(-1), 0.0)
        pooled = h.sum(1) / valid.sum(1, keepdim=True)
        return self.head(pooled)

    def training_step(self, batch, batch_idx):
        x, valid, y = batch
        logits = self(x, valid)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(1) == y).float().mean()
        self.epoch_losses.append(loss.item())
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step:4d}  loss {loss.item():.4f}  acc {acc.item():.3f}")
        return loss

    def on_train_epoch_end(self):
        mean = sum(self.epoch_losses) / len(self.epoch_losses)
        print(f"=== epoch {self.current_epoch} mean train loss {mean:.4f}")
        self.epoch_losses.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    loader = DataLoader(PointSets(1024), batch_size=32, shuffle=True, collate_fn=pad_collate)
    model = SetClassifier()
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tempfile.mkdtemp(),
    )
    trainer.fit(model, loader)
