"""Texture classifier with an attention-pooling head: a small conv stem turns each
32x32 image into an 8x8 grid of feature tokens, a learned seed query pools the tokens
with multi-head attention (Set-Transformer PMA style), then a linear head. 10 classes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

N_CLASSES = 10
DIM = 32


def make_textures(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    freqs = torch.linspace(0.3, 1.6, N_CLASSES)
    angles = torch.linspace(0, 3.0, N_CLASSES)
    ii, jj = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    phase = torch.rand(n, 1, 1, generator=g) * 6.28
    f = freqs[y][:, None, None]
    a = angles[y][:, None, None]
    img = torch.sin(f * (ii * torch.cos(a) + jj * torch.sin(a)) + phase)
    img = img[:, None] + 0.5 * torch.randn(n, 1, 32, 32, generator=g)
    return TensorDataset(img, y)


class AttnPoolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, DIM, 3, padding=1), nn.BatchNorm2d(DIM), nn.ReLU(),
            nn.Conv2d(DIM, DIM, 3, padding=1, stride=2), nn.BatchNorm2d(DIM), nn.ReLU(),
            nn.Conv2d(DIM, DIM, 3, padding=1, stride=2), nn.BatchNorm2d(DIM), nn.ReLU())
        self.seed = nn.Parameter(torch.randn(1, 1, DIM) * 0.1)
        self.mhsa = nn.MultiheadAttention(DIM, num_heads=4)
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, N_CLASSES)

    def forward(self, x):
        b = x.shape[0]
        y = self.stem(x).flatten(2).transpose(1, 2)
        n_tokens = y.shape[1]
        y = y.reshape(n_tokens, b, DIM)
        query = self.seed.expand(1, b, DIM)
        pooled, _ = self.mhsa(query, y, y)
        pooled = pooled.view(b, DIM)
        return self.head(self.norm(pooled))


train_loader = DataLoader(make_textures(1536, 1), batch_size=64, shuffle=True, drop_last=True)
val_loader = DataLoader(make_textures(1024, 2), batch_size=256)

model = AttnPoolNet()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

for epoch in range(3):
    model.train()
    running = 0.0
    for step, (x, y) in enumerate(train_loader):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 8 == 0:
            print(f"epoch {epoch} step {step:2d} loss {loss.item():.4f}", flush=True)
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    print(f"epoch {epoch} train loss {running / len(train_loader):.4f} val acc {correct / len(val_loader.dataset):.3f}", flush=True)
