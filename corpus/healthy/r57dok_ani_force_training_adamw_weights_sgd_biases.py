"""ANI-style neural network potential trained to both energies and forces.

Small H/C/O molecules (CH4, H2O, CH3OH, H2CO conformers, padded with species -1) with
reference energies and forces from an analytic bonded/non-bonded potential; self atomic
energies are removed by a linear fit, AEVs (radial + angular symmetry functions) feed one
MLP per element, forces are -dE/dR through autograd, AdamW optimizes the weights and SGD
the biases, both under ReduceLROnPlateau on the validation energy RMSE."""
import math

import numpy as np
import torch

torch.manual_seed(0)
np.random.seed(0)

HARTREE2KCALMOL = 627.509


def hartree2kcalmol(x):
    return x * HARTREE2KCALMOL


# ---------------------------------------------------------------- reference data
SPECIES = ['H', 'C', 'O']
SELF_ENERGIES = {0: -0.500607, 1: -38.0391, 2: -75.0616}
MORSE = {  # (D [Ha], a [1/A], r0 [A]) for bonded pairs
    (0, 1): (0.160, 1.80, 1.09),
    (0, 2): (0.170, 2.20, 0.96),
    (1, 2): (0.140, 2.00, 1.42),
    (1, 1): (0.130, 1.90, 1.52),
}
TEMPLATES = {
    'CH4': ([1, 0, 0, 0, 0],
            [[0, 0, 0], [0.63, 0.63, 0.63], [-0.63, -0.63, 0.63], [-0.63, 0.63, -0.63], [0.63, -0.63, -0.63]],
            [(0, 1), (0, 2), (0, 3), (0, 4)]),
    'H2O': ([2, 0, 0],
            [[0, 0, 0], [0.757, 0.586, 0], [-0.757, 0.586, 0]],
            [(0, 1), (0, 2)]),
    'CH3OH': ([1, 2, 0, 0, 0, 0],
              [[0, 0, 0], [1.42, 0, 0], [-0.36, 1.03, 0], [-0.36, -0.51, 0.89], [-0.36, -0.51, -0.89], [1.74, 0.9, 0]],
              [(0, 1), (0, 2), (0, 3), (0, 4), (1, 5)]),
    'H2CO': ([1, 2, 0, 0],
             [[0, 0, 0], [1.21, 0, 0], [-0.55, 0.94, 0], [-0.55, -0.94, 0]],
             [(0, 1), (0, 2), (0, 3)]),
}
MAX_ATOMS = 6


def reference_energy(species, coords, bonds):
    """coords: (n_conf, n_atoms, 3) conformers of one molecule -> (n_conf,) energies in Hartree."""
    e = sum(SELF_ENERGIES[s] for s in species) + 0.0 * coords.sum(dim=(1, 2))
    for i, j in bonds:
        key = tuple(sorted((species[i], species[j])))
        D, a, r0 = MORSE[key]
        r = (coords[:, i] - coords[:, j]).norm(dim=-1)
        e = e + D * (1 - torch.exp(-a * (r - r0))) ** 2
    bonded = {tuple(sorted(b)) for b in bonds}
    n = len(species)
    for i in range(n):
        for j in range(i + 1, n):
            if (i, j) not in bonded:
                r = (coords[:, i] - coords[:, j]).norm(dim=-1)
                e = e + 0.004 * torch.exp(-2.0 * (r - 1.5))
    # bond-angle bending at the central atom
    for (i, j) in bonds:
        for (k, l) in bonds:
            if i == k and j < l:
                v1 = coords[:, j] - coords[:, i]
                v2 = coords[:, l] - coords[:, i]
                cos = (v1 * v2).sum(-1) / (v1.norm(dim=-1) * v2.norm(dim=-1))
                e = e + 0.02 * (cos + 0.33) ** 2
    return e


