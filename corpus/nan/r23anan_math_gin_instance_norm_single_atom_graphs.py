"""GIN graph classifier on small molecules (toxicity-style binary label).

Mini-batches are built PyG-style: node features of all graphs are concatenated,
edge indices are offset, and a `batch` vector maps each node to its graph.
Each GIN layer is followed by a graph-wise InstanceNorm (per graph, per channel).
"""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

NUM_ATOM_TYPES = 9
HIDDEN = 64
BATCH_SIZE = 32
EPOCHS = 6


def random_molecule(rng):
    r = rng.random()
    if r < 0.06:
        n = 1
    else:
        n = rng.randint(3, 18)
    atoms = [rng.choice([0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]) for _ in range(n)]
    edges = []
    for i in range(1, n):
        j = rng.randrange(i)
        edges.append((i, j))
    if n > 4 and rng.random() < 0.5:
        edges.append((n - 1, 0))
    halogens = sum(a in (6, 7) for a in atoms)
    nitro = sum(a == 2 for a in atoms)
    label = 1 if (halogens >= 2 or (nitro >= 1 and n > 8)) else 0
    return atoms, edges, label


class MoleculeDataset(Dataset):
    def __init__(self, num_graphs, seed):
        rng = random.Random(seed)
        self.graphs = [random_molecule(rng) for _ in range(num_graphs)]

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, idx):
        atoms, edges, label = self.graphs[idx]
        x = F.one_hot(torch.tensor(atoms), NUM_ATOM_TYPES).float()
        if edges:
            e = torch.tensor(edges, dtype=torch.long).t()
            edge_index = torch.cat([e, e.flip(0)], dim=1)
        else:
            edge_index = torch.zeros(2, 0, dtype=torch.long)
        return x, edge_index, torch.tensor(float(label))


def collate_graphs(samples):
    xs, edge_indices, batch, ys = [], [], [], []
    offset = 0
    for g, (x, edge_index, y) in enumerate(samples):
        xs.append(x)
        edge_indices.append(edge_index + offset)
        batch.append(torch.full((x.size(0),), g, dtype=torch.long))
        ys.append(y)
        offset += x.size(0)
    return torch.cat(xs), torch.cat(edge_indices, dim=1), torch.cat(batch), torch.stack(ys)


class InstanceNorm(nn.Module):
    def __init__(self, in_channels, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(in_channels))
        self.bias = nn.Parameter(torch.zeros(in_channels))

    def forward(self, x, batch):
        batch_size = int(batch.max()) + 1
        norm = torch.bincount(batch, minlength=batch_size).clamp(min=1).to(x.dtype).view(-1, 1)
        mean = x.new_zeros(batch_size, x.size(1)).index_add_(0, batch, x) / norm
        x = x - mean[batch]
        var = x.new_zeros(batch_size, x.size(1)).index_add_(0, batch, x * x) / norm
        out = x / (var.sqrt()[batch] + self.eps)
        return out * self.weight + self.bias


class GINConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.eps = nn.Parameter(torch.zeros(1))
        self.mlp = nn.Sequential(nn.Linear(in_channels, out_channels), nn.ReLU(), nn.Linear(out_channels, out_channels))

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        return self.mlp((1 + self.eps) * x + agg)


class GIN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GINConv(NUM_ATOM_TYPES, HIDDEN)
        self.norm1 = InstanceNorm(HIDDEN)
        self.conv2 = GINConv(HIDDEN, HIDDEN)
        self.norm2 = InstanceNorm(HIDDEN)
        self.conv3 = GINConv(HIDDEN, HIDDEN)
        self.norm3 = InstanceNorm(HIDDEN)
        self.head = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))

    def forward(self, x, edge_index, batch):
        h = F.relu(self.norm1(self.conv1(x, edge_index), batch))
        h = F.relu(self.norm2(self.conv2(h, edge_index), batch))
        h = F.relu(self.norm3(self.conv3(h, edge_index), batch))
        batch_size = int(batch.max()) + 1
        pooled = h.new_zeros(batch_size, HIDDEN).index_add_(0, batch, h)
        return self.head(pooled).squeeze(-1)


def evaluate(model, loader):
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x, edge_index, batch, y in loader:
            logits = model(x, edge_index, batch)
            loss_sum += F.binary_cross_entropy_with_logits(logits, y, reduction="sum").item()
            correct += ((logits > 0).float() == y).sum().item()
            total += y.numel()
    model.train()
    return loss_sum / total, correct / total


def main():
    train_set = MoleculeDataset(960, seed=1)
    val_set = MoleculeDataset(256, seed=2)
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_graphs)
    val_loader = DataLoader(val_set, batch_size=BATCH_SIZE, collate_fn=collate_graphs)

    model = GIN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    step = 0
    for epoch in range(EPOCHS):
        running = 0.0
        for x, edge_index, batch, y in train_loader:
            logits = model(x, edge_index, batch)
            loss = F.binary_cross_entropy_with_logits(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        val_loss, val_acc = evaluate(model, val_loader)
        print(f"epoch {epoch} train_loss {running / len(train_loader):.4f} val_loss {val_loss:.4f} val_acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
