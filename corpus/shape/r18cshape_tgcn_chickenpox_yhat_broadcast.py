"""Temporal GCN (T-GCN) forecaster for weekly chickenpox cases in the 20 Hungarian counties.

Follows pytorch_geometric_temporal's examples/recurrent/tgcn_example.py: every snapshot is the
county graph with 4 lagged (standardised) weekly case counts per node as features and the next
week's count as the target; a TGCN cell (GCN-gated GRU) carries its hidden state from snapshot
to snapshot, a ReLU + Linear head reads out one value per county, and the cost of an epoch is
the mean over the snapshots of the squared error. The case counts here are simulated: seasonal
outbreaks whose timing differs between counties and spreads along the county graph.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)


# ---------------------------------------------------------------- data (ChickenpoxDatasetLoader)
class Snapshot:
    def __init__(self, x, edge_index, edge_attr, y):
        self.x, self.edge_index, self.edge_attr, self.y = x, edge_index, edge_attr, y


class ChickenpoxDatasetLoader:
    num_nodes = 20
    num_weeks = 522

    def _make_graph(self):
        pos = self._pos = np.random.rand(self.num_nodes, 2)
        dist = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
        edges = []
        for i in range(self.num_nodes):
            for j in np.argsort(dist[i])[1:4]:
                edges += [(i, j), (j, i)]
        edges = sorted(set(edges))
        self._edges = np.array(edges).T
        self._edge_weights = np.ones(self._edges.shape[1])

    def _make_cases(self):
        t = np.arange(self.num_weeks)
        phase = 3.0 * self._pos[:, 0] + 2.0 * self._pos[:, 1] + np.random.normal(0, 0.2, self.num_nodes)
        period = 52.0
        level = np.random.uniform(20, 200, self.num_nodes)
        cases = level * (1.2 + np.sin(2 * np.pi * t[:, None] / period - phase))
        adj = np.zeros((self.num_nodes, self.num_nodes))
        adj[self._edges[0], self._edges[1]] = 1.0
        adj /= adj.sum(1, keepdims=True)
        for k in range(1, self.num_weeks):
            cases[k] += 0.2 * adj @ cases[k - 1]
        cases += np.random.normal(0, 0.1, cases.shape) * level
        self._dataset = (cases - cases.mean(0)) / cases.std(0)

    def get_dataset(self, lags=4):
        self._make_graph()
        self._make_cases()
        edge_index = torch.LongTensor(self._edges)
        edge_attr = torch.FloatTensor(self._edge_weights)
        snapshots = []
        for k in range(self._dataset.shape[0] - lags):
            x = torch.FloatTensor(self._dataset[k:k + lags].T)
            y = torch.FloatTensor(self._dataset[k + lags])
            snapshots.append(Snapshot(x, edge_index, edge_attr, y))
        return snapshots


def temporal_signal_split(dataset, train_ratio=0.8):
    train_snapshots = int(train_ratio * len(dataset))
    return dataset[:train_snapshots], dataset[train_snapshots:]


# ---------------------------------------------------------------- model
class GCNConv(nn.Module):
    """Kipf & Welling graph convolution with self-loops and symmetric normalisation."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, x, edge_index, edge_weight):
        n = x.size(0)
        adj = torch.zeros(n, n)
        adj[edge_index[1], edge_index[0]] = edge_weight
        adj = adj + torch.eye(n)
        deg_inv_sqrt = adj.sum(1).pow(-0.5)
        adj = deg_inv_sqrt[:, None] * adj * deg_inv_sqrt[None, :]
        return adj @ self.lin(x) + self.bias


class TGCN(nn.Module):
    """Temporal Graph Convolutional Gated Recurrent Cell (Zhao et al.)."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.out_channels = out_channels
        self.conv_z = GCNConv(in_channels, out_channels)
        self.linear_z = nn.Linear(2 * out_channels, out_channels)
        self.conv_r = GCNConv(in_channels, out_channels)
        self.linear_r = nn.Linear(2 * out_channels, out_channels)
        self.conv_h = GCNConv(in_channels, out_channels)
        self.linear_h = nn.Linear(2 * out_channels, out_channels)

    def forward(self, X, edge_index, edge_weight=None, H=None):
        if H is None:
            H = torch.zeros(X.shape[0], self.out_channels)
        Z = torch.sigmoid(self.linear_z(torch.cat([self.conv_z(X, edge_index, edge_weight), H], dim=1)))
        R = torch.sigmoid(self.linear_r(torch.cat([self.conv_r(X, edge_index, edge_weight), H], dim=1)))
        H_tilde = torch.tanh(self.linear_h(torch.cat([self.conv_h(X, edge_index, edge_weight), H * R], dim=1)))
        return Z * H + (1 - Z) * H_tilde


class RecurrentGCN(torch.nn.Module):
    def __init__(self, node_features):
        super(RecurrentGCN, self).__init__()
        self.recurrent = TGCN(node_features, 32)
        self.linear = torch.nn.Linear(32, 1)

    def forward(self, x, edge_index, edge_weight, prev_hidden_state):
        h = self.recurrent(x, edge_index, edge_weight, prev_hidden_state)
        y = F.relu(h)
        y = self.linear(y)
        return y, h


loader = ChickenpoxDatasetLoader()
dataset = loader.get_dataset(lags=4)
train_dataset, test_dataset = temporal_signal_split(dataset, train_ratio=0.2)
print("snapshots: train {}, test {}; nodes {}, edges {}".format(
    len(train_dataset), len(test_dataset), dataset[0].x.shape[0], dataset[0].edge_index.shape[1]))

model = RecurrentGCN(node_features=4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

model.train()
for epoch in range(60):
    cost = 0
    hidden_state = None
    for time, snapshot in enumerate(train_dataset):
        y_hat, hidden_state = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr, hidden_state)
        cost = cost + torch.mean((y_hat - snapshot.y) ** 2)
    cost = cost / (time + 1)
    cost.backward()
    optimizer.step()
    optimizer.zero_grad()
    if epoch % 10 == 0 or epoch == 59:
        print("Epoch {:3d}  train MSE: {:.4f}".format(epoch, cost.item()))

model.eval()
cost = 0
hidden_state = None
with torch.no_grad():
    for time, snapshot in enumerate(test_dataset):
        y_hat, hidden_state = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr, hidden_state)
        cost = cost + torch.mean((y_hat - snapshot.y) ** 2)
cost = cost / (time + 1)
cost = cost.item()
print("MSE: {:.4f}".format(cost))
