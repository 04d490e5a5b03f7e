"""TabTransformer (contextual embeddings of categorical columns + layer-normed continuous
columns -> MLP) for a binary churn-style target on a synthetic mixed-type table."""
import torch
import torch.nn.functional as F
from torch import nn, einsum
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


def exists(val):
    return val is not None


def default(val, d):
    return val if exists(val) else d


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, **kwargs):
        return self.fn(x, **kwargs) + x


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x, **kwargs):
        return self.fn(self.norm(x), **kwargs)


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
            nn.Linear(dim * mult, dim)
        )

    def forward(self, x, **kwargs):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=16, dropout=0.):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5

        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        h = self.heads
        b, n, _ = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: t.view(b, n, h, -1).transpose(1, 2), (q, k, v))
        sim = einsum('b h i d, b h j d -> b h i j', q, k) * self.scale

        attn = sim.softmax(dim=-1)
        dropped_attn = self.dropout(attn)

        out = einsum('b h i j, b h j d -> b h i d', dropped_attn, v)
        out = out.transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out), attn


class Transformer(nn.Module):
    def __init__(self, num_tokens, dim, depth, heads, dim_head, attn_dropout, ff_dropout):
        super().__init__()
        self.embeds = nn.Embedding(num_tokens, dim)
        self.layers = nn.ModuleList([])

        for _ in range(depth):
            self.layers.append(nn.ModuleList([
                PreNorm(dim, Attention(dim, heads=heads, dim_head=dim_head, dropout=attn_dropout)),
                PreNorm(dim, FeedForward(dim, dropout=ff_dropout)),
            ]))

    def forward(self, x, return_attn=False):
        x = self.embeds(x)
        post_softmax_attns = []

        for attn, ff in self.layers:
            attn_out, post_softmax_attn = attn(x)
            post_softmax_attns.append(post_softmax_attn)

            x = x + attn_out
            x = ff(x) + x

        if not return_attn:
            return x
        return x, torch.stack(post_softmax_attns)


class MLP(nn.Module):
    def __init__(self, dims, act=None):
        super().__init__()
        dims_pairs = list(zip(dims[:-1], dims[1:]))
        layers = []
        for ind, (dim_in, dim_out) in enumerate(dims_pairs):
            is_last = ind >= (len(dims_pairs) - 1)
            linear = nn.Linear(dim_in, dim_out)
            layers.append(linear)

            if is_last:
                continue

            act = default(act, nn.ReLU())
            layers.append(act)

        self.mlp = nn.Sequential(*layers)

    def forward(self, x):
        return self.mlp(x)


class TabTransformer(nn.Module):
    def __init__(self, *, categories, num_continuous, dim, depth, heads, dim_head=16, dim_out=1,
                 mlp_hidden_mults=(4, 2), mlp_act=None, num_special_tokens=2,
                 continuous_mean_std=None, attn_dropout=0., ff_dropout=0.):
        super().__init__()
        assert all(map(lambda n: n > 0, categories)), 'number of each category must be positive'

        self.num_categories = len(categories)
        self.num_unique_categories = sum(categories)

        self.num_special_tokens = num_special_tokens
        total_tokens = self.num_unique_categories + num_special_tokens

        categories_offset = F.pad(torch.tensor(list(categories)), (1, 0), value=num_special_tokens)
        categories_offset = categories_offset.cumsum(dim=-1)[:-1]
        self.register_buffer('categories_offset', categories_offset)

        if exists(continuous_mean_std):
            assert continuous_mean_std.shape == (num_continuous, 2)
        self.register_buffer('continuous_mean_std', continuous_mean_std)

        self.norm = nn.LayerNorm(num_continuous)
        self.num_continuous = num_continuous

        self.transformer = Transformer(
            num_tokens=total_tokens, dim=dim, depth=depth, heads=heads, dim_head=dim_head,
            attn_dropout=attn_dropout, ff_dropout=ff_dropout
        )

        input_size = (dim * self.num_categories) + num_continuous
        l = input_size // 8

        hidden_dimensions = list(map(lambda t: l * t, mlp_hidden_mults))
        all_dimensions = [input_size, *hidden_dimensions, dim_out]

        self.mlp = MLP(all_dimensions, act=mlp_act)

    def forward(self, x_categ, x_cont):
        assert x_categ.shape[-1] == self.num_categories
        x_categ = x_categ + self.categories_offset

        x = self.transformer(x_categ)

        flat_categ = x.flatten(1)

        assert x_cont.shape[1] == self.num_continuous

        if exists(self.continuous_mean_std):
            mean, std = self.continuous_mean_std.unbind(dim=-1)
            x_cont = (x_cont - mean) / std

        normed_cont = self.norm(x_cont)

        x = torch.cat((flat_categ, normed_cont), dim=-1)
        return self.mlp(x)


