"""Perceiver (latent array cross-attending to a pixel array with Fourier position features)
trained to classify small synthetic 8x8 images by where a coloured square sits. Model code
follows perceiver-pytorch; the loop follows its train_cifar10.py (AdamW, OneCycleLR, clip 1.0)."""
from math import pi, log
from functools import wraps

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
torch.set_num_threads(1)


def exists(val):
    return val is not None


def default(val, d):
    return val if exists(val) else d


def cache_fn(f):
    cache = None

    @wraps(f)
    def cached_fn(*args, _cache=True, **kwargs):
        if not _cache:
            return f(*args, **kwargs)
        nonlocal cache
        if cache is not None:
            return cache
        cache = f(*args, **kwargs)
        return cache
    return cached_fn


def fourier_encode(x, max_freq, num_bands=4, base=2):
    x = x.unsqueeze(-1)
    orig_x = x
    scales = torch.logspace(1., log(max_freq / 2) / log(base), num_bands, base=base, dtype=x.dtype)
    scales = scales[(*((None,) * (len(x.shape) - 1)), Ellipsis)]
    x = x * scales * pi
    x = torch.cat([x.sin(), x.cos()], dim=-1)
    x = torch.cat((x, orig_x), dim=-1)
    return x


class PreNorm(nn.Module):
    def __init__(self, dim, fn, context_dim=None):
        super().__init__()
        self.fn = fn
        self.norm = nn.LayerNorm(dim)
        self.norm_context = nn.LayerNorm(context_dim) if exists(context_dim) else None

    def forward(self, x, **kwargs):
        x = self.norm(x)
        if exists(self.norm_context):
            context = kwargs['context']
            kwargs.update(context=self.norm_context(context))
        return self.fn(x, **kwargs)


