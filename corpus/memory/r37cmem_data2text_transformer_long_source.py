"""Data-to-text: a small Transformer encoder-decoder that writes a game summary from the
linearised box-score records (RotoWire style). Synthetic records and summaries."""
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

SRC_VOCAB = 600
TGT_VOCAB = 400
PAD, BOS, EOS = 0, 1, 2
MAX_SOURCE_POSITIONS = 8000
MAX_TARGET_POSITIONS = 1000
D_MODEL = 64
N_HEADS = 4


def make_example():
    n_records = random.choice([40, 60, 80, 100]) if random.random() < 0.95 else random.randint(1400, 1600)
    src = []
    for _ in range(n_records):
        entity = random.randint(3, 200)
        rtype = random.randint(201, 260)
        value = random.randint(261, SRC_VOCAB - 1)
        src += [entity, rtype, value, 3]
    tgt_len = random.randint(20, 40)
    tgt = [BOS] + [(src[(4 * k) % len(src)] % (TGT_VOCAB - 3)) + 3 for k in range(tgt_len)] + [EOS]
    return src, tgt


class RotoDataset(Dataset):
    def __init__(self, n):
        self.examples = [make_example() for _ in range(n)]

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        src, tgt = self.examples[i]
        src = src[:MAX_SOURCE_POSITIONS]
        return torch.tensor(src), torch.tensor(tgt[:MAX_TARGET_POSITIONS])


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.1):
        super().__init__()
        self.h = n_heads
        self.d_k = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        b = query.size(0)
        q = self.q_proj(query).view(b, -1, self.h, self.d_k).transpose(1, 2)
        k = self.k_proj(key).view(b, -1, self.h, self.d_k).transpose(1, 2)
        v = self.v_proj(value).view(b, -1, self.h, self.d_k).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        attn = self.dropout(F.softmax(scores, dim=-1))
        out = torch.matmul(attn, v).transpose(1, 2).contiguous().view(b, -1, self.h * self.d_k)
        return self.out_proj(out)


class Block(nn.Module):
    def __init__(self, d_model, n_heads, cross=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.cross_attn = MultiHeadAttention(d_model, n_heads) if cross else None
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model))
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(3)])

    def forward(self, x, mask=None, memory=None):
        x = self.norms[0](x + self.self_attn(x, x, x, mask))
        if self.cross_attn is not None:
            x = self.norms[1](x + self.cross_attn(x, memory, memory))
        return self.norms[2](x + self.ff(x))


class Data2Text(nn.Module):
    def __init__(self, n_layers=2):
        super().__init__()
        self.src_emb = nn.Embedding(SRC_VOCAB, D_MODEL, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(TGT_VOCAB, D_MODEL, padding_idx=PAD)
        self.src_pos = nn.Embedding(MAX_SOURCE_POSITIONS, D_MODEL)
        self.tgt_pos = nn.Embedding(MAX_TARGET_POSITIONS, D_MODEL)
        self.encoder = nn.ModuleList([Block(D_MODEL, N_HEADS) for _ in range(n_layers)])
        self.decoder = nn.ModuleList([Block(D_MODEL, N_HEADS, cross=True) for _ in range(n_layers)])
        self.out = nn.Linear(D_MODEL, TGT_VOCAB)

    def forward(self, src, tgt_in):
        s = self.src_emb(src) + self.src_pos(torch.arange(src.size(1)))
        for blk in self.encoder:
            s = blk(s)
        t = self.tgt_emb(tgt_in) + self.tgt_pos(torch.arange(tgt_in.size(1)))
        causal = torch.triu(torch.ones(tgt_in.size(1), tgt_in.size(1), dtype=torch.bool), diagonal=1)
        for blk in self.decoder:
            t = blk(t, causal, s)
        return self.out(t)


loader = DataLoader(RotoDataset(300), batch_size=1, shuffle=True)
model = Data2Text()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)

model.train()
for epoch in range(1):
    running = 0.0
    for step, (src, tgt) in enumerate(loader):
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, TGT_VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        if (step + 1) % 10 == 0:
            print(f"step {step + 1}: loss {running / 10:.4f} (src len {src.size(1)})")
            running = 0.0
        if step + 1 == 150:
            break
