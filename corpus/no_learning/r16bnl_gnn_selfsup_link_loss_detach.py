"""Self-supervised node embeddings with a two-layer GCN (no labels).

The graph is a citation-like network: 400 papers in 5 research areas, most links inside an
area, and a 32-d bag-of-words feature vector per paper. The GCN is trained with an
unsupervised link objective: the embeddings of linked papers should have a large dot
product, those of random (unlinked) pairs a small one. After every epoch the embeddings are
scored on held-out links (AUC against random pairs).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_NODES = 400
N_AREAS = 5
N_FEATS = 32


def make_graph(seed=0):
    g = torch.Generator().manual_seed(seed)
    area = torch.randint(0, N_AREAS, (N_NODES,), generator=g)
    same = area[:, None] == area[None, :]
    prob = torch.where(same, torch.tensor(0.06), torch.tensor(0.002))
    adj = (torch.rand(N_NODES, N_NODES, generator=g) < prob).float()
    adj = torch.triu(adj, 1)
    edges = adj.nonzero()
    centers = torch.randn(N_AREAS, N_FEATS, generator=g)
    x = 0.5 * centers[area] + torch.randn(N_NODES, N_FEATS, generator=g)
    perm = torch.randperm(len(edges), generator=g)
    n_test = len(edges) // 10
    test_edges, train_edges = edges[perm[:n_test]], edges[perm[n_test:]]
    return x, train_edges, test_edges


def normalized_adjacency(edges):
    a = torch.zeros(N_NODES, N_NODES)
    a[edges[:, 0], edges[:, 1]] = 1.0
    a = a + a.t() + torch.eye(N_NODES)
    d = a.sum(1).pow(-0.5)
    return d[:, None] * a * d[None, :]


class GCN(nn.Module):
    def __init__(self, in_dim, hidden_dim, out_dim):
        super().__init__()
        self.lin1 = nn.Linear(in_dim, hidden_dim)
        self.lin2 = nn.Linear(hidden_dim, out_dim)

    def forward(self, x, a_hat):
        h = F.relu(a_hat @ self.lin1(x))
        return a_hat @ self.lin2(h)


class SelfSupervLoss(nn.Module):
    def forward(self, h, pos_edges, neg_edges):
        pos_scores, neg_scores = [], []
        for s, d in pos_edges.tolist():
            pos_scores.append(torch.dot(h[s], h[d]).detach().clone().requires_grad_(True))
        for s, d in neg_edges.tolist():
            neg_scores.append(torch.dot(h[s], h[d]).detach().clone().requires_grad_(True))
        pos = torch.stack(pos_scores)
        neg = torch.stack(neg_scores)
        return -F.logsigmoid(pos).mean() - F.logsigmoid(-neg).mean()


def link_auc(h, pos_edges, g):
    neg = torch.randint(0, N_NODES, pos_edges.shape, generator=g)
    pos_s = (h[pos_edges[:, 0]] * h[pos_edges[:, 1]]).sum(1)
    neg_s = (h[neg[:, 0]] * h[neg[:, 1]]).sum(1)
    return (pos_s[:, None] > neg_s[None, :]).float().mean().item()


def main():
    start = time.time()
    x, train_edges, test_edges = make_graph()
    a_hat = normalized_adjacency(train_edges)
    print(f"nodes {N_NODES}  train links {len(train_edges)}  held-out links {len(test_edges)}")

    model = GCN(N_FEATS, 64, 16)
    criterion = SelfSupervLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    g = torch.Generator().manual_seed(1)

    batch_size = 64
    step = 0
    for epoch in range(12):
        model.train()
        perm = torch.randperm(len(train_edges), generator=g)
        losses = []
        for i in range(0, len(perm) - batch_size + 1, batch_size):
            pos_edges = train_edges[perm[i:i + batch_size]]
            neg_edges = torch.randint(0, N_NODES, (batch_size, 2), generator=g)
            optimizer.zero_grad()
            h = model(x, a_hat)
            loss = criterion(h, pos_edges, neg_edges)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            step += 1
        model.eval()
        with torch.no_grad():
            h = model(x, a_hat)
            auc = link_auc(h, test_edges, torch.Generator().manual_seed(2))
        print(f"epoch {epoch}  step {step}  loss {sum(losses) / len(losses):.4f}  held-out link AUC {auc:.3f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