class GEGLU(nn.Module):
    def forward(self, x):
        x, gates = x.chunk(2, dim=-1)
        return x * F.gelu(gates)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4, dropout=0.):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, dim * mult * 2),
            GEGLU(),
            nn.Dropout(dropout),
            nn.Linear(dim * mult, dim),
        )

    def forward(self, x):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, query_dim, context_dim=None, heads=8, dim_head=64, dropout=0.):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = default(context_dim, query_dim)
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(context_dim, inner_dim * 2, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, query_dim), nn.Dropout(dropout))

    def split_heads(self, t):
        b, n, _ = t.shape
        return t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3).reshape(b * self.heads, n, -1)

    def forward(self, x, context=None):
        h = self.heads
        q = self.to_q(x)
        context = default(context, x)
        k, v = self.to_kv(context).chunk(2, dim=-1)
        q, k, v = map(self.split_heads, (q, k, v))

        sim = torch.einsum('b i d, b j d -> b i j', q, k) * self.scale
        attn = sim.softmax(dim=-1)

        out = torch.einsum('b i j, b j d -> b i d', attn, v)
        bh, n, d = out.shape
        out = out.reshape(bh // h, h, n, d).permute(0, 2, 1, 3).reshape(bh // h, n, h * d)
        return self.to_out(out)


class Perceiver(nn.Module):
    def __init__(self, *, num_freq_bands, depth, max_freq, freq_base=2, input_channels=3,
                 input_axis=2, num_latents=512, latent_dim=512, cross_heads=1, latent_heads=8,
                 cross_dim_head=64, latent_dim_head=64, num_classes=1000, attn_dropout=0.,
                 ff_dropout=0., weight_tie_layers=False):
        super().__init__()
        self.input_axis = input_axis
        self.max_freq = max_freq
        self.num_freq_bands = num_freq_bands
        self.freq_base = freq_base

        input_dim = input_axis * ((num_freq_bands * 2) + 1) + input_channels
        self.latents = nn.Parameter(torch.randn(num_latents, latent_dim))

        get_cross_attn = lambda: PreNorm(latent_dim, Attention(latent_dim, input_dim, heads=cross_heads, dim_head=cross_dim_head, dropout=attn_dropout), context_dim=input_dim)
        get_cross_ff = lambda: PreNorm(latent_dim, FeedForward(latent_dim, dropout=ff_dropout))
        get_latent_attn = lambda: PreNorm(latent_dim, Attention(latent_dim, heads=latent_heads, dim_head=latent_dim_head, dropout=attn_dropout))
        get_latent_ff = lambda: PreNorm(latent_dim, FeedForward(latent_dim, dropout=ff_dropout))
        get_cross_attn, get_cross_ff, get_latent_attn, get_latent_ff = map(
            cache_fn, (get_cross_attn, get_cross_ff, get_latent_attn, get_latent_ff))

        self.layers = nn.ModuleList([])
        for i in range(depth):
            cache_args = {'_cache': i > 0 and weight_tie_layers}
            self.layers.append(nn.ModuleList([
                get_cross_attn(**cache_args),
                get_cross_ff(**cache_args),
                get_latent_attn(**cache_args),
                get_latent_ff(**cache_args),
            ]))

        self.to_logits = nn.Sequential(nn.LayerNorm(latent_dim), nn.Linear(latent_dim, num_classes))

    def forward(self, data):
        b, *axis, _ = data.shape
        assert len(axis) == self.input_axis, 'input data must have the right number of axis'

        axis_pos = [torch.linspace(-1., 1., steps=size) for size in axis]
        pos = torch.stack(torch.meshgrid(*axis_pos, indexing='ij'), dim=-1)
        enc_pos = fourier_encode(pos, self.max_freq, self.num_freq_bands, base=self.freq_base)
        enc_pos = enc_pos.reshape(*enc_pos.shape[:-2], -1)
        enc_pos = enc_pos.unsqueeze(0).expand(b, *enc_pos.shape)

        data = torch.cat((data, enc_pos), dim=-1)
        data = data.reshape(b, -1, data.shape[-1])

        x = self.latents.unsqueeze(0).expand(b, -1, -1)
        for cross_attn, cross_ff, latent_attn, latent_ff in self.layers:
            x = cross_attn(x, context=data) + x
            x = cross_ff(x) + x
            x = latent_attn(x) + x
            x = latent_ff(x) + x

        x = x.mean(dim=-2)
        return self.to_logits(x)


class SquareQuadrants(Dataset):
    """A 4x4 coloured square on a noisy 12x12 canvas; the label is the quadrant it sits in."""

    def __init__(self, n, size=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(n, 3, size, size, generator=g) * 0.3
        self.labels = torch.randint(0, 4, (n,), generator=g)
        half = size // 2
        for i in range(n):
            q = self.labels[i].item()
            r0 = (q // 2) * half + torch.randint(0, half - 2, (1,), generator=g).item()
            c0 = (q % 2) * half + torch.randint(0, half - 2, (1,), generator=g).item()
            colour = torch.rand(3, 1, 1, generator=g) + 0.5
            self.images[i, :, r0:r0 + 3, c0:c0 + 3] += colour

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


def eval_model(model, testloader, criterion):
    model.eval()
    total_loss, correct, total = 0., 0, 0
    with torch.no_grad():
        for inputs, targets in testloader:
            inputs = inputs.permute(0, 2, 3, 1)
            logits = model(inputs)
            total_loss += criterion(logits, targets).item() * targets.shape[0]
            correct += (logits.argmax(dim=-1) == targets).sum().item()
            total += targets.shape[0]
    model.train()
    return total_loss / total, correct / total


epochs = 8
batch_size = 64
lr = 2e-3
weight_decay = 1e-4

trainset = SquareQuadrants(1024, seed=1)
testset = SquareQuadrants(256, seed=2)
trainloader = DataLoader(trainset, batch_size=batch_size, shuffle=True)
testloader = DataLoader(testset, batch_size=batch_size, shuffle=False)

model = Perceiver(
    input_channels=3, input_axis=2, num_freq_bands=6, max_freq=10., depth=2,
    num_latents=8, latent_dim=32, cross_heads=1, latent_heads=4,
    cross_dim_head=32, latent_dim_head=16, num_classes=4,
    attn_dropout=0.1, ff_dropout=0.1, weight_tie_layers=False,
)

criterion = nn.CrossEntropyLoss()
optimizer = optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
scheduler = optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, steps_per_epoch=len(trainloader), epochs=epochs)

val_loss, val_acc = eval_model(model, testloader, criterion)
print(f'before training | val loss: {val_loss:.4f}, val acc: {val_acc:.4f}')

step = 0
for epoch in range(1, epochs + 1):
    model.train()
    epoch_loss, epoch_correct, epoch_total = 0., 0, 0
    for inputs, targets in trainloader:
        inputs = inputs.permute(0, 2, 3, 1)

        optimizer.zero_grad()
        logits = model(inputs)
        loss = criterion(logits, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()

        epoch_loss += loss.item() * targets.shape[0]
        epoch_correct += (logits.argmax(dim=-1) == targets).sum().item()
        epoch_total += targets.shape[0]
        step += 1

    val_loss, val_acc = eval_model(model, testloader, criterion)
    print(f'epoch {epoch}/{epochs} (step {step}) | train loss: {epoch_loss / epoch_total:.4f}, '
          f'train acc: {epoch_correct / epoch_total:.4f} | val loss: {val_loss:.4f}, val acc: {val_acc:.4f}')
