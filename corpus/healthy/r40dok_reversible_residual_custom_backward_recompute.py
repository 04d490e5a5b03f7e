"""Reversible residual sequence model (RevNet coupling y1 = x1 + f(x2), y2 = x2 + g(y1)) trained
with the memory-saving custom autograd Function from lucidrains/reformer-pytorch reversible.py:
the blocks run under torch.no_grad() in forward, only the detached final output is kept in ctx,
and backward reconstructs each block's inputs from its outputs (x2 = y2 - g(y1), x1 = y1 - f(x2))
while re-running f and g with the recorded RNG state to get the parameter gradients.
Data: synthetic token sequences; the label is which of 4 'motif' tokens occurs most often.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import Function
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

VOCAB, SEQ, DIM, DEPTH, N_CLASSES = 32, 24, 64, 4, 4


class Deterministic(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.cpu_state = None

    def record_rng(self, *args):
        self.cpu_state = torch.get_rng_state()

    def forward(self, *args, record_rng=False, set_rng=False, **kwargs):
        if record_rng:
            self.record_rng(*args)
        if not set_rng:
            return self.net(*args, **kwargs)
        with torch.random.fork_rng(devices=[], enabled=True):
            torch.set_rng_state(self.cpu_state)
            return self.net(*args, **kwargs)


class ReversibleBlock(nn.Module):
    def __init__(self, f, g):
        super().__init__()
        self.f = Deterministic(f)
        self.g = Deterministic(g)

    def forward(self, x):
        x1, x2 = torch.chunk(x, 2, dim=2)
        with torch.no_grad():
            y1 = x1 + self.f(x2, record_rng=self.training)
            y2 = x2 + self.g(y1, record_rng=self.training)
        return torch.cat([y1, y2], dim=2)

    def backward_pass(self, y, dy):
        y1, y2 = torch.chunk(y, 2, dim=2)
        del y
        dy1, dy2 = torch.chunk(dy, 2, dim=2)
        del dy

        with torch.enable_grad():
            y1.requires_grad = True
            gy1 = self.g(y1, set_rng=True)
            torch.autograd.backward(gy1, dy2)

        with torch.no_grad():
            x2 = y2 - gy1
            del y2, gy1
            dx1 = dy1 + y1.grad
            del dy1
            y1.grad = None

        with torch.enable_grad():
            x2.requires_grad = True
            fx2 = self.f(x2, set_rng=True)
            torch.autograd.backward(fx2, dx1, retain_graph=True)

        with torch.no_grad():
            x1 = y1 - fx2
            del y1, fx2
            dx2 = dy2 + x2.grad
            del dy2
            x2.grad = None
            x = torch.cat([x1, x2.detach()], dim=2)
            dx = torch.cat([dx1, dx2], dim=2)
        return x, dx


class _ReversibleFunction(Function):
    @staticmethod
    def forward(ctx, x, blocks):
        for block in blocks:
            x = block(x)
        ctx.y = x.detach()
        ctx.blocks = blocks
        return x

    @staticmethod
    def backward(ctx, dy):
        y = ctx.y
        for block in ctx.blocks[::-1]:
            y, dy = block.backward_pass(y, dy)
        return dy, None


class FeedForward(nn.Module):
    def __init__(self, dim, mult=2, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * mult), nn.GELU(),
                                 nn.Dropout(dropout), nn.Linear(dim * mult, dim))

    def forward(self, x):
        return self.net(x)


class TokenMixer(nn.Module):
    def __init__(self, dim, seq):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mix = nn.Linear(seq, seq)

    def forward(self, x):
        return self.mix(self.norm(x).transpose(1, 2)).transpose(1, 2)


class ReversibleSequence(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList([ReversibleBlock(f, g) for f, g in blocks])

    def forward(self, x):
        return _ReversibleFunction.apply(x, self.blocks)


class RevClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.randn(1, SEQ, DIM) * 0.02)
        self.layers = ReversibleSequence([(TokenMixer(DIM, SEQ), FeedForward(DIM)) for _ in range(DEPTH)])
        self.norm = nn.LayerNorm(2 * DIM)
        self.head = nn.Linear(2 * DIM, N_CLASSES)

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos
        x = torch.cat([x, x], dim=-1)
        x = self.layers(x)
        return self.head(self.norm(x).mean(dim=1))


def make_data(n, g):
    tokens = torch.randint(N_CLASSES, VOCAB, (n, SEQ), generator=g)
    counts = torch.randint(0, 4, (n, N_CLASSES), generator=g)
    label = torch.randint(0, N_CLASSES, (n,), generator=g)
    counts[torch.arange(n), label] = counts.max(1).values + 1
    for i in range(n):
        motif = torch.repeat_interleave(torch.arange(N_CLASSES), counts[i])
        pos = torch.randperm(SEQ, generator=g)[:len(motif)]
        tokens[i, pos] = motif
    return tokens, label


g = torch.Generator().manual_seed(0)
xtr, ytr = make_data(1600, g)
xva, yva = make_data(400, g)
train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True)

model = RevClassifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)


def evaluate():
    model.eval()
    with torch.no_grad():
        logits = model(xva)
        return F.cross_entropy(logits, yva).item(), (logits.argmax(1) == yva).float().mean().item()


print("init: val loss %.3f acc %.3f" % evaluate())
for epoch in range(3):
    model.train()
    total, n = 0.0, 0
    for tokens, labels in train_loader:
        loss = F.cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(labels)
        n += len(labels)
    vl, va = evaluate()
    print("epoch %d: train loss %.3f  val loss %.3f  val acc %.3f" % (epoch, total / n, vl, va))
