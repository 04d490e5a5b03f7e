"""Graph-level regression with a GIN-style message-passing network (sum aggregation,
no normalisation layers) on a set of molecule-like graphs: predict a per-graph
property from atom features. Mini-batches of graphs are merged into one big disjoint
graph, as torch_geometric does.
"""
import argparse
import random
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


def random_graph(n, p_extra, n_feat, g):
    src, dst = [], []
    for i in range(1, n):
        j = int(torch.randint(0, i, (1,), generator=g))
        src += [i, j]
        dst += [j, i]
    extra = int(p_extra * n)
    for _ in range(extra):
        i, j = torch.randint(0, n, (2,), generator=g).tolist()
        if i != j:
            src += [i, j]
            dst += [j, i]
    x = torch.rand(n, n_feat, generator=g)
    edge_index = torch.tensor([src, dst], dtype=torch.long)
    deg = torch.bincount(edge_index[0], minlength=n).float()
    y = (x[:, 0] * deg).mean() + 0.5 * x[:, 1].mean()
    return x, edge_index, y


class MoleculeSet(Dataset):
    def __init__(self, n_graphs, n_feat=9, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.graphs = []
        for _ in range(n_graphs):
            if torch.rand(1, generator=g).item() < 0.04:
                n, p = int(torch.randint(120, 200, (1,), generator=g)), 3.0
            else:
                n, p = int(torch.randint(8, 30, (1,), generator=g)), 0.3
            self.graphs.append(random_graph(n, p, n_feat, g))

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, i):
        return self.graphs[i]


def collate(batch):
    xs, eis, ys, batch_vec = [], [], [], []
    offset = 0
    for k, (x, ei, y) in enumerate(batch):
        xs.append(x)
        eis.append(ei + offset)
        ys.append(y)
        batch_vec.append(torch.full((x.size(0),), k, dtype=torch.long))
        offset += x.size(0)
    return torch.cat(xs), torch.cat(eis, dim=1), torch.stack(ys), torch.cat(batch_vec)


class GINConv(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim_in, dim_out), nn.ReLU(), nn.Linear(dim_out, dim_out))

    def forward(self, x, edge_index):
        agg = torch.zeros_like(x).index_add_(0, edge_index[1], x[edge_index[0]])
        return self.mlp(x + agg)


class GIN(nn.Module):
    def __init__(self, n_feat, hidden=64, n_layers=4):
        super().__init__()
        self.convs = nn.ModuleList([GINConv(n_feat if i == 0 else hidden, hidden) for i in range(n_layers)])
        self.readout = nn.Linear(hidden, 1)

    def forward(self, x, edge_index, batch, n_graphs):
        for conv in self.convs:
            x = torch.relu(conv(x, edge_index))
        pooled = torch.zeros(n_graphs, x.size(1)).index_add_(0, batch, x)
        counts = torch.bincount(batch, minlength=n_graphs).clamp(min=1).unsqueeze(1)
        return self.readout(pooled / counts).squeeze(-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    random.seed(0)
    torch.manual_seed(0)
    train_set = MoleculeSet(640, seed=1)
    val_set = MoleculeSet(128, seed=2)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, collate_fn=collate)
    val_loader = DataLoader(val_set, batch_size=64, collate_fn=collate)

    model = GIN(n_feat=9)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.MSELoss()

    t0 = time.time()
    step = 0
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for x, edge_index, y, batch in train_loader:
            pred = model(x, edge_index, batch, y.size(0))
            loss = loss_fn(pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            total += loss.item() * y.size(0)
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} mse {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            val = sum(loss_fn(model(x, ei, b, y.size(0)), y).item() * y.size(0) for x, ei, y, b in val_loader)
        print(f"== epoch {epoch} train mse {total / len(train_set):.4f} val mse {val / len(val_set):.4f} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
