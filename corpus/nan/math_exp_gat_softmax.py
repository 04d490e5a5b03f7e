"""Two-layer graph attention network (GAT) for node classification, written by hand.

Synthetic citation-style graph: 3 communities, bag-of-words count features whose word rates
depend on the community. Full-batch training on the labelled nodes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(11)

N_NODES = 150
N_CLASSES = 3
N_WORDS = 60


def make_graph():
    y = torch.arange(N_NODES) % N_CLASSES
    same = y[:, None] == y[None, :]
    prob = torch.where(same, torch.tensor(0.04), torch.tensor(0.006))
    adj = (torch.rand(N_NODES, N_NODES) < prob).float()
    adj = ((adj + adj.T) > 0).float()
    adj.fill_diagonal_(1.0)
    rates = torch.rand(N_CLASSES, N_WORDS) * 3
    words = torch.poisson(rates[y])
    citations = torch.floor(torch.exp(torch.randn(N_NODES, 1) + 3.0 + 0.5 * y[:, None]))
    x = torch.cat([words, citations, adj.sum(1, keepdim=True)], dim=1)
    return x, adj, y


def scatter_softmax(scores, adj):
    # softmax over each node's neighbourhood
    scores = scores.exp() * adj
    return scores / scores.sum(dim=1, keepdim=True)


class GATLayer(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.W = nn.Linear(in_dim, out_dim, bias=False)
        a = torch.empty(2 * out_dim, 1)
        nn.init.xavier_uniform_(a, gain=1.414)
        self.a_src = nn.Parameter(a[:out_dim, 0].clone())
        self.a_dst = nn.Parameter(a[out_dim:, 0].clone())

    def forward(self, x, adj):
        h = self.W(x)
        e = F.leaky_relu((h @ self.a_src)[:, None] + (h @ self.a_dst)[None, :], 0.2)
        alpha = scatter_softmax(e, adj)
        return alpha @ h


class GAT(nn.Module):
    def __init__(self, in_dim, hidden, n_classes):
        super().__init__()
        self.gat1 = GATLayer(in_dim, hidden)
        self.gat2 = GATLayer(hidden, n_classes)

    def forward(self, x, adj):
        h = F.elu(self.gat1(x, adj))
        return self.gat2(h, adj)


x, adj, y = make_graph()
train_mask = torch.rand(N_NODES) < 0.3
val_mask = ~train_mask

model = GAT(N_WORDS + 2, 16, N_CLASSES)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

for epoch in range(80):
    model.train()
    logits = model(x, adj)
    loss = F.cross_entropy(logits[train_mask], y[train_mask])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if epoch % 10 == 0:
        with torch.no_grad():
            pred = model(x, adj).argmax(1)
            val_acc = (pred[val_mask] == y[val_mask]).float().mean().item()
        print(f"epoch {epoch:3d}  loss {loss.item():.4f}  val acc {val_acc:.3f}")
