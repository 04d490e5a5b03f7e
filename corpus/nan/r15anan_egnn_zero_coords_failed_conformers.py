"""Predict a conformer-dependent molecular property (a strain-energy-like scalar) with an E(n)
equivariant GNN. The EGNNConv layer below follows dgl.nn.pytorch.EGNNConv (Satorras et al. 2021),
written with index_add_ so it runs without DGL.

Coordinates come from a conformer generator; molecules it could not embed keep zero coordinates.
"""
import math
import random
import time

import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
random.seed(0)

N_TYPES = 5


def reference_geometry(n_atoms, bonds):
    pos = torch.zeros(n_atoms, 3)
    for i, j in bonds:
        direction = torch.randn(3)
        pos[i] = pos[j] + 1.5 * direction / direction.norm()
    return pos


def embed_conformer(ref_pos, rng):
    """Force-field conformer; returns None when the embedding fails (RDKit EmbedMolecule == -1)."""
    if rng.random() < 0.05:
        return None
    return ref_pos + 0.1 * torch.randn_like(ref_pos)


def make_molecule(rng):
    n = rng.randint(6, 16)
    types = torch.tensor([rng.randrange(N_TYPES) for _ in range(n)])
    bonds = [(i, rng.randrange(max(0, i - 3), i)) for i in range(1, n)]
    ref_pos = reference_geometry(n, bonds)
    d = torch.cdist(ref_pos, ref_pos) + torch.eye(n) * 1e3
    w = types.float() + 1.0
    energy = ((w[:, None] * w[None, :]) * torch.exp(-d / 2.0)).sum().item() / n

    pos = embed_conformer(ref_pos, rng)
    if pos is None:
        pos = torch.zeros(n, 3)
    edges = torch.tensor(bonds + [(j, i) for i, j in bonds]).t()
    return types, pos, edges, energy


class ConformerDataset(Dataset):
    def __init__(self, n_mols, seed):
        rng = random.Random(seed)
        self.mols = [make_molecule(rng) for _ in range(n_mols)]
        ys = torch.tensor([m[3] for m in self.mols])
        self.y_mean, self.y_std = ys.mean().item(), ys.std().item()

    def __len__(self):
        return len(self.mols)

    def __getitem__(self, idx):
        return self.mols[idx]


def collate_graphs(batch):
    feats, coords, edge_index, graph_id, ys = [], [], [], [], []
    offset = 0
    for g, (types, pos, edges, y) in enumerate(batch):
        feats.append(nn.functional.one_hot(types, N_TYPES).float())
        coords.append(pos)
        edge_index.append(edges + offset)
        graph_id.append(torch.full((len(types),), g, dtype=torch.long))
        ys.append(y)
        offset += len(types)
    return (torch.cat(feats), torch.cat(coords), torch.cat(edge_index, dim=1),
            torch.cat(graph_id), torch.tensor(ys))


class EGNNConv(nn.Module):
    def __init__(self, in_size, hidden_size, out_size):
        super().__init__()
        act_fn = nn.SiLU()
        self.edge_mlp = nn.Sequential(
            nn.Linear(in_size * 2 + 1, hidden_size), act_fn,
            nn.Linear(hidden_size, hidden_size), act_fn)
        self.node_mlp = nn.Sequential(
            nn.Linear(in_size + hidden_size, hidden_size), act_fn,
            nn.Linear(hidden_size, out_size))
        self.coord_mlp = nn.Sequential(
            nn.Linear(hidden_size, hidden_size), act_fn,
            nn.Linear(hidden_size, 1, bias=False))

    def forward(self, node_feat, coord_feat, edge_index):
        src, dst = edge_index
        x_diff = coord_feat[src] - coord_feat[dst]
        radial = x_diff.square().sum(dim=1).unsqueeze(-1)
        x_diff = x_diff / (radial.sqrt() + 1e-30)
        msg_h = self.edge_mlp(torch.cat([node_feat[src], node_feat[dst], radial], dim=-1))
        msg_x = self.coord_mlp(msg_h) * x_diff

        n = node_feat.shape[0]
        h_neigh = torch.zeros(n, msg_h.shape[1]).index_add_(0, dst, msg_h)
        x_sum = torch.zeros(n, 3).index_add_(0, dst, msg_x)
        deg = torch.zeros(n).index_add_(0, dst, torch.ones(len(dst))).clamp(min=1).unsqueeze(-1)
        x_neigh = x_sum / deg

        h = self.node_mlp(torch.cat([node_feat, h_neigh], dim=-1))
        x = coord_feat + x_neigh
        return h, x


class EGNNRegressor(nn.Module):
    def __init__(self, hidden=64, n_layers=3):
        super().__init__()
        self.embed = nn.Linear(N_TYPES, hidden)
        self.layers = nn.ModuleList([EGNNConv(hidden, hidden, hidden) for _ in range(n_layers)])
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, feats, coords, edge_index, graph_id, n_graphs):
        h, x = self.embed(feats), coords
        for layer in self.layers:
            h, x = layer(h, x, edge_index)
        pooled = torch.zeros(n_graphs, h.shape[1]).index_add_(0, graph_id, h)
        return self.head(pooled).squeeze(-1)


def evaluate(model, loader, mean, std):
    model.eval()
    err, count = 0.0, 0
    with torch.no_grad():
        for feats, coords, edge_index, graph_id, y in loader:
            pred = model(feats, coords, edge_index, graph_id, len(y)) * std + mean
            err += (pred - y).abs().sum().item()
            count += len(y)
    model.train()
    return err / count


def main():
    train_set = ConformerDataset(1600, seed=1)
    val_set = ConformerDataset(300, seed=2)
    mean, std = train_set.y_mean, train_set.y_std
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, collate_fn=collate_graphs)
    val_loader = DataLoader(val_set, batch_size=100, collate_fn=collate_graphs)

    model = EGNNRegressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()

    start = time.time()
    step = 0
    for epoch in range(1, 4):
        for feats, coords, edge_index, graph_id, y in train_loader:
            pred = model(feats, coords, edge_index, graph_id, len(y))
            loss = loss_fn(pred, (y - mean) / std)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step:4d} train_mse {loss.item():.4f}")
            step += 1
        print(f"epoch {epoch} val_mae {evaluate(model, val_loader, mean, std):.4f} "
              f"({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
