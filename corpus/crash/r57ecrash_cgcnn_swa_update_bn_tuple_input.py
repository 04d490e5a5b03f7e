"""Crystal Graph Convolutional Network (CGCNN) for formation-energy regression, with SWA.

Synthetic "crystals": 10-16 atoms of 8 elements placed in a box, each atom connected to its 8
nearest neighbours with Gaussian-expanded bond lengths; the formation energy per atom is a sum of
element terms and distance-dependent pair terms. The network and the data pipeline follow
txie-93/cgcnn (ConvLayer with BatchNorm, collate_pool, Normalizer, MAE meter). The last epochs are
averaged with torch.optim.swa_utils (AveragedModel + SWALR), then the averaged model's BatchNorm
statistics are recomputed and it is evaluated on the test split.
"""
import argparse
import time

import numpy as np
import torch
import torch.nn as nn
from torch.optim.swa_utils import SWALR, AveragedModel
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description="Crystal Graph Convolutional Neural Networks")
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--swa-start", type=int, default=5)
parser.add_argument("--swa-lr", type=float, default=0.005)
parser.add_argument("--atom-fea-len", type=int, default=32)
parser.add_argument("--n-conv", type=int, default=3)
args = parser.parse_args()

torch.manual_seed(0)
np.random.seed(0)

N_ELEMENTS = 8
MAX_NBR = 8


class GaussianDistance:
    def __init__(self, dmin, dmax, step, var=None):
        self.filter = np.arange(dmin, dmax + step, step)
        self.var = step if var is None else var

    def expand(self, distances):
        return np.exp(-(distances[..., np.newaxis] - self.filter) ** 2 / self.var ** 2)


class SyntheticCrystalData(Dataset):
    def __init__(self, n_crystals, seed, radius=6.0, dmin=0.0, step=0.4):
        self.gdf = GaussianDistance(dmin=dmin, dmax=radius, step=step)
        chem = np.random.default_rng(0)
        e_site = chem.normal(0.0, 1.0, N_ELEMENTS)
        e_pair = chem.normal(0.0, 0.5, (N_ELEMENTS, N_ELEMENTS))
        e_pair = (e_pair + e_pair.T) / 2
        props = chem.normal(0.0, 1.0, (N_ELEMENTS, 4))
        rng = np.random.default_rng(seed)
        self.items = []
        for cid in range(n_crystals):
            n = int(rng.integers(10, 17))
            elem = rng.integers(0, N_ELEMENTS, n)
            pos = rng.uniform(0.0, 4.5, (n, 3))
            dist = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
            np.fill_diagonal(dist, np.inf)
            nbr_idx = np.argsort(dist, axis=1)[:, :MAX_NBR]
            nbr_dist = np.take_along_axis(dist, nbr_idx, axis=1)
            energy = e_site[elem].sum()
            energy += (e_pair[elem[:, None], elem[nbr_idx]] * np.exp(-nbr_dist / 1.5)).sum() / 2
            energy = energy / n + rng.normal(0.0, 0.02)
            atom_fea = np.concatenate([np.eye(N_ELEMENTS)[elem], props[elem]], axis=1)
            self.items.append((
                (torch.tensor(atom_fea, dtype=torch.float32),
                 torch.tensor(self.gdf.expand(nbr_dist), dtype=torch.float32),
                 torch.tensor(nbr_idx, dtype=torch.long)),
                torch.tensor([energy], dtype=torch.float32),
                f"mp-{seed}{cid:05d}"))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def collate_pool(dataset_list):
    batch_atom_fea, batch_nbr_fea, batch_nbr_fea_idx = [], [], []
    crystal_atom_idx, batch_target, batch_cif_ids = [], [], []
    base_idx = 0
    for (atom_fea, nbr_fea, nbr_fea_idx), target, cif_id in dataset_list:
        n_i = atom_fea.shape[0]
        batch_atom_fea.append(atom_fea)
        batch_nbr_fea.append(nbr_fea)
        batch_nbr_fea_idx.append(nbr_fea_idx + base_idx)
        crystal_atom_idx.append(torch.LongTensor(np.arange(n_i) + base_idx))
        batch_target.append(target)
        batch_cif_ids.append(cif_id)
        base_idx += n_i
    return (torch.cat(batch_atom_fea, dim=0),
            torch.cat(batch_nbr_fea, dim=0),
            torch.cat(batch_nbr_fea_idx, dim=0),
            crystal_atom_idx), \
        torch.stack(batch_target, dim=0), \
        batch_cif_ids


class ConvLayer(nn.Module):
    def __init__(self, atom_fea_len, nbr_fea_len):
        super().__init__()
        self.atom_fea_len = atom_fea_len
        self.nbr_fea_len = nbr_fea_len
        self.fc_full = nn.Linear(2 * self.atom_fea_len + self.nbr_fea_len, 2 * self.atom_fea_len)
        self.sigmoid = nn.Sigmoid()
        self.softplus1 = nn.Softplus()
        self.bn1 = nn.BatchNorm1d(2 * self.atom_fea_len)
        self.bn2 = nn.BatchNorm1d(self.atom_fea_len)
        self.softplus2 = nn.Softplus()

    def forward(self, atom_in_fea, nbr_fea, nbr_fea_idx):
        N, M = nbr_fea_idx.shape
        atom_nbr_fea = atom_in_fea[nbr_fea_idx, :]
        total_nbr_fea = torch.cat(
            [atom_in_fea.unsqueeze(1).expand(N, M, self.atom_fea_len), atom_nbr_fea, nbr_fea], dim=2)
        total_gated_fea = self.fc_full(total_nbr_fea)
        total_gated_fea = self.bn1(total_gated_fea.view(-1, self.atom_fea_len * 2)).view(N, M, self.atom_fea_len * 2)
        nbr_filter, nbr_core = total_gated_fea.chunk(2, dim=2)
        nbr_filter = self.sigmoid(nbr_filter)
        nbr_core = self.softplus1(nbr_core)
        nbr_sumed = torch.sum(nbr_filter * nbr_core, dim=1)
        nbr_sumed = self.bn2(nbr_sumed)
        return self.softplus2(atom_in_fea + nbr_sumed)


