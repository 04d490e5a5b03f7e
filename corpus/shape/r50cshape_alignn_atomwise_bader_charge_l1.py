"""Atomwise (per-atom) Bader charge prediction with an edge-gated graph network, ALIGNN style.

Each crystal is a set of atoms with element ids and positions in a periodic-free box; edges join
atoms closer than a cutoff and carry an RBF expansion of the bond length.  The atomwise head predicts
one charge per atom and is trained with an L1 loss against the Bader charges.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)

NUM_ELEMENTS = 4
CUTOFF = 3.0
ELECTRONEG = np.array([0.9, 1.6, 2.5, 3.4])


def make_structure(rng):
    n = rng.randint(6, 15)
    species = rng.randint(0, NUM_ELEMENTS, size=n)
    pos = rng.uniform(0, 5.0, size=(n, 3))
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    w = np.exp(-d) * (d < CUTOFF) * (d > 0)
    en = ELECTRONEG[species]
    charge = 0.6 * (w * (en[:, None] - en[None, :])).sum(1) + 0.2 * (en - en.mean())
    return species, pos.astype(np.float32), charge.astype(np.float32)


class CrystalDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        self.items = [make_structure(rng) for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        species, pos, charge = self.items[i]
        pos = torch.tensor(pos)
        d = torch.cdist(pos, pos)
        src, dst = torch.nonzero((d < CUTOFF) & (d > 0), as_tuple=True)
        return torch.tensor(species), torch.stack([src, dst]), d[src, dst], torch.tensor(charge)


def collate_graphs(batch):
    species, edges, lengths, charges = [], [], [], []
    offset = 0
    for sp, e, l, q in batch:
        species.append(sp)
        edges.append(e + offset)
        lengths.append(l)
        charges.append(q)
        offset += sp.shape[0]
    return torch.cat(species), torch.cat(edges, 1), torch.cat(lengths), torch.cat(charges)


class RBFExpansion(nn.Module):
    def __init__(self, bins=32, vmax=CUTOFF):
        super().__init__()
        self.register_buffer("centers", torch.linspace(0, vmax, bins))
        self.gamma = bins / vmax

    def forward(self, d):
        return torch.exp(-self.gamma * (d[:, None] - self.centers) ** 2)


class EdgeGatedGraphConv(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.src_gate = nn.Linear(dim, dim)
        self.dst_gate = nn.Linear(dim, dim)
        self.edge_gate = nn.Linear(dim, dim)
        self.src_update = nn.Linear(dim, dim)
        self.dst_update = nn.Linear(dim, dim)
        self.norm_nodes = nn.LayerNorm(dim)
        self.norm_edges = nn.LayerNorm(dim)

    def forward(self, h, edge_index, e):
        src, dst = edge_index
        m = self.src_gate(h)[src] + self.dst_gate(h)[dst] + self.edge_gate(e)
        sigma = torch.sigmoid(m)
        num = torch.zeros_like(h).index_add_(0, dst, sigma * self.dst_update(h)[src])
        den = torch.zeros_like(h).index_add_(0, dst, sigma) + 1e-6
        x = self.src_update(h) + num / den
        h = h + torch.nn.functional.silu(self.norm_nodes(x))
        e = e + torch.nn.functional.silu(self.norm_edges(m))
        return h, e


class AtomwiseGNN(nn.Module):
    def __init__(self, hidden=64, layers=3):
        super().__init__()
        self.atom_embedding = nn.Embedding(NUM_ELEMENTS, hidden)
        self.edge_embedding = nn.Sequential(RBFExpansion(), nn.Linear(32, hidden), nn.SiLU())
        self.gcn_layers = nn.ModuleList([EdgeGatedGraphConv(hidden) for _ in range(layers)])
        self.atomwise_head = nn.Linear(hidden, 1)

    def forward(self, species, edge_index, lengths):
        h = self.atom_embedding(species)
        e = self.edge_embedding(lengths)
        for layer in self.gcn_layers:
            h, e = layer(h, edge_index, e)
        return self.atomwise_head(h)


train_ds = CrystalDataset(480, seed=1)
val_ds = CrystalDataset(120, seed=2)
train_loader = DataLoader(train_ds, batch_size=16, shuffle=True, collate_fn=collate_graphs)
val_loader = DataLoader(val_ds, batch_size=40, collate_fn=collate_graphs)

model = AtomwiseGNN()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-5)
criterion = nn.L1Loss()

val_charges = torch.cat([torch.tensor(q) for _, _, q in val_ds.items])
print(f"val charge std {val_charges.std():.4f}, MAE of predicting the mean {(val_charges - val_charges.mean()).abs().mean():.4f}")

for epoch in range(7):
    model.train()
    total, n = 0.0, 0
    for species, edge_index, lengths, bader_charge in train_loader:
        optimizer.zero_grad()
        atomwise_pred = model(species, edge_index, lengths)
        loss = criterion(atomwise_pred, bader_charge)
        loss.backward()
        optimizer.step()
        total += loss.item()
        n += 1
    model.eval()
    errs = []
    with torch.no_grad():
        for species, edge_index, lengths, bader_charge in val_loader:
            pred = model(species, edge_index, lengths).view(-1)
            errs.append((pred - bader_charge).abs())
    print(f"epoch {epoch + 1} train loss {total / n:.4f} val MAE {torch.cat(errs).mean():.4f}")
