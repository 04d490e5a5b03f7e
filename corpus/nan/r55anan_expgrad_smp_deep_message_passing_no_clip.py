"""Structural-message-passing style node classifier: every layer sums messages from
the neighbours (dense adjacency per graph) and adds them to a residual stream.
Trained on batches of small random graphs; the task is to find nodes on a cycle."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

N_NODES = 24
IN_DIM = 8
HIDDEN = 32
N_LAYERS = 8


def random_graph(rng):
    n = N_NODES
    adj = np.zeros((n, n), dtype=np.float32)
    for i in range(1, n):
        j = rng.integers(0, i)
        adj[i, j] = adj[j, i] = 1
    label = np.zeros(n, dtype=np.int64)
    k = rng.integers(3, 8)
    cyc = rng.choice(n, k, replace=False)
    for a, b in zip(cyc, np.roll(cyc, 1)):
        adj[a, b] = adj[b, a] = 1
    label[cyc] = 1
    if rng.random() < 0.05:
        hub = rng.integers(0, n)
        adj[hub, :] = adj[:, hub] = 1
        adj[hub, hub] = 0
    deg = adj.sum(1, keepdims=True)
    x = np.concatenate([deg, rng.normal(0, 1, (n, IN_DIM - 1))], 1).astype(np.float32)
    return x, adj, label


class GraphSet(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.graphs = [random_graph(rng) for _ in range(n)]

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, i):
        x, adj, y = self.graphs[i]
        return torch.from_numpy(x), torch.from_numpy(adj), torch.from_numpy(y)


class SMPLayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.msg = nn.Linear(d, d)
        self.update = nn.Linear(2 * d, d)

    def forward(self, h, adj):
        m = adj @ self.msg(h)
        return h + F.relu(self.update(torch.cat([h, m], -1)))


class SMP(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(IN_DIM, HIDDEN)
        self.layers = nn.ModuleList([SMPLayer(HIDDEN) for _ in range(N_LAYERS)])
        self.head = nn.Linear(HIDDEN, 2)

    def forward(self, x, adj):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, adj)
        return self.head(h)


train_loader = DataLoader(GraphSet(1280, 1), batch_size=32, shuffle=True)
val_loader = DataLoader(GraphSet(256, 2), batch_size=64)

model = SMP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

step = 0
for epoch in range(1, 6):
    model.train()
    for x, adj, y in train_loader:
        out = model(x, adj)
        loss = F.cross_entropy(out.reshape(-1, 2), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 10 == 0 or step == 1:
            print(f"epoch {epoch} step {step:3d} train loss {loss.item():.4f}")
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for x, adj, y in val_loader:
            pred = model(x, adj).argmax(-1)
            correct += (pred == y).sum().item(); total += y.numel()
    print(f"epoch {epoch} val acc {correct / total:.4f}")