class CrystalGraphConvNet(nn.Module):
    def __init__(self, orig_atom_fea_len, nbr_fea_len, atom_fea_len=64, n_conv=3, h_fea_len=128):
        super().__init__()
        self.embedding = nn.Linear(orig_atom_fea_len, atom_fea_len)
        self.convs = nn.ModuleList([ConvLayer(atom_fea_len=atom_fea_len, nbr_fea_len=nbr_fea_len)
                                    for _ in range(n_conv)])
        self.conv_to_fc = nn.Linear(atom_fea_len, h_fea_len)
        self.conv_to_fc_softplus = nn.Softplus()
        self.fc_out = nn.Linear(h_fea_len, 1)

    def forward(self, atom_fea, nbr_fea, nbr_fea_idx, crystal_atom_idx):
        atom_fea = self.embedding(atom_fea)
        for conv_func in self.convs:
            atom_fea = conv_func(atom_fea, nbr_fea, nbr_fea_idx)
        crys_fea = self.pooling(atom_fea, crystal_atom_idx)
        crys_fea = self.conv_to_fc(self.conv_to_fc_softplus(crys_fea))
        crys_fea = self.conv_to_fc_softplus(crys_fea)
        return self.fc_out(crys_fea)

    def pooling(self, atom_fea, crystal_atom_idx):
        summed_fea = [torch.mean(atom_fea[idx_map], dim=0, keepdim=True) for idx_map in crystal_atom_idx]
        return torch.cat(summed_fea, dim=0)


class Normalizer:
    def __init__(self, tensor):
        self.mean = torch.mean(tensor)
        self.std = torch.std(tensor)

    def norm(self, tensor):
        return (tensor - self.mean) / self.std

    def denorm(self, normed_tensor):
        return normed_tensor * self.std + self.mean


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def mae(prediction, target):
    return torch.mean(torch.abs(target - prediction))


def train(train_loader, model, criterion, optimizer, epoch, normalizer):
    losses, mae_errors = AverageMeter(), AverageMeter()
    model.train()
    for i, (input, target, _) in enumerate(train_loader):
        target_normed = normalizer.norm(target)
        output = model(*input)
        loss = criterion(output, target_normed)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.update(loss.item(), target.size(0))
        mae_errors.update(mae(normalizer.denorm(output.detach()), target).item(), target.size(0))
    return losses.avg, mae_errors.avg


def validate(val_loader, model, criterion, normalizer):
    losses, mae_errors = AverageMeter(), AverageMeter()
    model.eval()
    with torch.no_grad():
        for input, target, _ in val_loader:
            output = model(*input)
            losses.update(criterion(output, normalizer.norm(target)).item(), target.size(0))
            mae_errors.update(mae(normalizer.denorm(output), target).item(), target.size(0))
    return losses.avg, mae_errors.avg


def main():
    train_set = SyntheticCrystalData(512, seed=1)
    val_set = SyntheticCrystalData(128, seed=2)
    test_set = SyntheticCrystalData(128, seed=3)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, collate_fn=collate_pool)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, collate_fn=collate_pool)
    test_loader = DataLoader(test_set, batch_size=args.batch_size, collate_fn=collate_pool)

    normalizer = Normalizer(torch.cat([t for _, t, _ in train_set.items]))
    (atom_fea, nbr_fea, _), _, _ = train_set[0]
    model = CrystalGraphConvNet(atom_fea.shape[-1], nbr_fea.shape[-1],
                                atom_fea_len=args.atom_fea_len, n_conv=args.n_conv, h_fea_len=64)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    swa_model = AveragedModel(model)
    swa_scheduler = SWALR(optimizer, swa_lr=args.swa_lr, anneal_epochs=1)

    best_mae_error = 1e10
    for epoch in range(args.epochs):
        t0 = time.time()
        train_loss, train_mae = train(train_loader, model, criterion, optimizer, epoch, normalizer)
        val_loss, val_mae = validate(val_loader, model, criterion, normalizer)
        if epoch >= args.swa_start:
            swa_model.update_parameters(model)
            swa_scheduler.step()
        else:
            scheduler.step()
        best_mae_error = min(val_mae, best_mae_error)
        print(f"Epoch {epoch}: train loss {train_loss:.4f} MAE {train_mae:.4f} | "
              f"val loss {val_loss:.4f} MAE {val_mae:.4f} | lr {optimizer.param_groups[0]['lr']:.4f} "
              f"({time.time() - t0:.1f}s)")

    torch.optim.swa_utils.update_bn(train_loader, swa_model)
    test_loss, test_mae = validate(test_loader, swa_model, criterion, normalizer)
    print(f"best val MAE {best_mae_error:.4f} | SWA model test MAE {test_mae:.4f}")


if __name__ == "__main__":
    main()
