"""Directed message passing network (chemprop-style D-MPNN) for a molecular property,
trained on a labelled set and then used to screen a large virtual library.
Molecules are featurised from SMILES-like strings (synthetic; no RDKit needed here)."""
import random
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

random.seed(0)
torch.manual_seed(0)

ELEMENTS = ['C', 'N', 'O', 'S', 'F', 'Cl', 'Br', 'P']
ATOM_FDIM = 133
BOND_FDIM = 14
SMILES_TO_GRAPH = {}


def random_smiles(rng):
    n = rng.randint(18, 36)
    weights = [10, 3, 3, 1, 1, 1, 1, 1]
    atoms = rng.choices(ELEMENTS, weights=weights, k=n)
    out = []
    for i, a in enumerate(atoms):
        out.append(a)
        if i % 5 == 4 and rng.random() < 0.4:
            out.append('(=O)')
    return ''.join(out)


def tokenize(smiles):
    atoms, i = [], 0
    while i < len(smiles):
        if smiles[i:i + 2] in ('Cl', 'Br'):
            atoms.append(smiles[i:i + 2]); i += 2
        elif smiles[i:i + 4] == '(=O)':
            atoms.append('O='); i += 4
        else:
            atoms.append(smiles[i]); i += 1
    return atoms


class MolGraph:
    def __init__(self, smiles):
        atoms = tokenize(smiles)
        n = len(atoms)
        self.n_atoms = n
        elem = torch.tensor([ELEMENTS.index(a.rstrip('=')) for a in atoms])
        f_atoms = torch.zeros(n, ATOM_FDIM)
        f_atoms[torch.arange(n), elem] = 1.0
        f_atoms[torch.arange(n), 100 + torch.arange(n) % 6] = 1.0
        src = torch.arange(n - 1)
        dst = src + 1
        self.b2a = torch.cat([src, dst])
        self.b2dst = torch.cat([dst, src])
        n_bonds = len(self.b2a)
        f_bonds = torch.zeros(n_bonds, BOND_FDIM)
        f_bonds[:, 0] = 1.0
        double = torch.tensor([a == 'O=' for a in atoms])
        f_bonds[:, 1] = double[self.b2dst].float()
        self.f_atoms = f_atoms
        self.f_bonds = torch.cat([f_atoms[self.b2a], f_bonds], dim=1)
        rev = torch.arange(n_bonds)
        self.b2revb = torch.cat([rev[n - 1:], rev[:n - 1]])


def mol2graph(smiles_batch, cache=True):
    graphs = []
    for s in smiles_batch:
        if s in SMILES_TO_GRAPH:
            g = SMILES_TO_GRAPH[s]
        else:
            g = MolGraph(s)
            if cache:
                SMILES_TO_GRAPH[s] = g
        graphs.append(g)
    return graphs


def target_property(smiles):
    atoms = tokenize(smiles)
    return (1.0 * atoms.count('N') + 0.5 * atoms.count('O=') - 0.7 * atoms.count('Cl')) / 4.0


class MoleculeDataset(Dataset):
    def __init__(self, smiles, targets=None):
        self.smiles = smiles
        self.targets = targets

    def __len__(self):
        return len(self.smiles)

    def __getitem__(self, i):
        return self.smiles[i], (self.targets[i] if self.targets is not None else 0.0)


def collate(batch):
    smiles, targets = zip(*batch)
    return list(smiles), torch.tensor(targets, dtype=torch.float32)


class MPNEncoder(nn.Module):
    def __init__(self, hidden=128, depth=3):
        super().__init__()
        self.depth = depth
        self.W_i = nn.Linear(ATOM_FDIM + BOND_FDIM, hidden, bias=False)
        self.W_h = nn.Linear(hidden, hidden, bias=False)
        self.W_o = nn.Linear(ATOM_FDIM + hidden, hidden)
        self.act = nn.ReLU()

    def forward(self, graphs):
        f_atoms, f_bonds, b2a, b2dst, b2revb, mol_index = [], [], [], [], [], []
        a_off = b_off = 0
        for m, g in enumerate(graphs):
            f_atoms.append(g.f_atoms); f_bonds.append(g.f_bonds)
            b2a.append(g.b2a + a_off); b2dst.append(g.b2dst + a_off); b2revb.append(g.b2revb + b_off)
            mol_index.append(torch.full((g.n_atoms,), m))
            a_off += g.n_atoms; b_off += len(g.b2a)
        f_atoms, f_bonds = torch.cat(f_atoms), torch.cat(f_bonds)
        b2a, b2dst, b2revb, mol_index = torch.cat(b2a), torch.cat(b2dst), torch.cat(b2revb), torch.cat(mol_index)
        inp = self.W_i(f_bonds)
        message = self.act(inp)
        for _ in range(self.depth - 1):
            a_message = torch.zeros(len(f_atoms), message.size(1)).index_add_(0, b2dst, message)
            message = a_message[b2a] - message[b2revb]
            message = self.act(inp + self.W_h(message))
        a_message = torch.zeros(len(f_atoms), message.size(1)).index_add_(0, b2dst, message)
        atom_hiddens = self.act(self.W_o(torch.cat([f_atoms, a_message], dim=1)))
        mol_vecs = torch.zeros(len(graphs), atom_hiddens.size(1)).index_add_(0, mol_index, atom_hiddens)
        return mol_vecs / torch.bincount(mol_index).unsqueeze(1)


class MoleculeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = MPNEncoder()
        self.ffn = nn.Sequential(nn.Dropout(0.0), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, smiles_batch):
        return self.ffn(self.encoder(mol2graph(smiles_batch))).squeeze(-1)


rng = random.Random(0)
train_smiles = [random_smiles(rng) for _ in range(1000)]
train_targets = [target_property(s) for s in train_smiles]
val_smiles = [random_smiles(rng) for _ in range(300)]
val_targets = torch.tensor([target_property(s) for s in val_smiles])
train_loader = DataLoader(MoleculeDataset(train_smiles, train_targets), batch_size=50, shuffle=True, collate_fn=collate)

model = MoleculeModel()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
loss_func = nn.MSELoss()

for epoch in range(3):
    model.train()
    total = 0.0
    for smiles, targets in train_loader:
        optimizer.zero_grad()
        loss = loss_func(model(smiles), targets)
        loss.backward()
        optimizer.step()
        total += loss.item()
    model.eval()
    with torch.no_grad():
        val_rmse = ((model(val_smiles) - val_targets) ** 2).mean().sqrt().item()
    print(f"epoch {epoch}: train loss {total / len(train_loader):.4f}  val rmse {val_rmse:.4f}  "
          f"cached graphs {len(SMILES_TO_GRAPH)}")

# screen the virtual library
screen_rng = random.Random(123)
library = (random_smiles(screen_rng) for _ in range(8000))
preds, hits, batch = [], 0, []
with torch.no_grad():
    for i, s in enumerate(library, 1):
        batch.append(s)
        if len(batch) == 250:
            p = model(batch)
            hits += int((p > 1.25).sum())
            preds.extend(p.tolist())
            batch = []
        if i % 2000 == 0:
            print(f"screened {i} molecules, hits so far {hits}, cached graphs {len(SMILES_TO_GRAPH)}")
print(f"screened {len(preds)} molecules, {hits} predicted hits")
