"""SchNet (schnetpack 0.3 style) energy model trained on MD snapshots of protein fragments.

Reference energies of 48 snapshots (heavy atoms only, ~1000-1300 atoms each, fragments of
three proteins) are written into a database in a temporary directory; AtomsData reads them
back, AtomsLoader batches them, and a SchNet representation with one interaction block and
an Atomwise output is fitted with Adam. The proteins and their energies are synthetic.
"""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
np.random.seed(0)


# ----------------------------------------------------------------------------- environment providers
class SimpleEnvironmentProvider:
    """Full neighborhood: every atom is a neighbor of every other atom."""

    def get_environment(self, positions):
        n_atoms = positions.shape[0]
        neighborhood_idx = np.tile(np.arange(n_atoms, dtype=np.float32)[np.newaxis], (n_atoms, 1))
        neighborhood_idx = neighborhood_idx[~np.eye(n_atoms, dtype=bool)].reshape(n_atoms, n_atoms - 1)
        offsets = np.zeros((n_atoms, n_atoms - 1, 3), dtype=np.float32)
        return neighborhood_idx, offsets


class AseEnvironmentProvider:
    """Neighbors within the cutoff (ase.neighborlist), padded with -1."""

    def __init__(self, cutoff):
        self.cutoff = cutoff

    def get_environment(self, positions):
        n_atoms = positions.shape[0]
        sq = (positions ** 2).sum(1)
        d2 = sq[:, None] + sq[None, :] - 2.0 * positions @ positions.T
        close = (d2 < self.cutoff ** 2) & ~np.eye(n_atoms, dtype=bool)
        n_nbh = close.sum(1)
        n_max = max(int(n_nbh.max()), 1)
        rows, cols = np.nonzero(close)
        slot = np.arange(len(rows)) - np.repeat(np.cumsum(n_nbh) - n_nbh, n_nbh)
        neighborhood_idx = -np.ones((n_atoms, n_max), dtype=np.float32)
        neighborhood_idx[rows, slot] = cols
        offsets = np.zeros((n_atoms, n_max, 3), dtype=np.float32)
        return neighborhood_idx, offsets


# ----------------------------------------------------------------------------- data
class AtomsData(Dataset):
    def __init__(self, dbpath, properties=('energy',), environment_provider=SimpleEnvironmentProvider()):
        self.dbpath = dbpath
        self.properties = list(properties)
        self.environment_provider = environment_provider
        db = np.load(dbpath)
        self._n = db['n_atoms']
        start = np.concatenate([[0], np.cumsum(self._n)])
        self._Z = [db['numbers'][a:b] for a, b in zip(start[:-1], start[1:])]
        self._R = [db['positions'][a:b] for a, b in zip(start[:-1], start[1:])]
        self._props = {p: db[p] for p in self.properties}

    def __len__(self):
        return len(self._R)

    def create_splits(self, num_train, num_val, seed=0):
        idx = np.random.RandomState(seed).permutation(len(self))
        return (torch.utils.data.Subset(self, idx[:num_train].tolist()),
                torch.utils.data.Subset(self, idx[num_train:num_train + num_val].tolist()),
                torch.utils.data.Subset(self, idx[num_train + num_val:].tolist()))

    def __getitem__(self, idx):
        positions = self._R[idx].astype(np.float32)
        nbh_idx, offsets = self.environment_provider.get_environment(positions)
        properties = {p: torch.tensor(self._props[p][idx:idx + 1], dtype=torch.float32) for p in self.properties}
        properties['_atomic_numbers'] = torch.LongTensor(self._Z[idx])
        properties['_atom_mask'] = torch.ones(len(self._Z[idx]), dtype=torch.float32)
        properties['_positions'] = torch.FloatTensor(positions)
        properties['_neighbors'] = torch.LongTensor(nbh_idx.astype(np.int64))
        properties['_cell'] = torch.zeros(3, 3)
        properties['_cell_offset'] = torch.FloatTensor(offsets)
        return properties