def make_conformers(n_conf, seed):
    rng = np.random.RandomState(seed)
    names = list(TEMPLATES)
    which = rng.randint(len(names), size=n_conf)
    species_all = np.full((n_conf, MAX_ATOMS), -1, dtype=np.int64)
    coords_all = np.zeros((n_conf, MAX_ATOMS, 3), dtype=np.float32)
    forces_all = np.zeros((n_conf, MAX_ATOMS, 3), dtype=np.float32)
    energies = np.zeros(n_conf, dtype=np.float64)
    for t, name in enumerate(names):
        rows = np.nonzero(which == t)[0]
        species, xyz, bonds = TEMPLATES[name]
        n = len(species)
        xyz = np.array(xyz, dtype=np.float64)[None] + rng.normal(scale=0.08, size=(len(rows), n, 3))
        q, _ = np.linalg.qr(rng.normal(size=(len(rows), 3, 3)))
        xyz = np.einsum('cnj,cij->cni', xyz, q)
        c = torch.tensor(xyz, requires_grad=True)
        e = reference_energy(species, c, bonds)
        f = -torch.autograd.grad(e.sum(), c)[0]
        species_all[rows, :n] = species
        coords_all[rows, :n] = xyz
        forces_all[rows, :n] = f.numpy()
        energies[rows] = e.detach().numpy()
    return species_all, coords_all, forces_all, energies


class EnergyShifter:
    """Fit self atomic energies by least squares and subtract them."""

    def __init__(self):
        self.self_energies = None

    def fit(self, species, energies):
        counts = np.stack([(species == s).sum(1) for s in range(len(SPECIES))], 1).astype(np.float64)
        self.self_energies, *_ = np.linalg.lstsq(counts, energies, rcond=None)

    def subtract(self, species, energies):
        counts = np.stack([(species == s).sum(1) for s in range(len(SPECIES))], 1).astype(np.float64)
        return energies - counts @ self.self_energies


# ---------------------------------------------------------------- AEV computer
Rcr = 5.2
Rca = 3.5
EtaR = torch.tensor([16.0])
ShfR = torch.linspace(0.9, 4.9, 10)
Zeta = torch.tensor([32.0])
ShfZ = torch.tensor([0.19634954, 0.98174770, 1.76714590, 2.55254400])
EtaA = torch.tensor([8.0])
ShfA = torch.tensor([0.9, 1.55, 2.2])
num_species = len(SPECIES)


def cutoff_cosine(d, rc):
    return 0.5 * torch.cos(d * (math.pi / rc)) + 0.5


class AEVComputer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.num_pairs = num_species * (num_species + 1) // 2
        pair_index = torch.zeros(num_species, num_species, dtype=torch.long)
        k = 0
        for a in range(num_species):
            for b in range(a, num_species):
                pair_index[a, b] = k
                pair_index[b, a] = k
                k += 1
        self.register_buffer('pair_index', pair_index)
        self.radial_sublength = ShfR.numel()
        self.angular_sublength = ShfZ.numel() * ShfA.numel()
        self.aev_length = num_species * self.radial_sublength + self.num_pairs * self.angular_sublength

    def forward(self, species_coordinates):
        species, coordinates = species_coordinates
        B, N = species.shape
        real = species >= 0
        diff = coordinates.unsqueeze(2) - coordinates.unsqueeze(1)          # B,N,N,3
        eye = torch.eye(N, dtype=torch.bool).unsqueeze(0)
        pair_ok = real.unsqueeze(2) & real.unsqueeze(1) & ~eye
        dist = torch.where(pair_ok, (diff.pow(2).sum(-1) + 1e-12).sqrt(), torch.full_like(diff[..., 0], 10.0))

        # radial part: one block of ShfR terms per neighbour species
        fc_r = torch.where(dist <= Rcr, cutoff_cosine(dist, Rcr), torch.zeros_like(dist))
        rad = 0.25 * torch.exp(-EtaR * (dist.unsqueeze(-1) - ShfR) ** 2) * fc_r.unsqueeze(-1)   # B,N,N,R
        onehot = torch.nn.functional.one_hot(species.clamp(min=0), num_species).to(rad.dtype) * real.unsqueeze(-1)
        radial_aev = torch.einsum('bijr,bjs->bisr', rad, onehot).reshape(B, N, -1)

        # angular part: triples (i; j, k) binned by the species pair of j and k
        fc_a = torch.where(dist <= Rca, cutoff_cosine(dist, Rca), torch.zeros_like(dist))
        vij = diff.neg()
        cos = (vij.unsqueeze(3) * vij.unsqueeze(2)).sum(-1) / (dist.unsqueeze(3) * dist.unsqueeze(2))
        theta = torch.acos(0.95 * cos)                                       # B,N,N,N
        ravg = (dist.unsqueeze(3) + dist.unsqueeze(2)) / 2
        f1 = ((1 + torch.cos(theta.unsqueeze(-1) - ShfZ)) / 2) ** Zeta      # B,N,N,N,Z
        f2 = torch.exp(-EtaA * (ravg.unsqueeze(-1) - ShfA) ** 2)            # B,N,N,N,A
        jk_ok = ~torch.eye(N, dtype=torch.bool).view(1, 1, N, N)
        w = (fc_a.unsqueeze(3) * fc_a.unsqueeze(2)) * jk_ok
        ang = 2 * (f1.unsqueeze(-1) * f2.unsqueeze(-2)).flatten(-2) * w.unsqueeze(-1)   # B,N,N,N,ZA
        pair_onehot = torch.nn.functional.one_hot(self._pair_ids(species), self.num_pairs).to(ang.dtype)
        angular_aev = 0.5 * torch.einsum('bijkq,bjkp->bipq', ang, pair_onehot).reshape(B, N, -1)
        aev = torch.cat([radial_aev, angular_aev], dim=-1)
        return species, aev

    def _pair_ids(self, species):
        s = species.clamp(min=0)
        return self.pair_index[s.unsqueeze(2), s.unsqueeze(1)]