CATEGORIES = (5, 7, 3, 6)
NUM_CONT = 6


def make_table(n, seed):
    g = torch.Generator().manual_seed(seed)
    categ = torch.stack([torch.randint(0, c, (n,), generator=g) for c in CATEGORIES], dim=1)
    cont = torch.randn(n, NUM_CONT, generator=g) * torch.tensor([1., 3., 10., 0.5, 2., 1.]) \
        + torch.tensor([0., 5., 40., 0., -3., 1.])
    return categ, cont


_g = torch.Generator().manual_seed(123)
CAT_EFFECT = [torch.randn(c, generator=_g) for c in CATEGORIES]
PAIR_EFFECT = torch.randn(CATEGORIES[0], CATEGORIES[1], generator=_g) * 1.5


def target(categ, cont):
    z = sum(CAT_EFFECT[j][categ[:, j]] for j in range(len(CATEGORIES)))
    z = z + PAIR_EFFECT[categ[:, 0], categ[:, 1]]
    z = z + 0.8 * cont[:, 0] - 0.25 * (cont[:, 1] - 5.0) + 0.05 * (cont[:, 2] - 40.0)
    z = z + 0.7 * torch.sin(cont[:, 3] * 3)
    return (z + 0.3 * torch.randn(len(z), generator=_g) > 0).float()


class TableDataset(Dataset):
    def __init__(self, n, seed):
        self.categ, self.cont = make_table(n, seed)
        self.y = target(self.categ, self.cont)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.categ[i], self.cont[i], self.y[i]


def roc_auc(scores, labels):
    order = scores.argsort()
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    n_pos = labels.sum()
    n_neg = len(labels) - n_pos
    return ((ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


train_ds = TableDataset(2048, seed=1)
val_ds = TableDataset(1024, seed=2)
mean_std = torch.stack([train_ds.cont.mean(0), train_ds.cont.std(0)], dim=-1)

train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=256)

model = TabTransformer(
    categories=CATEGORIES,
    num_continuous=NUM_CONT,
    dim=16,
    dim_out=1,
    depth=2,
    heads=4,
    dim_head=8,
    attn_dropout=0.1,
    ff_dropout=0.1,
    mlp_hidden_mults=(4, 2),
    mlp_act=nn.ReLU(),
    continuous_mean_std=mean_std,
)
print("params:", sum(p.numel() for p in model.parameters()))

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
criterion = nn.BCEWithLogitsLoss()


@torch.no_grad()
def evaluate():
    model.eval()
    scores, labels, total = [], [], 0.0
    for x_categ, x_cont, y in val_loader:
        logits = model(x_categ, x_cont).squeeze(-1)
        total += criterion(logits, y).item() * len(y)
        scores.append(logits)
        labels.append(y)
    scores, labels = torch.cat(scores), torch.cat(labels)
    acc = ((scores > 0).float() == labels).float().mean().item()
    model.train()
    return total / len(val_ds), acc, roc_auc(scores, labels)


vl, va, vauc = evaluate()
print(f"init     | val loss {vl:.4f} | val acc {va:.3f} | val auc {vauc:.3f}")
step = 0
for epoch in range(1, 7):
    running = 0.0
    for x_categ, x_cont, y in train_loader:
        logits = model(x_categ, x_cont).squeeze(-1)
        loss = criterion(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
    vl, va, vauc = evaluate()
    print(f"epoch {epoch} | step {step} | train loss {running / len(train_loader):.4f} | "
          f"val loss {vl:.4f} | val acc {va:.3f} | val auc {vauc:.3f}")
