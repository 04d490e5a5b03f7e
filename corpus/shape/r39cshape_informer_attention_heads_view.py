"""Transformer encoder for sequence-to-sequence time-series regression (Informer-style
attention layer): each output step is the sensor reading a few steps earlier plus a
smoothed trend, learned from synthetic multivariate series."""
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

SEQ_LEN = 24
D_MODEL = 32
N_HEADS = 4


class LagSeries(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, SEQ_LEN, 3, generator=g)
        y = torch.zeros(n, SEQ_LEN, 1)
        y[:, 3:, 0] = self.x[:, :-3, 0] - 0.5 * self.x[:, :-3, 1]
        self.y = y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class FullAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.query_projection = nn.Linear(d_model, d_model)
        self.key_projection = nn.Linear(d_model, d_model)
        self.value_projection = nn.Linear(d_model, d_model)
        self.out_projection = nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values):
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads
        queries = self.query_projection(queries).view(B, L, H, -1)
        keys = self.key_projection(keys).view(B, S, H, -1)
        values = self.value_projection(values).view(B, S, H, -1)

        D = queries.shape[-1]
        queries = queries.view(B, H, L, -1)
        keys = keys.view(B, H, S, -1)
        values = values.view(B, H, S, -1)

        scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(D)
        attn = torch.softmax(scores, dim=-1)
        context = torch.matmul(attn, values)
        context = context.transpose(2, 1).contiguous().view(B, L, -1)
        return self.out_projection(context)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff=64, dropout=0.0):
        super().__init__()
        self.attention = FullAttention(d_model, n_heads)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.attention(x, x, x)))
        return self.norm2(x + self.dropout(self.ff(x)))


class Forecaster(nn.Module):
    def __init__(self, c_in=3, c_out=1):
        super().__init__()
        self.value_embedding = nn.Linear(c_in, D_MODEL)
        pe = torch.zeros(SEQ_LEN, D_MODEL)
        position = torch.arange(0, SEQ_LEN).float().unsqueeze(1)
        div_term = torch.exp(torch.arange(0, D_MODEL, 2).float() * -(math.log(10000.0) / D_MODEL))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("position_embedding", pe.unsqueeze(0))
        self.encoder = nn.ModuleList([EncoderLayer(D_MODEL, N_HEADS) for _ in range(2)])
        self.projection = nn.Linear(D_MODEL, c_out)

    def forward(self, x):
        h = self.value_embedding(x) + self.position_embedding
        for layer in self.encoder:
            h = layer(h)
        return self.projection(h)


train_loader = DataLoader(LagSeries(4096, seed=1), batch_size=64, shuffle=True)
val_loader = DataLoader(LagSeries(512, seed=2), batch_size=128)

model = Forecaster()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
criterion = nn.MSELoss()

for epoch in range(4):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(train_loader):
        optimizer.zero_grad()
        pred = model(x)
        loss = criterion(pred, y)
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 20 == 0:
            print(f"epoch {epoch} step {step} train mse {loss.item():.4f}")
    model.eval()
    val = 0.0
    with torch.no_grad():
        for x, y in val_loader:
            val += criterion(model(x), y).item()
    print(f"epoch {epoch} train mse {total / len(train_loader):.4f} val mse {val / len(val_loader):.4f}")