class ANIModel(torch.nn.ModuleList):
    """One atomic network per species; molecular energy = sum of atomic energies."""

    def forward(self, species_aev):
        species, aev = species_aev
        species_ = species.flatten()
        aev = aev.flatten(0, 1)
        output = aev.new_zeros(species_.shape)
        for i, m in enumerate(self):
            mask = (species_ == i)
            midx = mask.nonzero().flatten()
            if midx.shape[0] > 0:
                input_ = aev.index_select(0, midx)
                output.masked_scatter_(mask, m(input_).flatten())
        output = output.view_as(species)
        return species, torch.sum(output, dim=1)


class Sequential(torch.nn.ModuleList):
    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, input_):
        for module in self:
            input_ = module(input_)
        return input_


# ---------------------------------------------------------------- data
species_np, coords_np, forces_np, energies_np = make_conformers(1200, seed=1)
energy_shifter = EnergyShifter()
energy_shifter.fit(species_np[:960], energies_np[:960])
energies_shifted = energy_shifter.subtract(species_np, energies_np)
print('Self atomic energies: ', np.round(energy_shifter.self_energies, 4))

species_t = torch.from_numpy(species_np)
coords_t = torch.from_numpy(coords_np)
forces_t = torch.from_numpy(forces_np)
energies_t = torch.from_numpy(energies_shifted).float()

batch_size = 32


def collate(idx):
    batches = []
    for k in range(0, len(idx), batch_size):
        b = idx[k:k + batch_size]
        batches.append(({'species': species_t[b], 'coordinates': coords_t[b], 'forces': forces_t[b]},
                        {'energies': energies_t[b]}))
    return batches


perm = torch.randperm(1200)
training = collate(perm[:960])
validation = collate(perm[960:])

aev_computer = AEVComputer()
aev_dim = aev_computer.aev_length

H_network = torch.nn.Sequential(
    torch.nn.Linear(aev_dim, 64),
    torch.nn.CELU(0.1),
    torch.nn.Linear(64, 48),
    torch.nn.CELU(0.1),
    torch.nn.Linear(48, 1)
)
C_network = torch.nn.Sequential(
    torch.nn.Linear(aev_dim, 64),
    torch.nn.CELU(0.1),
    torch.nn.Linear(64, 48),
    torch.nn.CELU(0.1),
    torch.nn.Linear(48, 1)
)
O_network = torch.nn.Sequential(
    torch.nn.Linear(aev_dim, 64),
    torch.nn.CELU(0.1),
    torch.nn.Linear(64, 48),
    torch.nn.CELU(0.1),
    torch.nn.Linear(48, 1)
)
nn = ANIModel([H_network, C_network, O_network])
print(nn)


def init_params(m):
    if isinstance(m, torch.nn.Linear):
        torch.nn.init.kaiming_normal_(m.weight, a=1.0)
        torch.nn.init.zeros_(m.bias)


