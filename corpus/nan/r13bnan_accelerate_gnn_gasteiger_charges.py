"""Aqueous solubility (logS) regression with a small message-passing network over molecular
graphs, trained with HuggingFace accelerate.

Atom features: element one-hot, heavy-atom degree one-hot, attached hydrogens and the
Gasteiger partial charge. The charges come from an iterative Gasteiger-Marsili equalisation
(same parameter table and damping scheme as RDKit's ComputeGasteigerCharges).
"""
import math
import random

import numpy as np
import torch
import torch.nn as nn
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

ELEMENTS = ["C", "N", "O", "F", "S", "Cl", "P"]
VALENCE = {"C": 4, "N": 3, "O": 2, "F": 1, "S": 2, "Cl": 1, "P": 3}
# (element, number of bonded neighbours incl. H) -> (a, b, c) electronegativity parameters
GASTEIGER_PARAMS = {
    ("C", 4): (7.98, 9.18, 1.88), ("C", 3): (8.79, 9.32, 1.51), ("C", 2): (10.39, 9.45, 0.73),
    ("N", 3): (11.54, 10.82, 1.36), ("N", 2): (12.87, 11.15, 0.85), ("N", 4): (11.54, 10.82, 1.36),
    ("O", 2): (14.18, 12.92, 1.39), ("O", 1): (17.07, 13.79, 0.47),
    ("F", 1): (14.66, 13.85, 2.31), ("Cl", 1): (11.00, 9.69, 1.35),
    ("S", 2): (10.14, 9.13, 1.38), ("S", 1): (10.88, 9.49, 1.33),
    ("P", 3): (8.90, 8.24, 1.00), ("P", 4): (8.90, 8.24, 1.00),
    ("H", 1): (7.17, 6.24, -0.56),
}


def random_molecule(rng):
    """A random acyclic heavy-atom skeleton; a few molecules carry a hypervalent P centre."""
    n = rng.randint(6, 20)
    elements = ["C"]
    bonds = []
    degree = [0]
    for i in range(1, n):
        candidates = [j for j in range(i) if degree[j] < VALENCE[elements[j]]]
        if not candidates:
            break
        j = rng.choice(candidates)
        elements.append("C" if rng.random() < 0.68 else rng.choice(["N", "O", "O", "N", "F", "S", "Cl"]))
        degree.append(1)
        degree[j] += 1
        bonds.append((i, j))
    if rng.random() < 0.03:
        centre = rng.randrange(len(elements))
        elements[centre] = "P"
        for _ in range(max(0, 5 - degree[centre])):
            elements.append("C")
            degree.append(1)
            bonds.append((len(elements) - 1, centre))
        degree[centre] = max(degree[centre], 5)
    hydrogens = [max(0, VALENCE[e] - d) if e != "P" else 0 for e, d in zip(elements, degree)]
    return elements, bonds, degree, hydrogens


def compute_gasteiger_charges(elements, bonds, degree, hydrogens, n_iter=12):
    n = len(elements)
    params = np.array([GASTEIGER_PARAMS.get((e, d + h), (np.nan, np.nan, np.nan))
                       for e, d, h in zip(elements, degree, hydrogens)], dtype=np.float64)
    q = np.zeros(n)
    damp = 1.0
    for _ in range(n_iter):
        damp *= 0.5
        chi = params[:, 0] + params[:, 1] * q + params[:, 2] * q * q
        dq = np.zeros(n)
        for i, j in bonds:
            donor = i if chi[j] > chi[i] else j
            transfer = (chi[j] - chi[i]) / (params[donor, 0] + params[donor, 1] + params[donor, 2])
            dq[i] += damp * transfer
            dq[j] -= damp * transfer
        q = q + dq
    return {i: float(q[i]) for i in range(n)}


def atom_features(elements, degree, hydrogens, charges):
    feats = []
    for i, e in enumerate(elements):
        x = [1.0 if e == el else 0.0 for el in ELEMENTS]
        x += [1.0 if min(degree[i], 5) == d else 0.0 for d in range(6)]
        x += [hydrogens[i] / 3.0]
        q = charges.get(i)
        x += [q if q is not None else 0.0]
        feats.append(x)
    return np.array(feats, dtype=np.float32)