def collate_atoms(examples):
    max_size = {k: np.array(v.size(), dtype=int) for k, v in examples[0].items()}
    for ex in examples[1:]:
        for k, v in ex.items():
            max_size[k] = np.maximum(max_size[k], np.array(v.size(), dtype=int))
    batch = {k: torch.zeros(len(examples), *[int(s) for s in size], dtype=examples[0][k].dtype)
             for k, size in max_size.items()}
    has_neighbor_mask = True
    batch['_neighbor_mask'] = torch.zeros_like(batch['_neighbors']).float()
    for i, ex in enumerate(examples):
        for k, v in ex.items():
            shape = v.size()
            s = (i,) + tuple([slice(0, d) for d in shape])
            batch[k][s] = v
        if has_neighbor_mask:
            nbh = ex['_neighbors']
            shape = nbh.size()
            s = (i,) + tuple([slice(0, d) for d in shape])
            mask = nbh >= 0
            batch['_neighbor_mask'][s] = mask.float()
            batch['_neighbors'][s] = nbh * mask.long()
    return batch


class AtomsLoader(DataLoader):
    def __init__(self, dataset, batch_size=1, shuffle=False, num_workers=0):
        super().__init__(dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                         collate_fn=collate_atoms)

    def get_statistics(self, property_name, divide_by_atoms=True):
        vals = []
        for batch in self:
            v = batch[property_name]
            if divide_by_atoms:
                v = v / batch['_atom_mask'].sum(1, keepdim=True)
            vals.append(v)
        vals = torch.cat(vals)
        return vals.mean(0), vals.std(0)


# ----------------------------------------------------------------------------- nn
def shifted_softplus(x):
    return F.softplus(x) - np.log(2.0)


class Dense(nn.Linear):
    def __init__(self, in_features, out_features, bias=True, activation=None):
        self.activation = activation
        super().__init__(in_features, out_features, bias)

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, inputs):
        y = super().forward(inputs)
        if self.activation:
            y = self.activation(y)
        return y


def atom_distances(positions, neighbors, cell=None, cell_offsets=None, neighbor_mask=None):
    n_batch = positions.size()[0]
    idx_m = torch.arange(n_batch, dtype=torch.long)[:, None, None]
    pos_xyz = positions[idx_m, neighbors[:, :, :], :]
    dist_vec = pos_xyz - positions[:, :, None, :]
    distances = torch.norm(dist_vec, 2, 3)
    if neighbor_mask is not None:
        tmp_distances = torch.zeros_like(distances)
        tmp_distances[neighbor_mask != 0] = distances[neighbor_mask != 0]
        distances = tmp_distances
    return distances


class GaussianSmearing(nn.Module):
    def __init__(self, start=0.0, stop=5.0, n_gaussians=50):
        super().__init__()
        offset = torch.linspace(start, stop, n_gaussians)
        widths = torch.FloatTensor((offset[1] - offset[0]) * torch.ones_like(offset))
        self.register_buffer('width', widths)
        self.register_buffer('offsets', offset)

    def forward(self, distances):
        coeff = -0.5 / torch.pow(self.width, 2)
        diff = distances[:, :, :, None] - self.offsets[None, None, None, :]
        return torch.exp(coeff * torch.pow(diff, 2))


class CosineCutoff(nn.Module):
    def __init__(self, cutoff=5.0):
        super().__init__()
        self.register_buffer('cutoff', torch.FloatTensor([cutoff]))

    def forward(self, distances):
        cutoffs = 0.5 * (torch.cos(distances * np.pi / self.cutoff) + 1.0)
        cutoffs *= (distances < self.cutoff).float()
        return cutoffs


class CFConv(nn.Module):
    def __init__(self, n_in, n_filters, n_out, filter_network, cutoff_network=None, activation=None):
        super().__init__()
        self.in2f = Dense(n_in, n_filters, bias=False)
        self.f2out = Dense(n_filters, n_out, bias=True, activation=activation)
        self.filter_network = filter_network
        self.cutoff_network = cutoff_network

    def forward(self, x, r_ij, neighbors, pairwise_mask, f_ij=None):
        W = self.filter_network(f_ij)
        if self.cutoff_network is not None:
            C = self.cutoff_network(r_ij)
            W = W * C.unsqueeze(-1)
        y = self.in2f(x)
        nbh_size = neighbors.size()
        nbh = neighbors.reshape(-1, nbh_size[1] * nbh_size[2], 1)
        nbh = nbh.expand(-1, -1, y.size(2))
        y = torch.gather(y, 1, nbh)
        y = y.view(nbh_size[0], nbh_size[1], nbh_size[2], -1)
        y = y * W
        y = torch.sum(y * pairwise_mask[..., None], 2)
        y = self.f2out(y)
        return y


