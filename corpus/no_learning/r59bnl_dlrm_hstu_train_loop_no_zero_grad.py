"""DLRMv3-style generative recommender ranker (HSTU over the user interaction history, the
candidate item appended at the end, multitask heads for 'watch' and 'like'), trained with a
train_loop / eval_loop pair as in generative_recommenders/dlrm_v3/train/utils.py: a dense
Adam optimizer (lr 1e-3, betas 0.95/0.999) for the HSTU and the heads and row-wise Adagrad
for the embedding tables, combined in one optimizer object. The interaction logs of a small
video platform (users with a few favourite genres, items with one genre) are generated here."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

NUM_ITEMS = 400
NUM_GENRES = 8
NUM_ACTIONS = 3          # 0 = skipped, 1 = watched, 2 = watched and liked
UIH_LEN = 12
TASKS = ["watch", "like"]


ITEM_GENRE = np.random.RandomState(123).randint(0, NUM_GENRES, NUM_ITEMS)


class SyntheticKuaiRand(Dataset):
    """Each sample: a user's last UIH_LEN interactions (item ids + action types) and one
    candidate item; labels: did the user watch / like the candidate."""

    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        genre_items = [np.where(ITEM_GENRE == g)[0] for g in range(NUM_GENRES)]
        fav = np.stack([rng.choice(NUM_GENRES, 2, replace=False) for _ in range(n)])
        from_fav = rng.rand(n, UIH_LEN) < 0.6
        g_hist = np.where(from_fav, fav[np.arange(n)[:, None], rng.randint(0, 2, (n, UIH_LEN))],
                          rng.randint(0, NUM_GENRES, (n, UIH_LEN)))
        in_fav = (g_hist[..., None] == fav[:, None, :]).any(-1)
        self.uih_items = np.vectorize(lambda g: rng.choice(genre_items[g]))(g_hist).astype(np.int64)
        engaged = np.where(in_fav, rng.rand(n, UIH_LEN) < 0.85, rng.rand(n, UIH_LEN) < 0.15)
        self.uih_actions = (engaged * (1 + (rng.rand(n, UIH_LEN) < 0.5))).astype(np.int64)
        g_cand = np.where(rng.rand(n) < 0.5, fav[np.arange(n), rng.randint(0, 2, n)],
                          rng.randint(0, NUM_GENRES, n))
        self.cand = np.array([rng.choice(genre_items[g]) for g in g_cand], dtype=np.int64)
        cand_fav = (g_cand[:, None] == fav).any(-1)
        watch = rng.rand(n) < np.where(cand_fav, 0.85, 0.1)
        like = watch & cand_fav & (rng.rand(n) < 0.6)
        self.labels = np.stack([watch, like], 1).astype(np.float32)

    def __len__(self):
        return len(self.cand)

    def __getitem__(self, i):
        return (torch.from_numpy(self.uih_items[i]), torch.from_numpy(self.uih_actions[i]),
                torch.tensor(self.cand[i]), torch.from_numpy(self.labels[i]))


class HSTULayer(nn.Module):
    """Hierarchical Sequential Transduction Unit: pointwise SiLU attention with gating."""

    def __init__(self, d, heads=2):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.uvqk = nn.Linear(d, 4 * d)
        self.out = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        B, N, D = x.shape
        u, v, q, k = F.silu(self.uvqk(self.norm(x))).chunk(4, dim=-1)
        q = q.view(B, N, self.h, self.dh).transpose(1, 2)
        k = k.view(B, N, self.h, self.dh).transpose(1, 2)
        v = v.view(B, N, self.h, self.dh).transpose(1, 2)
        causal = torch.tril(torch.ones(N, N, dtype=torch.bool))
        att = F.silu(q @ k.transpose(-1, -2)) / N
        att = att.masked_fill(~causal, 0.0)
        y = (att @ v).transpose(1, 2).reshape(B, N, D)
        return x + self.out(F.layer_norm(y, (D,)) * u)


class DlrmHSTU(nn.Module):
    def __init__(self, d=32, layers=2):
        super().__init__()
        self.item_emb = nn.Embedding(NUM_ITEMS, d)
        self.genre_emb = nn.Embedding(NUM_GENRES, d)
        self.register_buffer("item_genre", torch.from_numpy(ITEM_GENRE))
        self.action_emb = nn.Embedding(NUM_ACTIONS + 1, d)
        self.pos_emb = nn.Embedding(UIH_LEN + 1, d)
        nn.init.normal_(self.item_emb.weight, std=0.1)
        nn.init.normal_(self.genre_emb.weight, std=0.1)
        nn.init.normal_(self.action_emb.weight, std=0.1)
        nn.init.normal_(self.pos_emb.weight, std=0.1)
        self.hstu = nn.ModuleList([HSTULayer(d) for _ in range(layers)])
        self.task_mlp = nn.Sequential(nn.Linear(3 * d, d), nn.SiLU(), nn.Linear(d, len(TASKS)))

    def embedding_parameters(self):
        return [self.item_emb.weight, self.genre_emb.weight, self.action_emb.weight,
                self.pos_emb.weight]

    def dense_parameters(self):
        ids = {id(p) for p in self.embedding_parameters()}
        return [p for p in self.parameters() if id(p) not in ids]

    def embed_items(self, ids):
        return self.item_emb(ids) + self.genre_emb(self.item_genre[ids])

    def forward(self, uih_items, uih_actions, cand, labels):
        B = cand.shape[0]
        seq = self.embed_items(uih_items) + self.action_emb(uih_actions)
        cand_emb = self.embed_items(cand)
        cand_tok = cand_emb.unsqueeze(1) + self.action_emb.weight[NUM_ACTIONS]
        x = torch.cat([seq, cand_tok], dim=1) + self.pos_emb.weight
        for layer in self.hstu:
            x = layer(x)
        user_repr = x[:, -1]
        logits = self.task_mlp(torch.cat([user_repr, cand_emb, user_repr * cand_emb], dim=-1))
        aux_losses = {t: F.binary_cross_entropy_with_logits(logits[:, i], labels[:, i])
                      for i, t in enumerate(TASKS)}
        return aux_losses, torch.sigmoid(logits), labels


class RowWiseAdagrad(torch.optim.Optimizer):
    """Adagrad with one accumulator per embedding row (as FBGEMM's row-wise Adagrad)."""

    def __init__(self, params, lr=0.01, eps=1e-8):
        super().__init__(params, dict(lr=lr, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if "sum" not in st:
                    st["sum"] = torch.zeros(p.shape[0])
                g = p.grad
                st["sum"] += g.pow(2).mean(dim=1)
                p -= group["lr"] * g / (st["sum"].sqrt().unsqueeze(1) + group["eps"])


class CombinedOptimizer:
    def __init__(self, optimizers):
        self.optimizers = optimizers

    def step(self):
        for o in self.optimizers:
            o.step()

    def zero_grad(self, set_to_none=True):
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)


class MetricsLogger:
    def __init__(self):
        self.reset()

    def reset(self):
        self.preds, self.labels = [], []

    def update(self, predictions, labels):
        self.preds.append(predictions.detach())
        self.labels.append(labels.detach())

    def compute(self):
        p, y = torch.cat(self.preds), torch.cat(self.labels)
        out = {}
        for i, t in enumerate(TASKS):
            out[f"{t}_auc"] = auc(p[:, i], y[:, i])
            out[f"{t}_ne"] = normalized_entropy(p[:, i], y[:, i])
        return out


def auc(p, y):
    order = torch.argsort(p)
    ranks = torch.empty_like(p)
    ranks[order] = torch.arange(1, len(p) + 1, dtype=p.dtype)
    n_pos = y.sum()
    n_neg = len(y) - n_pos
    return ((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


def normalized_entropy(p, y):
    p = p.clamp(1e-6, 1 - 1e-6)
    ce = F.binary_cross_entropy(p, y)
    base = y.mean().clamp(1e-6, 1 - 1e-6)
    h = -(base * math.log(base) + (1 - base) * math.log(1 - base))
    return (ce / h).item()


def train_loop(model, dataloader, optimizer, metric_logger, num_epochs, metric_log_frequency=25):
    model = model.train()
    batch_idx = 0
    for _ in range(num_epochs):
        for uih_items, uih_actions, cand, labels in dataloader:
            aux_losses, mt_target_preds, mt_target_labels = model.forward(
                uih_items, uih_actions, cand, labels)
            sum(aux_losses.values()).backward()
            optimizer.step()
            metric_logger.update(predictions=mt_target_preds, labels=mt_target_labels)
            batch_idx += 1
            if batch_idx % metric_log_frequency == 0:
                m = metric_logger.compute()
                losses = " ".join(f"{k} {v.item():.4f}" for k, v in aux_losses.items())
                print(f"  batch {batch_idx:3d}  loss[{losses}]  "
                      f"train watch_auc {m['watch_auc']:.3f} like_auc {m['like_auc']:.3f}")
                metric_logger.reset()


@torch.no_grad()
def eval_loop(model, dataloader, metric_logger):
    model = model.eval()
    metric_logger.reset()
    for uih_items, uih_actions, cand, labels in dataloader:
        _, preds, labels = model.forward(uih_items, uih_actions, cand, labels)
        metric_logger.update(predictions=preds, labels=labels)
    m = metric_logger.compute()
    print("eval: " + "  ".join(f"{k}: {v:.4f}" for k, v in m.items()))
    return m


def main():
    train_set = SyntheticKuaiRand(6400, seed=1)
    test_set = SyntheticKuaiRand(1024, seed=2)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=False, drop_last=True)
    test_loader = DataLoader(test_set, batch_size=256, shuffle=False, drop_last=True)

    model = DlrmHSTU()
    dense_opt = torch.optim.Adam(model.dense_parameters(), lr=0.001, betas=(0.95, 0.999),
                                 eps=1e-8, weight_decay=0)
    sparse_opt = RowWiseAdagrad(model.embedding_parameters(), lr=0.1)
    optimizer = CombinedOptimizer([dense_opt, sparse_opt])

    train_metrics, eval_metrics = MetricsLogger(), MetricsLogger()
    print("before training")
    eval_loop(model, test_loader, eval_metrics)
    for epoch in range(2):
        print(f"epoch {epoch}")
        train_loop(model, train_loader, optimizer, train_metrics, num_epochs=1)
        eval_loop(model, test_loader, eval_metrics)


if __name__ == "__main__":
    main()
