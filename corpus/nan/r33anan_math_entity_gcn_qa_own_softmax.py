"""Entity-GCN style multi-hop QA (WikiHop-like): mention nodes of every candidate carry
contextual embeddings, an R-GCN propagates over co-reference / same-document edges, and
each candidate is scored by the max over its mention nodes; trained with NLL of the answer."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

N_NODES, N_CAND, EMB, HID, HOPS = 40, 10, 64, 64, 3


class WikiHopGraphs(Dataset):
    def __init__(self, n=1024, seed=1):
        g = torch.Generator().manual_seed(seed)
        self.query = torch.randn(n, EMB, generator=g)
        self.cand_of_node = torch.randint(0, N_CAND, (n, N_NODES), generator=g)
        self.answer = torch.randint(0, N_CAND, (n,), generator=g)
        popular = torch.rand(n, generator=g) < 0.01
        hub = torch.randint(0, N_CAND, (n,), generator=g)
        to_hub = popular[:, None] & (torch.rand(n, N_NODES, generator=g) < 0.7)
        self.cand_of_node = torch.where(to_hub, hub[:, None], self.cand_of_node)
        self.cand_of_node[:, :N_CAND] = torch.arange(N_CAND)
        nodes = torch.randn(n, N_NODES, EMB, generator=g)
        hit = self.cand_of_node == self.answer[:, None]
        nodes = nodes + hit[..., None] * self.query[:, None, :]
        self.nodes = nodes
        same_cand = (self.cand_of_node[:, :, None] == self.cand_of_node[:, None, :]).float()
        same_doc = (torch.rand(n, N_NODES, N_NODES, generator=g) < 0.15).float()
        same_doc = ((same_doc + same_doc.transpose(1, 2)) > 0).float()
        self.adj = torch.stack([same_cand, same_doc], dim=1)

    def __len__(self):
        return self.query.size(0)

    def __getitem__(self, i):
        return self.nodes[i], self.adj[i], self.query[i], self.cand_of_node[i], self.answer[i]


class RGCNLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.rel = nn.ModuleList([nn.Linear(dim, dim, bias=False) for _ in range(2)])
        self.self_loop = nn.Linear(dim, dim)
        self.gate = nn.Linear(2 * dim, dim)

    def forward(self, h, adj):
        msg = self.self_loop(h)
        for r, lin in enumerate(self.rel):
            msg = msg + torch.bmm(adj[:, r], lin(h))
        a = torch.sigmoid(self.gate(torch.cat([msg, h], dim=-1)))
        return a * torch.relu(msg) + (1 - a) * h


class EntityGCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.node_in = nn.Linear(2 * EMB, HID)
        self.layers = nn.ModuleList([RGCNLayer(HID) for _ in range(HOPS)])
        self.out = nn.Sequential(nn.Linear(HID + EMB, HID), nn.ReLU(), nn.Linear(HID, 1))

    def forward(self, nodes, adj, query, cand_of_node):
        q = query[:, None, :].expand(-1, N_NODES, -1)
        h = self.node_in(torch.cat([nodes, q], dim=-1))
        for layer in self.layers:
            h = layer(h, adj)
        node_scores = self.out(torch.cat([h, q], dim=-1)).squeeze(-1)
        onehot = nn.functional.one_hot(cand_of_node, N_CAND).float()
        return torch.bmm(onehot.transpose(1, 2), node_scores[:, :, None]).squeeze(-1)


def softmax(x):
    e = torch.exp(x)
    return e / e.sum(dim=1, keepdim=True)


train_set = WikiHopGraphs()
val_set = WikiHopGraphs(n=256, seed=2)
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
val_loader = DataLoader(val_set, batch_size=128)

model = EntityGCN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

step = 0
for epoch in range(6):
    model.train()
    total = 0.0
    for nodes, adj, query, cand, answer in train_loader:
        scores = model(nodes, adj, query, cand)
        probs = softmax(scores)
        loss = -torch.log(probs[torch.arange(len(answer)), answer]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        if step % 12 == 0:
            print(f"step {step} loss {loss.item():.4f} max score {scores.max().item():.1f}")
        step += 1
    model.eval()
    correct = 0
    with torch.no_grad():
        for nodes, adj, query, cand, answer in val_loader:
            pred = model(nodes, adj, query, cand).argmax(dim=1)
            correct += (pred == answer).sum().item()
    print(f"epoch {epoch} train loss {total / len(train_loader):.4f} val acc {correct / len(val_set):.3f}")
