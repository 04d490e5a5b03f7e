"""Poincare embeddings of a hierarchy, in the style of facebookresearch/poincare-embeddings
(hype/poincare.py PoincareManifold, hype/rsgd.py RiemannianSGD, hype/energy_function / train.py).
A synthetic taxonomy (a balanced tree, transitive closure as the "is-a" relation) is embedded in the
2-D Poincare ball. Negatives are sampled per positive pair and the loss is a softmax over
negative distances. The optimizer is the repo's Riemannian SGD: the Euclidean gradient is rescaled by
the inverse metric ((1 - |x|^2)^2 / 4), applied to p.data and the point is projected back into the ball.
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

EPS = 1e-5
BRANCH, DEPTH = 3, 4
NNEGS = 20
DIM = 2


def build_tree(branch, depth):
    parents = {0: None}
    frontier, nid = [0], 1
    for _ in range(depth):
        nxt = []
        for p in frontier:
            for _ in range(branch):
                parents[nid] = p
                nxt.append(nid)
                nid += 1
        frontier = nxt
    closure = set()
    for n in parents:
        a = parents[n]
        while a is not None:
            closure.add((n, a))
            a = parents[a]
    return nid, sorted(closure)


class PoincareManifold:
    def __init__(self, eps=EPS, max_norm=1 - EPS):
        self.eps = eps
        self.max_norm = max_norm

    def distance(self, u, v):
        sqdist = ((u - v) ** 2).sum(-1)
        squnorm = (u ** 2).sum(-1).clamp(0, 1 - self.eps)
        sqvnorm = (v ** 2).sum(-1).clamp(0, 1 - self.eps)
        x = 1 + 2 * sqdist / ((1 - squnorm) * (1 - sqvnorm))
        z = torch.sqrt((x ** 2 - 1).clamp_min(self.eps))
        return torch.log(x + z)

    def normalize(self, w):
        return w.renorm(2, 0, self.max_norm)

    def rgrad(self, p, d_p):
        p_sqnorm = (p ** 2).sum(-1, keepdim=True)
        return d_p * ((1 - p_sqnorm) ** 2 / 4).expand_as(d_p)

    def expm(self, p, d_p, lr):
        p.add_(d_p, alpha=-lr)
        p.copy_(self.normalize(p))


class RiemannianSGD(Optimizer):
    def __init__(self, params, lr, manifold):
        super().__init__(params, dict(lr=lr))
        self.manifold = manifold

    def step(self, lr=None):
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                d_p = p.grad.data
                if d_p.is_sparse:
                    d_p = d_p.coalesce().to_dense()
                d_p = self.manifold.rgrad(p.data, d_p)
                self.manifold.expm(p.data, d_p, lr or group['lr'])


class GraphDataset(Dataset):
    def __init__(self, idx, nobjects, nnegs):
        self.idx = idx
        self.nobjects = nobjects
        self.nnegs = nnegs
        self.adj = {}
        for u, v in idx:
            self.adj.setdefault(u, set()).add(v)
            self.adj.setdefault(v, set()).add(u)

    def __len__(self):
        return len(self.idx)

    def __getitem__(self, i):
        u, v = self.idx[i]
        negs = []
        while len(negs) < self.nnegs:
            n = random.randrange(self.nobjects)
            if n != u and n not in self.adj[u]:
                negs.append(n)
        return torch.tensor([u, v] + negs), torch.tensor(0)


class Embedding(nn.Module):
    def __init__(self, size, dim, manifold):
        super().__init__()
        self.manifold = manifold
        self.lt = nn.Embedding(size, dim, sparse=True)
        self.lt.weight.data.uniform_(-1e-3, 1e-3)

    def forward(self, inputs):
        e = self.lt(inputs)
        o = e.narrow(1, 1, e.size(1) - 1)
        s = e.narrow(1, 0, 1).expand_as(o)
        return -self.manifold.distance(s, o)

    def loss(self, inp, target):
        return F.cross_entropy(inp, target)


@torch.no_grad()
def reconstruction(model, nobjects, adj):
    w = model.lt.weight
    ranks, aps = [], []
    for u in range(nobjects):
        d = model.manifold.distance(w[u].expand_as(w), w)
        d[u] = 1e12
        order = d.argsort()
        pos = set(adj[u])
        hits, prec = 0, []
        for r, j in enumerate(order.tolist(), 1):
            if j in pos:
                hits += 1
                prec.append(hits / r)
                if hits == len(pos):
                    break
        # mean rank of each positive among the negatives
        negmask = torch.ones(nobjects, dtype=torch.bool)
        negmask[list(pos)] = False
        negmask[u] = False
        for v in pos:
            ranks.append(1 + (d[negmask] < d[v]).sum().item())
        aps.append(sum(prec) / len(prec))
    return sum(ranks) / len(ranks), sum(aps) / len(aps)


def main():
    nobjects, idx = build_tree(BRANCH, DEPTH)
    data = GraphDataset(idx, nobjects, NNEGS)
    loader = DataLoader(data, batch_size=10, shuffle=True)
    manifold = PoincareManifold()
    model = Embedding(nobjects, DIM, manifold)
    optimizer = RiemannianSGD(model.parameters(), lr=1.0, manifold=manifold)
    burnin, epochs = 10, 60
    print(f'nodes {nobjects}, edges {len(idx)}')
    mr, mapk = reconstruction(model, nobjects, data.adj)
    print(f'init: mean_rank {mr:.2f} map {mapk:.3f}')
    for epoch in range(epochs):
        lr = 1.0 / 10 if epoch < burnin else 1.0
        total = 0.0
        for inputs, targets in loader:
            optimizer.zero_grad()
            preds = model(inputs)
            loss = model.loss(preds, targets)
            loss.backward()
            optimizer.step(lr=lr)
            total += loss.item() * inputs.size(0)
        if epoch % 10 == 9 or epoch == 0:
            mr, mapk = reconstruction(model, nobjects, data.adj)
            maxnorm = model.lt.weight.norm(dim=1).max().item()
            print(f'epoch {epoch + 1:3d} lr {lr:.2f} loss {total / len(data):.4f} '
                  f'mean_rank {mr:.2f} map {mapk:.3f} max_norm {maxnorm:.4f}')


if __name__ == '__main__':
    main()