nn.apply(init_params)
model = Sequential(aev_computer, nn)

AdamW = torch.optim.AdamW([
    {'params': [H_network[0].weight]},
    {'params': [H_network[2].weight], 'weight_decay': 0.00001},
    {'params': [H_network[4].weight]},
    {'params': [C_network[0].weight]},
    {'params': [C_network[2].weight], 'weight_decay': 0.00001},
    {'params': [C_network[4].weight]},
    {'params': [O_network[0].weight]},
    {'params': [O_network[2].weight], 'weight_decay': 0.00001},
    {'params': [O_network[4].weight]},
], lr=1e-3, weight_decay=0)

SGD = torch.optim.SGD([
    {'params': [H_network[0].bias]},
    {'params': [H_network[2].bias]},
    {'params': [H_network[4].bias]},
    {'params': [C_network[0].bias]},
    {'params': [C_network[2].bias]},
    {'params': [C_network[4].bias]},
    {'params': [O_network[0].bias]},
    {'params': [O_network[2].bias]},
    {'params': [O_network[4].bias]},
], lr=1e-3)

AdamW_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(AdamW, factor=0.5, patience=100, threshold=0)
SGD_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(SGD, factor=0.5, patience=100, threshold=0)


def validate():
    mse_sum = torch.nn.MSELoss(reduction='sum')
    total_mse = 0.0
    total_fmse = 0.0
    count = 0
    fcount = 0
    for atomic_properties, properties in validation:
        species = atomic_properties['species']
        coordinates = atomic_properties['coordinates'].clone().requires_grad_(True)
        true_energies = properties['energies']
        _, predicted_energies = model((species, coordinates))
        forces = -torch.autograd.grad(predicted_energies.sum(), coordinates)[0]
        total_mse += mse_sum(predicted_energies, true_energies).item()
        total_fmse += mse_sum(forces, atomic_properties['forces']).item()
        count += predicted_energies.shape[0]
        fcount += 3 * int((species >= 0).sum())
    return hartree2kcalmol(math.sqrt(total_mse / count)), hartree2kcalmol(math.sqrt(total_fmse / fcount))


mse = torch.nn.MSELoss(reduction='none')

max_epochs = 5
early_stopping_learning_rate = 1.0E-5
force_coefficient = 0.1
best_rmse = float('inf')

print("training starting from epoch", AdamW_scheduler.last_epoch + 1)
for _ in range(AdamW_scheduler.last_epoch + 1, max_epochs + 2):
    rmse, frmse = validate()
    print('RMSE: %.3f kcal/mol, force RMSE: %.3f kcal/mol/A at epoch %d' % (rmse, frmse, AdamW_scheduler.last_epoch + 1))

    learning_rate = AdamW.param_groups[0]['lr']
    if learning_rate < early_stopping_learning_rate or AdamW_scheduler.last_epoch + 1 > max_epochs:
        break

    if rmse < best_rmse:
        best_rmse = rmse

    AdamW_scheduler.step(rmse)
    SGD_scheduler.step(rmse)

    for i, (atomic_properties, properties) in enumerate(training):
        species = atomic_properties['species']
        coordinates = atomic_properties['coordinates'].requires_grad_(True)
        true_energies = properties['energies']
        true_forces = atomic_properties['forces']
        num_atoms = (species >= 0).sum(dim=1, dtype=true_energies.dtype)
        _, predicted_energies = model((species, coordinates))

        forces = -torch.autograd.grad(predicted_energies.sum(), coordinates, create_graph=True, retain_graph=True)[0]

        energy_loss = (mse(predicted_energies, true_energies) / num_atoms.sqrt()).mean()
        force_loss = (mse(true_forces, forces).sum(dim=(1, 2)) / num_atoms).mean()
        loss = energy_loss + force_coefficient * force_loss

        AdamW.zero_grad()
        SGD.zero_grad()
        loss.backward()
        AdamW.step()
        SGD.step()

        if i % 10 == 0:
            print('epoch %d batch %d loss %.3e (energy %.3e, force %.3e)'
                  % (AdamW_scheduler.last_epoch, i, loss.item(), energy_loss.item(), force_loss.item()))
