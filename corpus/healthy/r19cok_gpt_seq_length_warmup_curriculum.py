"""Character-level GPT trained with Sequence Length Warmup (a sequence-length curriculum).

As in MosaicML composer's SeqLengthWarmup / set_batch_sequence_length: training starts on batches
truncated to min_seq_length tokens, and the length grows by seq_length_step_size until it reaches
max_seq_length after the first 30% of training. The model is a small nanoGPT-style transformer
with learned absolute position embeddings; the text is generated from a made-up word list.
"""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(42)
rng = np.random.default_rng(42)

letters = list("abcdefghijklmnopqrstuvwxyz")
words = ["".join(rng.choice(letters, size=rng.integers(2, 7))) for _ in range(60)]
zipf = 1.0 / np.arange(1, len(words) + 1)
zipf /= zipf.sum()


def make_text(n_sentences):
    out = []
    for _ in range(n_sentences):
        n = rng.integers(4, 12)
        idx = rng.choice(len(words), size=n, p=zipf)
        sent = " ".join(words[i] for i in idx)
        out.append(sent[0].upper() + sent[1:] + ".")
    return " ".join(out) + " "


text = make_text(4500)
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
vocab_size = len(chars)
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]


class ChunkDataset(Dataset):
    def __init__(self, data, block_size):
        self.data = data
        self.block_size = block_size

    def __len__(self):
        return (len(self.data) - 1) // self.block_size

    def __getitem__(self, i):
        chunk = self.data[i * self.block_size:(i + 1) * self.block_size + 1]
        return chunk[:-1], chunk[1:]


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.dropout = dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer=2, n_head=4, n_embd=64, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, block_size, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.block_size
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def set_batch_sequence_length(batch, curr_seq_len, truncate=True):
    """Truncate every tensor of the batch to curr_seq_len tokens (composer's truncate=True mode)."""
    if truncate:
        return [t[:, :curr_seq_len].contiguous() for t in batch]
    raise NotImplementedError


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    losses = [model(x, y)[1].item() for x, y in loader]
    model.train()
    return sum(losses) / len(losses)


max_seq_length = 64
min_seq_length = 8
seq_length_step_size = 8
warmup_duration = 0.3
batch_size = 32
epochs = 3

train_loader = DataLoader(ChunkDataset(train_data, max_seq_length), batch_size=batch_size, shuffle=True,
                          drop_last=True)
val_loader = DataLoader(ChunkDataset(val_data, max_seq_length), batch_size=64)

model = GPT(vocab_size, max_seq_length)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
max_steps = epochs * len(train_loader)
warmup_steps = int(warmup_duration * max_steps)
num_update_steps = (max_seq_length - min_seq_length) // seq_length_step_size
update_every_n_steps = max(1, warmup_steps // num_update_steps)
print(f"vocab {vocab_size}, {len(train_data)} train chars, {max_steps} steps, "
      f"seq length warmup over {warmup_steps} steps (+{seq_length_step_size} every {update_every_n_steps})")

step = 0
t0 = time.time()
print(f"initial val loss {evaluate(model, val_loader):.4f} (ln V = {math.log(vocab_size):.4f})")
for epoch in range(epochs):
    for batch in train_loader:
        if step < warmup_steps:
            curr_seq_len = min_seq_length + seq_length_step_size * (step // update_every_n_steps)
            curr_seq_len = min(curr_seq_len, max_seq_length)
        else:
            curr_seq_len = max_seq_length
        x, y = set_batch_sequence_length(batch, curr_seq_len)
        logits, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 5 == 0:
            print(f"step {step:4d} | seq_len {curr_seq_len:3d} | loss {loss.item():.4f}")
        step += 1
    print(f"epoch {epoch} | val loss {evaluate(model, val_loader):.4f} | {time.time() - t0:.1f}s")
