"""A small GPT-2 style language model trained with activation (gradient) checkpointing, in the
style of HF transformers GPT2Model (modeling_gpt2.py: `if self.gradient_checkpointing and
self.training: outputs = self._gradient_checkpointing_func(block.__call__, ...)`, use_cache forced
off when checkpointing). Every transformer block is run under torch.utils.checkpoint, so its
activations are not stored and the block (including its dropout, replayed with the saved RNG
state) is recomputed during backward. Data: synthetic token sequences from a noisy periodic grammar.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

VOCAB, BLOCK = 24, 32
N_LAYER, N_HEAD, N_EMBD = 3, 4, 48
DROPOUT = 0.1


def make_data(n, g):
    period = torch.randint(3, 7, (n, 1), generator=g)
    offset = torch.randint(0, VOCAB, (n, 1), generator=g)
    pos = torch.arange(BLOCK + 1)[None, :]
    seq = (offset + (pos % period) * 3) % VOCAB
    noise = torch.rand(n, BLOCK + 1, generator=g) < 0.05
    seq = torch.where(noise, torch.randint(0, VOCAB, (n, BLOCK + 1), generator=g), seq)
    return seq[:, :-1], seq[:, 1:]


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)
        self.attn_dropout = nn.Dropout(DROPOUT)
        self.resid_dropout = nn.Dropout(DROPOUT)
        self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x, layer_past=None, use_cache=False):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
        k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        if layer_past is not None:
            k = torch.cat((layer_past[0], k), dim=-2)
            v = torch.cat((layer_past[1], v), dim=-2)
        present = (k, v) if use_cache else None
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y)), present


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.mlp = nn.Sequential(nn.Linear(N_EMBD, 4 * N_EMBD), nn.GELU(), nn.Linear(4 * N_EMBD, N_EMBD),
                                 nn.Dropout(DROPOUT))

    def forward(self, x, layer_past=None, use_cache=False):
        a, present = self.attn(self.ln_1(x), layer_past, use_cache)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return x, present


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, N_EMBD)
        self.wpe = nn.Embedding(BLOCK, N_EMBD)
        self.drop = nn.Dropout(DROPOUT)
        self.h = nn.ModuleList([Block() for _ in range(N_LAYER)])
        self.ln_f = nn.LayerNorm(N_EMBD)
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight
        self.gradient_checkpointing = False
        self._warned_use_cache = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def forward(self, idx, targets=None, use_cache=False):
        if self.gradient_checkpointing and self.training:
            if use_cache and not self._warned_use_cache:
                self._warned_use_cache = True
                print("`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`...")
            use_cache = False
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        presents = []
        for block in self.h:
            if self.gradient_checkpointing and self.training:
                x, present = checkpoint(block.__call__, x, None, use_cache, use_reentrant=False)
            else:
                x, present = block(x, None, use_cache)
            presents.append(present)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1))
        return logits, loss


def main():
    g = torch.Generator().manual_seed(0)
    xtr, ytr = make_data(1024, g)
    xva, yva = make_data(256, g)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True)
    model = GPT()
    model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    for epoch in range(4):
        model.train()
        tot = 0.0
        for xb, yb in loader:
            _, loss = model(xb, yb, use_cache=True)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            tot += loss.item()
        model.eval()
        with torch.no_grad():
            logits, vloss = model(xva, yva)
            acc = (logits.argmax(-1)[:, 8:] == yva[:, 8:]).float().mean().item()
        print(f"epoch {epoch + 1} train loss {tot / len(loader):.4f} val loss {vloss.item():.4f} "
              f"val next-token acc (pos>=8) {acc:.3f}")


if __name__ == '__main__':
    main()
