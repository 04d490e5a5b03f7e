"""Train a tiny Mamba language model (mamba-minimal's single-file model: in_proj, depthwise
causal conv1d, input-dependent delta/B/C, sequential selective scan, RMSNorm, tied lm_head)
on sequences from a synthetic second-order Markov 'language'."""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB = 16
SEQ_LEN = 17


@dataclass
class ModelArgs:
    d_model: int
    n_layer: int
    vocab_size: int
    d_state: int = 8
    expand: int = 2
    dt_rank: int = 0
    d_conv: int = 4
    conv_bias: bool = True
    bias: bool = False

    def __post_init__(self):
        self.d_inner = int(self.expand * self.d_model)
        if self.dt_rank == 0:
            self.dt_rank = math.ceil(self.d_model / 16)


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MambaBlock(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.in_proj = nn.Linear(args.d_model, args.d_inner * 2, bias=args.bias)
        self.conv1d = nn.Conv1d(args.d_inner, args.d_inner, kernel_size=args.d_conv, bias=args.conv_bias,
                                groups=args.d_inner, padding=args.d_conv - 1)
        self.x_proj = nn.Linear(args.d_inner, args.dt_rank + args.d_state * 2, bias=False)
        self.dt_proj = nn.Linear(args.dt_rank, args.d_inner, bias=True)
        A = torch.arange(1, args.d_state + 1).float().repeat(args.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(args.d_inner))
        self.out_proj = nn.Linear(args.d_inner, args.d_model, bias=args.bias)

    def forward(self, x):
        b, l, d = x.shape
        x_and_res = self.in_proj(x)
        x, res = x_and_res.split([self.args.d_inner, self.args.d_inner], dim=-1)
        x = x.transpose(1, 2)
        x = self.conv1d(x)[:, :, :l]
        x = x.transpose(1, 2)
        x = F.silu(x)
        y = self.ssm(x)
        y = y * F.silu(res)
        return self.out_proj(y)

    def ssm(self, x):
        d_in, n = self.A_log.shape
        A = -torch.exp(self.A_log.float())
        D = self.D.float()
        x_dbl = self.x_proj(x)
        delta, B, C = x_dbl.split([self.args.dt_rank, n, n], dim=-1)
        delta = F.softplus(self.dt_proj(delta))
        return self.selective_scan(x, delta, A, B, C, D)

    def selective_scan(self, u, delta, A, B, C, D):
        b, l, d_in = u.shape
        n = A.shape[1]
        deltaA = torch.exp(torch.einsum('bld,dn->bldn', delta, A))
        deltaB_u = torch.einsum('bld,bln,bld->bldn', delta, B, u)
        x = torch.zeros((b, d_in, n))
        ys = []
        for i in range(l):
            x = deltaA[:, i] * x + deltaB_u[:, i]
            y = torch.einsum('bdn,bn->bd', x, C[:, i, :])
            ys.append(y)
        y = torch.stack(ys, dim=1)
        return y + u * D


class ResidualBlock(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.mixer = MambaBlock(args)
        self.norm = RMSNorm(args.d_model)

    def forward(self, x):
        return self.mixer(self.norm(x)) + x


class Mamba(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.embedding = nn.Embedding(args.vocab_size, args.d_model)
        self.layers = nn.ModuleList([ResidualBlock(args) for _ in range(args.n_layer)])
        self.norm_f = RMSNorm(args.d_model)
        self.lm_head = nn.Linear(args.d_model, args.vocab_size, bias=False)
        self.lm_head.weight = self.embedding.weight
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, input_ids):
        x = self.embedding(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm_f(x))


class MarkovText(Dataset):
    def __init__(self, n_seq, gen):
        logits = torch.randn(VOCAB, VOCAB, VOCAB, generator=gen) * 3.0
        self.trans = logits.softmax(-1)
        data = torch.empty(n_seq, SEQ_LEN, dtype=torch.long)
        data[:, :2] = torch.randint(0, VOCAB, (n_seq, 2), generator=gen)
        for t in range(2, SEQ_LEN):
            p = self.trans[data[:, t - 2], data[:, t - 1]]
            data[:, t] = torch.multinomial(p, 1, generator=gen).squeeze(1)
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        s = self.data[i]
        return s[:-1], s[1:]


gen = torch.Generator().manual_seed(1)
train_ds = MarkovText(1344, gen)
val_x, val_y = zip(*[train_ds[i] for i in range(1024, 1344)])
val_x, val_y = torch.stack(val_x), torch.stack(val_y)
train_ds.data = train_ds.data[:1024]
p = train_ds.trans
print(f"uniform loss {math.log(VOCAB):.4f}  "
      f"source entropy {-(p * p.clamp_min(1e-12).log()).sum(-1).mean().item():.4f}")

args = ModelArgs(d_model=32, n_layer=2, vocab_size=VOCAB)
model = Mamba(args)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
loader = DataLoader(train_ds, batch_size=32, shuffle=True, drop_last=True)


@torch.no_grad()
def evaluate():
    model.eval()
    logits = model(val_x)
    model.train()
    return F.cross_entropy(logits.reshape(-1, VOCAB), val_y.reshape(-1)).item()


print(f"epoch 0 val loss {evaluate():.4f}")
step = 0
for epoch in range(1, 4):
    total = 0.0
    for x, y in loader:
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        total += loss.item()
        step += 1
        if step % 16 == 0:
            print(f"step {step} train loss {loss.item():.4f}")
    print(f"epoch {epoch} step {step} train loss {total / len(loader):.4f} val loss {evaluate():.4f}")