def logs_target(elements, hydrogens, rng):
    polar = sum(e in ("N", "O") for e in elements)
    halo = sum(e in ("F", "Cl") for e in elements)
    carbons = sum(e == "C" for e in elements)
    return 0.9 - 0.28 * carbons + 0.45 * polar - 0.35 * halo + 0.15 * sum(hydrogens[i] for i, e in enumerate(elements) if e in ("N", "O")) + rng.gauss(0, 0.25)


class MoleculeDataset(Dataset):
    def __init__(self, n, seed):
        rng = random.Random(seed)
        self.graphs = []
        for _ in range(n):
            elements, bonds, degree, hydrogens = random_molecule(rng)
            charges = compute_gasteiger_charges(elements, bonds, degree, hydrogens)
            x = atom_features(elements, degree, hydrogens, charges)
            edges = np.array(bonds + [(j, i) for i, j in bonds], dtype=np.int64).T
            y = logs_target(elements, hydrogens, rng)
            self.graphs.append((torch.from_numpy(x), torch.from_numpy(edges), torch.tensor([y], dtype=torch.float32)))

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, i):
        return self.graphs[i]


def collate_graphs(items):
    xs, edge_index, batch, ys = [], [], [], []
    offset = 0
    for k, (x, e, y) in enumerate(items):
        xs.append(x)
        edge_index.append(e + offset)
        batch.append(torch.full((x.shape[0],), k, dtype=torch.long))
        ys.append(y)
        offset += x.shape[0]
    return {"x": torch.cat(xs), "edge_index": torch.cat(edge_index, 1), "batch": torch.cat(batch), "y": torch.cat(ys)}


class GINLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(1))
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, h, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(h).index_add_(0, dst, h[src])
        return self.mlp((1 + self.eps) * h + agg)


class SolubilityGNN(nn.Module):
    def __init__(self, in_dim, hidden=64, layers=3):
        super().__init__()
        self.embed = nn.Linear(in_dim, hidden)
        self.convs = nn.ModuleList([GINLayer(hidden) for _ in range(layers)])
        self.norms = nn.ModuleList([nn.LayerNorm(hidden) for _ in range(layers)])
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x, edge_index, batch, num_graphs):
        h = self.embed(x)
        for conv, norm in zip(self.convs, self.norms):
            h = torch.relu(norm(h + conv(h, edge_index)))
        pooled = torch.zeros(num_graphs, h.shape[1]).index_add_(0, batch, h)
        counts = torch.bincount(batch, minlength=num_graphs).clamp(min=1).unsqueeze(1)
        return self.head(pooled / counts).squeeze(1)


def main():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)

    train_set = MoleculeDataset(1200, seed=1)
    val_set = MoleculeDataset(200, seed=2)
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, collate_fn=collate_graphs)
    val_loader = DataLoader(val_set, batch_size=100, collate_fn=collate_graphs)

    model = SolubilityGNN(in_dim=train_set[0][0].shape[1])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model, optimizer, train_loader, val_loader = accelerator.prepare(model, optimizer, train_loader, val_loader)
    loss_fn = nn.MSELoss()

    step = 0
    for epoch in range(4):
        model.train()
        for batch in train_loader:
            pred = model(batch["x"], batch["edge_index"], batch["batch"], batch["y"].shape[0])
            loss = loss_fn(pred, batch["y"])
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            if step % 5 == 0:
                accelerator.print(f"epoch {epoch} step {step} train_mse {loss.item():.4f}")
            step += 1

        model.eval()
        sq_err, n = 0.0, 0
        with torch.no_grad():
            for batch in val_loader:
                pred = model(batch["x"], batch["edge_index"], batch["batch"], batch["y"].shape[0])
                sq_err += ((pred - batch["y"]) ** 2).sum().item()
                n += batch["y"].shape[0]
        accelerator.print(f"== epoch {epoch} val_rmse {math.sqrt(sq_err / n):.4f}")


if __name__ == "__main__":
    main()
