"""GCN graph classification on small molecule-like graphs (dense adjacency batches).

Each graph has 14-24 nodes of 6 atom types; in "clustered" graphs (label 1) atoms bond mostly
to atoms of their own type, in "mixed" graphs (label 0) only to atoms of other types. Node
features are one-hot atom types, A + I is symmetric-normalised, graphs are zero-padded.
"""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parameter import Parameter
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

MAX_NODES = 24
N_TYPES = 6


def make_graph(g, label):
    n = int(torch.randint(14, MAX_NODES + 1, (1,), generator=g))
    types = torch.randint(0, N_TYPES, (n,), generator=g)
    same = types[:, None] == types[None, :]
    p_same, p_diff = (0.45, 0.06) if label == 1 else (0.0, 0.15)
    prob = torch.where(same, torch.tensor(p_same), torch.tensor(p_diff))
    adj = (torch.rand(n, n, generator=g) < prob).float()
    adj = torch.triu(adj, 1)
    adj = adj + adj.t()
    a_hat = adj + torch.eye(n)
    d = a_hat.sum(1).pow(-0.5)
    a_norm = d[:, None] * a_hat * d[None, :]
    x = torch.zeros(MAX_NODES, N_TYPES)
    x[torch.arange(n), types] = 1.0
    A = torch.zeros(MAX_NODES, MAX_NODES)
    A[:n, :n] = a_norm
    mask = torch.zeros(MAX_NODES)
    mask[:n] = 1.0
    return x, A, mask


class MoleculeGraphs(Dataset):
    def __init__(self, n_graphs, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for k in range(n_graphs):
            label = k % 2
            x, A, mask = make_graph(g, label)
            self.items.append((x, A, mask, label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


class GraphConvolutionLayer(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        self.bias = Parameter(torch.FloatTensor(out_features)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, x, adj):
        out = torch.bmm(adj, x @ self.weight)
        return out + self.bias if self.bias is not None else out


def readout(x, mask):
    return (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


class GCN(nn.Module):
    def __init__(self, n_feat, n_class, n_layer, agg_hidden, fc_hidden, dropout):
        super().__init__()
        self.n_layer = n_layer
        self.dropout = dropout
        self.graph_convolution_layers = []
        for i in range(n_layer):
            if i == 0:
                self.graph_convolution_layers.append(GraphConvolutionLayer(n_feat, agg_hidden))
            else:
                self.graph_convolution_layers.append(GraphConvolutionLayer(agg_hidden, agg_hidden))
        self.fc1 = nn.Linear(agg_hidden, fc_hidden)
        self.fc2 = nn.Linear(fc_hidden, n_class)

    def forward(self, x, adj, mask):
        for i in range(self.n_layer):
            x = F.relu(self.graph_convolution_layers[i](x, adj))
            if i != self.n_layer - 1:
                x = F.dropout(x, p=self.dropout, training=self.training)
        x = readout(x, mask)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def evaluate(model, loader):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x, adj, mask, y in loader:
            out = model(x, adj, mask)
            loss_sum += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
    return loss_sum / total, correct / total


def main():
    start = time.time()
    train_set = MoleculeGraphs(640, seed=1)
    test_set = MoleculeGraphs(256, seed=2)
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=128)

    model = GCN(n_feat=N_TYPES, n_class=2, n_layer=3, agg_hidden=32, fc_hidden=64, dropout=0.1)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model parameters: {n_params}")
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)

    step = 0
    for epoch in range(10):
        model.train()
        running = 0.0
        for x, adj, mask, y in train_loader:
            optimizer.zero_grad()
            out = model(x, adj, mask)
            loss = F.cross_entropy(out, y)
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
        test_loss, test_acc = evaluate(model, test_loader)
        print(f"epoch {epoch}  step {step}  train loss {running / len(train_loader):.4f}  "
              f"test loss {test_loss:.4f}  test acc {test_acc:.3f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