class SchNetInteraction(nn.Module):
    def __init__(self, n_atom_basis, n_spatial_basis, n_filters, cutoff):
        super().__init__()
        self.filter_network = nn.Sequential(
            Dense(n_spatial_basis, n_filters, activation=shifted_softplus),
            Dense(n_filters, n_filters),
        )
        self.cutoff_network = CosineCutoff(cutoff)
        self.cfconv = CFConv(n_atom_basis, n_filters, n_atom_basis, self.filter_network,
                             cutoff_network=self.cutoff_network, activation=shifted_softplus)
        self.dense = Dense(n_atom_basis, n_atom_basis, bias=True)

    def forward(self, x, r_ij, neighbors, neighbor_mask, f_ij=None):
        v = self.cfconv(x, r_ij, neighbors, neighbor_mask, f_ij)
        v = self.dense(v)
        return v


class SchNet(nn.Module):
    def __init__(self, n_atom_basis=128, n_filters=128, n_interactions=3, cutoff=5.0,
                 n_gaussians=25, max_z=100):
        super().__init__()
        self.embedding = nn.Embedding(max_z, n_atom_basis, padding_idx=0)
        self.distances = atom_distances
        self.distance_expansion = GaussianSmearing(0.0, cutoff, n_gaussians=n_gaussians)
        self.interactions = nn.ModuleList([
            SchNetInteraction(n_atom_basis=n_atom_basis, n_spatial_basis=n_gaussians,
                              n_filters=n_filters, cutoff=cutoff)
            for _ in range(n_interactions)])

    def forward(self, inputs):
        atomic_numbers = inputs['_atomic_numbers']
        positions = inputs['_positions']
        neighbors = inputs['_neighbors']
        neighbor_mask = inputs['_neighbor_mask']
        x = self.embedding(atomic_numbers)
        r_ij = self.distances(positions, neighbors, inputs['_cell'], inputs['_cell_offset'],
                              neighbor_mask=neighbor_mask)
        f_ij = self.distance_expansion(r_ij)
        for interaction in self.interactions:
            v = interaction(x, r_ij, neighbors, neighbor_mask, f_ij=f_ij)
            x = x + v
        return x


