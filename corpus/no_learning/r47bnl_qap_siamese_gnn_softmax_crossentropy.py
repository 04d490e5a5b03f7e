"""Graph matching (quadratic assignment) with a siamese GNN, after mlelarge/graph_neural_net.

Each example is a random Erdos-Renyi graph and a noisy copy of it (edges flipped with a small
probability). A shared GNN embeds the vertices of both graphs; the similarity matrix between the
two embeddings should put each vertex of graph 1 on its copy in graph 2.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_VERTICES = 20
EDGE_DENSITY = 0.2
NOISE = 0.03


class QAPDataset(Dataset):
    def __init__(self, num_examples, seed):
        g = torch.Generator().manual_seed(seed)
        self.pairs = []
        for _ in range(num_examples):
            a = (torch.rand(N_VERTICES, N_VERTICES, generator=g) < EDGE_DENSITY).float()
            a = torch.triu(a, 1)
            a = a + a.t()
            flip = (torch.rand(N_VERTICES, N_VERTICES, generator=g) < NOISE).float()
            flip = torch.triu(flip, 1)
            flip = flip + flip.t()
            b = (a + flip) % 2
            self.pairs.append((a, b))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        return self.pairs[i]


class GraphLayer(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.self_lin = nn.Linear(d_in, d_out)
        self.neigh_lin = nn.Linear(d_in, d_out)

    def forward(self, h, adj):
        deg = adj.sum(-1, keepdim=True).clamp(min=1)
        return F.relu(self.self_lin(h) + self.neigh_lin(adj @ h / deg))


class NodeEmbedding(nn.Module):
    def __init__(self, hidden=64, num_layers=4):
        super().__init__()
        dims = [2] + [hidden] * num_layers
        self.layers = nn.ModuleList(GraphLayer(dims[i], dims[i + 1]) for i in range(num_layers))
        self.out = nn.Linear(hidden, hidden)

    def forward(self, adj):
        deg = adj.sum(-1, keepdim=True)
        h = torch.cat([torch.ones_like(deg), deg / 4.0], dim=-1)
        for layer in self.layers:
            h = layer(h, adj)
        return self.out(h)


class Siamese_Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.node_embedder = NodeEmbedding()

    def forward(self, g1, g2):
        emb1 = self.node_embedder(g1)
        emb2 = self.node_embedder(g2)
        out = torch.bmm(emb1, emb2.permute(0, 2, 1))
        return F.softmax(out, dim=-1)


class triplet_loss(nn.Module):
    def __init__(self, loss=nn.CrossEntropyLoss()):
        super().__init__()
        self.loss = loss

    def forward(self, out):
        bs, n_vertices = out.shape[0], out.shape[1]
        ide = torch.arange(n_vertices)
        target = torch.cat([ide for _ in range(bs)])
        return self.loss(out.reshape(-1, n_vertices), target)


def accuracy_linear_assignment(out):
    return (out.argmax(-1) == torch.arange(out.shape[1])).float().mean().item()


train_loader = DataLoader(QAPDataset(640, 1), batch_size=32, shuffle=True)
val_loader = DataLoader(QAPDataset(128, 2), batch_size=64)

model = Siamese_Model()
criterion = triplet_loss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

for epoch in range(10):
    model.train()
    tot_loss, tot_acc, nb = 0.0, 0.0, 0
    for g1, g2 in train_loader:
        out = model(g1, g2)
        loss = criterion(out)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tot_loss += loss.item()
        tot_acc += accuracy_linear_assignment(out.detach())
        nb += 1
    model.eval()
    with torch.no_grad():
        val_acc = sum(accuracy_linear_assignment(model(g1, g2)) for g1, g2 in val_loader) / len(val_loader)
    print(f"epoch {epoch}: train loss {tot_loss / nb:.4f} train acc {tot_acc / nb:.3f} val acc {val_acc:.3f}")
