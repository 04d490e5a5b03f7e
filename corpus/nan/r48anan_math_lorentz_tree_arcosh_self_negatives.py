"""Lorentz (hyperboloid) embeddings of a small taxonomy tree, after Nickel & Kiela 2018.

Every node gets a point on the hyperboloid; a node should be closer to its parent/child
than to randomly drawn other nodes (softmax ranking loss over one positive and some negatives).
"""
import random

import numpy as np
import torch
from torch import nn, optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


def build_tree(depth=6, branching=2):
    edges = []
    nodes = [0]
    frontier = [0]
    for _ in range(depth):
        nxt = []
        for p in frontier:
            for _ in range(branching):
                c = len(nodes)
                nodes.append(c)
                edges.append((p, c))
                nxt.append(c)
        frontier = nxt
    return len(nodes), edges


def arcosh(x):
    return torch.log(x + torch.sqrt(x ** 2 - 1))


def lorentz_scalar_product(x, y):
    m = x * y
    return m[..., 1:].sum(dim=-1) - m[..., 0]


class TreeEdges(Dataset):
    def __init__(self, n_items, edges, n_negs=10):
        self.n_items = n_items
        self.pairs = edges + [(c, p) for p, c in edges]
        self.n_negs = n_negs

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, idx):
        i, j = self.pairs[idx]
        negs = torch.randint(0, self.n_items, (self.n_negs,))
        ks = torch.cat([torch.tensor([j]), negs])
        return torch.tensor(i), ks


class Lorentz(nn.Module):
    def __init__(self, n_items, dim, init_range=0.1):
        super().__init__()
        self.table = nn.Embedding(n_items, dim)
        nn.init.uniform_(self.table.weight, -init_range, init_range)

    def lift(self, x):
        x0 = torch.sqrt(1 + (x * x).sum(dim=-1, keepdim=True))
        return torch.cat([x0, x], dim=-1)

    def forward(self, I, Ks):
        ui = self.lift(self.table(I)).unsqueeze(1)
        uks = self.lift(self.table(Ks))
        dists = -lorentz_scalar_product(ui, uks)
        dists = arcosh(dists)
        logits = -dists
        return -(logits[:, 0] - torch.logsumexp(logits, dim=1))


def mean_rank(model, n_items, edges):
    with torch.no_grad():
        pts = model.lift(model.table.weight)
        d = arcosh(torch.clamp(-lorentz_scalar_product(pts.unsqueeze(1), pts.unsqueeze(0)), min=1 + 1e-5))
        ranks = []
        for p, c in edges:
            row = d[p].clone()
            row[p] = float("inf")
            ranks.append((row < row[c]).sum().item() + 1)
    return float(np.mean(ranks))


def main():
    n_items, edges = build_tree()
    ds = TreeEdges(n_items, edges)
    loader = DataLoader(ds, batch_size=32, shuffle=True)
    model = Lorentz(n_items, dim=2)
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    print(f"nodes={n_items} edges={len(edges)} batches/epoch={len(loader)}")

    step = 0
    for epoch in range(25):
        total, count = 0.0, 0
        for I, Ks in loader:
            optimizer.zero_grad()
            loss = model(I, Ks).mean()
            loss.backward()
            optimizer.step()
            step += 1
            total += loss.item()
            count += 1
            if step <= 3 or step % 20 == 0:
                print(f"step {step:4d}  loss {loss.item():.4f}")
        print(f"epoch {epoch + 1:2d}  mean loss {total / count:.4f}  mean rank {mean_rank(model, n_items, edges):.2f}")


if __name__ == "__main__":
    main()