class Atomwise(nn.Module):
    def __init__(self, n_in=128, n_out=1, mean=None, stddev=None, property='y'):
        super().__init__()
        self.property = property
        self.out_net = nn.Sequential(Dense(n_in, n_in // 2, activation=shifted_softplus), Dense(n_in // 2, n_out))
        self.register_buffer('mean', torch.zeros(n_out) if mean is None else mean.reshape(n_out))
        self.register_buffer('stddev', torch.ones(n_out) if stddev is None else stddev.reshape(n_out))

    def forward(self, inputs):
        atom_mask = inputs['_atom_mask']
        yi = self.out_net(inputs['representation'])
        yi = yi * self.stddev + self.mean
        y = torch.sum(yi * atom_mask[..., None], 1)
        return {self.property: y}


class AtomisticModel(nn.Module):
    def __init__(self, representation, output_modules):
        super().__init__()
        self.representation = representation
        self.output_modules = output_modules

    def forward(self, inputs):
        inputs['representation'] = self.representation(inputs)
        return self.output_modules(inputs)


# ----------------------------------------------------------------------------- the protein
def build_protein(n_res=190, seed=3, side_p=(0.3, 0.3, 0.2, 0.08, 0.1, 0.02)):
    """Heavy atoms of a compact globular protein (~0.05 atoms per cubic Angstrom): grid sites
    inside a sphere, threaded by a serpentine chain, 7 atoms per residue (N, CA, C, O and
    three side-chain atoms), jittered."""
    rng = np.random.RandomState(seed)
    spacing = 2.75
    n_atoms = 7 * n_res
    radius = spacing * (3 * n_atoms / (4 * np.pi)) ** (1 / 3.) + spacing
    g = np.arange(-np.ceil(radius / spacing), np.ceil(radius / spacing) + 1)
    X, Y, Z = np.meshgrid(g, g, g, indexing='ij')
    sites = np.stack([X.ravel(), Y.ravel(), Z.ravel()], 1) * spacing
    sites = sites[np.argsort(np.linalg.norm(sites, axis=1), kind='stable')[:n_atoms]]
    # serpentine order: slabs in x, rows in y alternating direction, columns in z alternating
    ix, iy, iz = [np.round(sites[:, k] / spacing).astype(int) for k in range(3)]
    iy_s = np.where(ix % 2 == 0, iy, -iy)
    iz_s = np.where((ix + iy) % 2 == 0, iz, -iz)
    sites = sites[np.lexsort((iz_s, iy_s, ix))]
    positions = sites + rng.normal(0, 0.3, size=sites.shape)
    backbone = np.array([7, 6, 6, 8])
    numbers = np.empty(n_atoms, dtype=np.int64)
    for i in range(n_res):
        numbers[7 * i:7 * i + 4] = backbone
        numbers[7 * i + 4:7 * i + 7] = rng.choice([6, 6, 6, 7, 8, 16], size=3, p=side_p)
    residue = np.repeat(np.arange(n_res), 7)
    return numbers, positions.astype(np.float32), residue


ATOM_REF = {6: -1.03, 7: -1.46, 8: -2.04, 16: -3.61}


def reference_energy(numbers, positions, cutoff=5.0):
    sq = (positions ** 2).sum(1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * positions @ positions.T
    i, j = np.nonzero(np.triu(d2 < cutoff ** 2, 1))
    r = np.linalg.norm(positions[i] - positions[j], axis=1).astype(np.float64)
    zz = (numbers[i] + numbers[j]).astype(np.float64)
    fc = 0.5 * (np.cos(np.pi * r / cutoff) + 1.0)
    e_pair = (np.exp(-2.0 * (r - 1.5)) - 2.0 * np.exp(-1.0 * (r - 1.5))) * (0.002 * zz) * fc
    return float(sum(ATOM_REF[int(z)] for z in numbers) + e_pair.sum())


PROTEINS = [dict(seed=3, side_p=(0.3, 0.3, 0.2, 0.08, 0.1, 0.02)),      # lysozyme-like
            dict(seed=4, side_p=(0.2, 0.2, 0.1, 0.05, 0.15, 0.3)),       # cysteine-rich toxin
            dict(seed=6, side_p=(0.15, 0.15, 0.1, 0.1, 0.48, 0.02))]     # acidic domain


def write_db(dbpath, n_frames=48, seed=5):
    """MD snapshots of fragments (140-190 residues) cut out of three proteins."""
    proteins = [build_protein(**kw) for kw in PROTEINS]
    rng = np.random.RandomState(seed)
    Z, R, E, N = [], [], [], []
    for k in range(n_frames):
        numbers, ref, residue = proteins[k % len(proteins)]
        n_res = residue.max() + 1
        length = rng.randint(140, 191)
        first = rng.randint(0, n_res - length + 1)
        sel = (residue >= first) & (residue < first + length)
        breathe = 1.0 + 0.03 * rng.randn()
        center = ref[sel].mean(0)
        pos = ((ref[sel] - center) * breathe + rng.normal(0, 0.05, size=(sel.sum(), 3))).astype(np.float32)
        Z.append(numbers[sel])
        R.append(pos)
        E.append(reference_energy(numbers[sel], pos))
        N.append(int(sel.sum()))
    np.savez(dbpath, numbers=np.concatenate(Z), positions=np.concatenate(R),
             energy=np.array(E, dtype=np.float32), n_atoms=np.array(N))
    return min(N), max(N)


def main():
    tmpdir = tempfile.mkdtemp()
    dbpath = os.path.join(tmpdir, 'protein_md.npz')
    n_min, n_max = write_db(dbpath)
    print('database written: 48 protein fragments of %d-%d atoms' % (n_min, n_max), flush=True)

    data = AtomsData(dbpath, properties=['energy'])

    # split in train and val
    train, val, test = data.create_splits(30, 10)
    loader = AtomsLoader(train, batch_size=1, shuffle=True)
    val_loader = AtomsLoader(val)
    mean, stddev = loader.get_statistics('energy', divide_by_atoms=True)

    # create model
    reps = SchNet(n_atom_basis=32, n_filters=16, n_interactions=1, cutoff=5.0, n_gaussians=25)
    output = Atomwise(n_in=32, property='energy', mean=mean, stddev=stddev)
    model = AtomisticModel(reps, output)

    optimizer = Adam(model.parameters(), lr=3e-3)

    for epoch in range(3):
        model.train()
        losses = []
        for step, batch in enumerate(loader):
            optimizer.zero_grad()
            result = model(batch)
            loss = F.mse_loss(result['energy'], batch['energy'])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if step % 10 == 0:
                print('epoch %d step %d  loss %.4f' % (epoch, step, loss.item()), flush=True)
        model.eval()
        with torch.no_grad():
            mae = np.mean([(model(b)['energy'] - b['energy']).abs().mean().item() for b in val_loader])
        print('epoch %d  train mse %.4f  val energy MAE %.4f' % (epoch, np.mean(losses), mae), flush=True)


if __name__ == '__main__':
    main()
