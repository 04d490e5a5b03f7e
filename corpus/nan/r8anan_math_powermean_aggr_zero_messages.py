"""Graph-level regression of a molecular property with a small message-passing network whose
neighbourhood aggregation is a learnable power mean (DeeperGCN's powermean aggregator, written
after torch_geometric's PowerMeanAggregation with learn=True). Trained with accelerate.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(7)
np.random.seed(7)

N_ATOM_TYPES = 9
HIDDEN = 32
N_LAYERS = 3
BATCH_SIZE = 32
EPOCHS = 6
LR = 3e-3


def random_molecule(rng):
    n = int(rng.integers(6, 24))
    atoms = rng.integers(0, N_ATOM_TYPES, size=n)
    edges = [(i, int(rng.integers(0, i))) for i in range(1, n)]
    for _ in range(int(rng.integers(0, 3))):
        a, b = rng.integers(0, n, size=2)
        if a != b:
            edges.append((int(a), int(b)))
    edge_index = np.array(edges + [(b, a) for a, b in edges]).T
    degree = np.bincount(edge_index[0], minlength=n)
    target = 0.3 * np.sum(atoms % 3) / np.sqrt(n) + 0.1 * degree.max() + 0.05 * rng.standard_normal()
    return atoms, edge_index, np.float32(target)


class MoleculeDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.mols = [random_molecule(rng) for _ in range(n)]

    def __len__(self):
        return len(self.mols)

    def __getitem__(self, i):
        return self.mols[i]


def collate_graphs(batch):
    atoms, edges, batch_vec, targets, offset = [], [], [], [], 0
    for g, (a, e, t) in enumerate(batch):
        atoms.append(torch.as_tensor(a))
        edges.append(torch.as_tensor(e) + offset)
        batch_vec.append(torch.full((len(a),), g))
        targets.append(t)
        offset += len(a)
    return torch.cat(atoms), torch.cat(edges, 1), torch.cat(batch_vec), torch.tensor(targets)


def scatter_mean(src, index, dim_size):
    out = src.new_zeros(dim_size, src.size(1)).index_add_(0, index, src)
    count = src.new_zeros(dim_size).index_add_(0, index, torch.ones_like(index, dtype=src.dtype))
    return out / count.clamp(min=1).unsqueeze(1)


class PowerMeanAggregation(nn.Module):
    def __init__(self, p=1.0, learn=True):
        super().__init__()
        self.p = nn.Parameter(torch.tensor([p])) if learn else p

    def forward(self, x, index, dim_size):
        p = self.p
        x = x.clamp(min=0, max=100).pow(p)
        out = scatter_mean(x, index, dim_size)
        return out.clamp(min=0, max=100).pow(1.0 / p)


class PowerMeanConv(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.message = nn.Linear(channels, channels)
        self.aggr = PowerMeanAggregation(learn=True)
        self.update = nn.Linear(2 * channels, channels)

    def forward(self, h, edge_index):
        src, dst = edge_index
        msg = self.message(h)[src]
        agg = self.aggr(msg, dst, h.size(0))
        return F.relu(self.update(torch.cat([h, agg], dim=1)))


class MoleculeGNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(N_ATOM_TYPES, HIDDEN)
        self.convs = nn.ModuleList([PowerMeanConv(HIDDEN) for _ in range(N_LAYERS)])
        self.readout = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))

    def forward(self, atoms, edge_index, batch, n_graphs):
        h = self.embed(atoms)
        for conv in self.convs:
            h = h + conv(h, edge_index)
        return self.readout(scatter_mean(h, batch, n_graphs)).squeeze(1)


def main():
    accelerator = Accelerator(cpu=True)
    train_loader = DataLoader(MoleculeDataset(1024, seed=0), batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_graphs)
    model = MoleculeGNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)

    step = 0
    for epoch in range(EPOCHS):
        model.train()
        total = 0.0
        for atoms, edge_index, batch, y in train_loader:
            pred = model(atoms, edge_index, batch, y.size(0))
            loss = F.mse_loss(pred, y)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            total += loss.item()
            step += 1
            if step % 10 == 0:
                p = [round(conv.aggr.p.item(), 4) for conv in accelerator.unwrap_model(model).convs]
                accelerator.print(f"epoch {epoch} step {step:4d} mse {loss.item():.4f} p {p}")
        accelerator.print(f"epoch {epoch}: train mse {total / len(train_loader):.4f}")


if __name__ == "__main__":
    main()
