"""Pretrain a small GPT from random weights with the Lightning Trainer.

Adapted from the LitGPT "ptl-trainer" tutorial: a LightningModule wraps the GPT,
AdamW with a 10-step linear warm-up, one epoch over an instruction-style corpus.
The corpus here is generated (templated "### Instruction / ### Response" pairs).
"""
import math
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

VOCAB = list("abcdefghijklmnopqrstuvwxyz #:.\n")
STOI = {c: i for i, c in enumerate(VOCAB)}
WORDS = ["red", "blue", "green", "cat", "dog", "bird", "sun", "moon", "tree", "fish"]


def make_corpus(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    texts = []
    for _ in range(n):
        a, b = torch.randint(0, len(WORDS), (2,), generator=g).tolist()
        texts.append(f"### instruction: repeat {WORDS[a]} {WORDS[b]}\n### response: {WORDS[a]} {WORDS[b]}.\n")
    return texts


class Alpaca2kLike(Dataset):
    def __init__(self, texts, max_seq_length=64):
        self.samples = []
        for t in texts:
            ids = [STOI[c] for c in t][:max_seq_length + 1]
            ids = ids + [STOI[" "]] * (max_seq_length + 1 - len(ids))
            self.samples.append(torch.tensor(ids))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        ids = self.samples[i]
        return {"input_ids": ids[:-1], "labels": ids[1:]}


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.norm_1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.norm_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x, mask):
        h = self.norm_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size=64, n_layer=2, n_head=4, n_embd=64):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        mask = torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, idx):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x, self.mask[:T, :T])
        return self.lm_head(self.ln_f(x))


class LitLLM(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = GPT(len(VOCAB))

    def training_step(self, batch):
        logits = self.model(batch["input_ids"])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch["labels"].reshape(-1))
        self.log("train_loss", loss, prog_bar=True)
        if self.global_step % 20 == 0:
            print(f"step {self.global_step:4d}  lr={self.lr_schedulers().get_last_lr()}  train_loss={loss.item():.4f}")
        return loss

    def validation_step(self, batch):
        logits = self.model(batch["input_ids"])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch["labels"].reshape(-1))
        self.log("validation_loss", loss, prog_bar=True)
        return loss

    def on_validation_epoch_end(self):
        print(f"validation_loss={self.trainer.callback_metrics['validation_loss'].item():.4f}"
              f"  (uniform: {math.log(len(VOCAB)):.4f})")

    def configure_optimizers(self):
        warmup_steps = 10
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=0.0002, weight_decay=0.0, betas=(0.9, 0.95))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: step / warmup_steps)
        return [optimizer], [scheduler]


if __name__ == "__main__":
    batch_size = 8
    train_data = Alpaca2kLike(make_corpus(1200, seed=0))
    val_data = Alpaca2kLike(make_corpus(64, seed=1))
    train_loader = DataLoader(train_data, batch_size=batch_size, shuffle=True)
    val_loader = DataLoader(val_data, batch_size=32)

    lit_model = LitLLM()
    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            default_root_dir=root,
            devices=1,
            accelerator="cpu",
            max_epochs=1,
            limit_train_batches=150,
            accumulate_grad_batches=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
        )
        trainer.fit(lit_model, train_loader, val_loader)
