"""Linear-attention transformer ("Transformers are RNNs", elu(x)+1 feature map, as in
fast-transformers' LinearAttention) classifying activities (sitting, walking, stairs,
running, jumping) from raw accelerometer recordings.

The model and the batches are cast to float16 to fit long sequences in memory.
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_CHANNELS = 3
N_CLASSES = 5
D_MODEL = 16
N_HEADS = 2
N_LAYERS = 1
BATCH_SIZE = 4
EPOCHS = 2
LR = 0.01


class AccelerometerRecordings(Dataset):
    """Raw 3-axis accelerometer recordings in g (gravity on z) at 100 Hz, of varying length;
    a few are long continuous sessions."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.x, self.y = [], rng.integers(0, N_CLASSES, size=n)
        for i in range(n):
            c = self.y[i]
            length = int(rng.integers(192, 512)) if rng.random() > 0.025 else int(rng.integers(6144, 8192))
            t = np.arange(length) / 100.0
            freq = [0.2, 1.8, 1.4, 2.8, 2.2][c] * rng.uniform(0.9, 1.1)
            amp = [0.03, 0.2, 0.3, 0.6, 1.2][c] * rng.uniform(0.8, 1.2)
            phase = rng.uniform(0, 2 * np.pi, size=N_CHANNELS)
            rec = amp * np.sin(2 * np.pi * freq * t[:, None] + phase) * np.array([0.6, 0.4, 1.0])
            rec = rec + 0.05 * rng.standard_normal((length, N_CHANNELS))
            tilt = [1.2, 0.2, 0.35, 0.5, 0.1][c] + 0.1 * rng.standard_normal()
            rec = rec + np.array([np.sin(tilt), 0.0, np.cos(tilt)])
            self.x.append(torch.tensor(rec, dtype=torch.float32))

    def __len__(self):
        return len(self.y)

    def __getitem__(self, idx):
        return self.x[idx], int(self.y[idx])


def pad_collate(batch):
    recs, labels = zip(*batch)
    return nn.utils.rnn.pad_sequence(recs, batch_first=True), torch.tensor(labels)


class LinearAttention(nn.Module):
    def __init__(self, d_model, n_heads, eps=1e-6):
        super().__init__()
        self.n_heads = n_heads
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.eps = eps

    def forward(self, x):
        N, L, D = x.shape
        H = self.n_heads
        queries = self.query(x).view(N, L, H, -1)
        keys = self.key(x).view(N, L, H, -1)
        values = self.value(x).view(N, L, H, -1)

        Q = F.elu(queries) + 1
        K = F.elu(keys) + 1
        KV = torch.einsum("nshd,nshm->nhmd", K, values)
        Z = 1 / (torch.einsum("nlhd,nhd->nlh", Q, K.sum(dim=1)) + self.eps)
        V = torch.einsum("nlhd,nhmd,nlh->nlhm", Q, KV, Z)
        return self.out(V.reshape(N, L, D))


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.attention = LinearAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.ff(x))


class LinearTransformerClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(N_CHANNELS, D_MODEL)
        self.layers = nn.ModuleList([EncoderLayer(D_MODEL, N_HEADS) for _ in range(N_LAYERS)])
        self.head = nn.Linear(D_MODEL, N_CLASSES)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(dim=1))


def main():
    train_set = AccelerometerRecordings(240, seed=1)
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True, drop_last=True, collate_fn=pad_collate)

    model = LinearTransformerClassifier().half()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    step = 0
    t0 = time.time()
    for epoch in range(EPOCHS):
        model.train()
        running, correct, seen = 0.0, 0, 0
        for x, y in loader:
            x = x.half()
            logits = model(x)
            loss = F.cross_entropy(logits.float(), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            running += loss.item()
            correct += (logits.argmax(1) == y).sum().item()
            seen += y.numel()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f}")
        print(f"== epoch {epoch}: mean loss {running / len(loader):.4f} acc {correct / seen:.3f} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
