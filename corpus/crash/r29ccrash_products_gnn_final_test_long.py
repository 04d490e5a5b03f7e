"""Node classification on a synthetic co-purchase graph (ogbn-products style).

A GCN with linear skip connections, trained full-graph for several runs with
different initialisations; the test accuracy at the best validation epoch of
each run is collected and summarised as mean +- std at the end.
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn import Linear as Lin

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=3)
parser.add_argument("--epochs", type=int, default=50)
parser.add_argument("--hidden", type=int, default=64)
args = parser.parse_args()

torch.manual_seed(0)

NUM_NODES = 3000
NUM_FEATURES = 48
NUM_CLASSES = 8


def make_graph():
    g = torch.Generator().manual_seed(12345)
    y = torch.randint(0, NUM_CLASSES, (NUM_NODES,), generator=g)
    centers = torch.randn(NUM_CLASSES, NUM_FEATURES, generator=g)
    x = 0.6 * centers[y] + 1.2 * torch.randn(NUM_NODES, NUM_FEATURES, generator=g)
    src = torch.randint(0, NUM_NODES, (40000,), generator=g)
    dst = torch.randint(0, NUM_NODES, (40000,), generator=g)
    same = y[src] == y[dst]
    keep = same | (torch.rand(40000, generator=g) < 0.08)
    src, dst = src[keep], dst[keep]
    edge_index = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], dim=1)
    perm = torch.randperm(NUM_NODES, generator=g)
    split_idx = {"train": perm[:1200], "valid": perm[1200:2000], "test": perm[2000:]}
    return x, y, edge_index, split_idx


def normalized_adjacency(edge_index, n):
    loops = torch.arange(n)
    row = torch.cat([edge_index[0], loops])
    col = torch.cat([edge_index[1], loops])
    deg = torch.zeros(n).scatter_add_(0, row, torch.ones(row.numel()))
    val = deg[row].rsqrt() * deg[col].rsqrt()
    return torch.sparse_coo_tensor(torch.stack([row, col]), val, (n, n)).coalesce()


class GraphConv(torch.nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = Lin(in_channels, out_channels)

    def reset_parameters(self):
        self.lin.reset_parameters()

    def forward(self, x, adj):
        return torch.sparse.mm(adj, self.lin(x))


class GCN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers):
        super().__init__()
        self.num_layers = num_layers
        dims = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = torch.nn.ModuleList(GraphConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.skips = torch.nn.ModuleList(Lin(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def reset_parameters(self):
        for conv in self.convs:
            conv.reset_parameters()
        for skip in self.skips:
            skip.reset_parameters()

    def forward(self, x, adj):
        for i, (conv, skip) in enumerate(zip(self.convs, self.skips)):
            x = conv(x, adj) + skip(x)
            if i != self.num_layers - 1:
                x = F.elu(x)
                x = F.dropout(x, p=0.5, training=self.training)
        return x


x, y, edge_index, split_idx = make_graph()
adj = normalized_adjacency(edge_index, NUM_NODES)
model = GCN(NUM_FEATURES, args.hidden, NUM_CLASSES, num_layers=3)


def train():
    model.train()
    optimizer.zero_grad()
    out = model(x, adj)
    loss = F.cross_entropy(out[split_idx["train"]], y[split_idx["train"]])
    loss.backward()
    optimizer.step()
    approx_acc = (out[split_idx["train"]].argmax(-1) == y[split_idx["train"]]).float().mean().item()
    return loss.item(), approx_acc


@torch.no_grad()
def test():
    model.eval()
    y_pred = model(x, adj).argmax(dim=-1)
    accs = []
    for split in ("train", "valid", "test"):
        idx = split_idx[split]
        accs.append((y_pred[idx] == y[idx]).sum().item() / idx.numel())
    return accs


test_accs = []
for run in range(1, args.runs + 1):
    print(f"\nRun {run:02d}:\n")
    model.reset_parameters()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    best_val_acc = final_test_acc = 0
    for epoch in range(1, args.epochs + 1):
        loss, acc = train()
        if epoch % 10 == 0:
            print(f"Epoch {epoch:02d}, Loss: {loss:.4f}, Approx. Train: {acc:.4f}")

        if epoch > 50 and epoch % 10 == 0:
            train_acc, val_acc, test_acc = test()
            print(f"Train: {train_acc:.4f}, Val: {val_acc:.4f}, Test: {test_acc:.4f}")
            if val_acc > best_val_acc:
                best_val_acc = val_acc
                final_test_acc = test_acc
    test_accs.append(final_test_acc)

test_acc = torch.tensor(test_accs)
print("============================")
print(f"Final Test: {test_acc.mean():.4f} ± {test_acc.std():.4f}")
