"""Inverse protein folding: predict the amino acid of every residue from its backbone.

A PiFold / ProDesign style experiment on synthetic CATH-like chains: a featurizer turns a batch
of variable-length chains into one flat graph of residues (k nearest neighbours inside each
chain), a small message-passing network scores the 20 residue types, and the model is trained
with Adam and a one-cycle learning-rate schedule stepped after every batch.
"""
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def create_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", default=111, type=int)
    parser.add_argument("--batch_size", default=8, type=int)
    parser.add_argument("--num_workers", default=0, type=int)
    parser.add_argument("--epoch", default=3, type=int)
    parser.add_argument("--lr", default=0.001, type=float)
    parser.add_argument("--hidden_dim", default=32, type=int)
    parser.add_argument("--k_neighbors", default=10, type=int)
    parser.add_argument("--num_encoder_layers", default=2, type=int)
    return parser.parse_args()


def set_seed(seed):
    np.random.seed(seed)
    torch.manual_seed(seed)


class CATHLikeDataset(Dataset):
    """Backbone CA traces with a residue type that depends on the local geometry."""

    def __init__(self, n_chains, seed):
        rng = np.random.RandomState(seed)
        self.data = []
        for _ in range(n_chains):
            length = rng.randint(40, 110)
            # helix / strand / loop segments with their own bond angle and twist
            ss = np.repeat(rng.randint(0, 3, size=length // 8 + 1), 8)[:length]
            tilt = np.array([0.90, 0.25, 0.60])[ss] + 0.10 * rng.randn(length)
            twist = np.array([1.75, 3.14, 1.20])[ss] + 0.30 * rng.randn(length)
            phi = np.cumsum(twist)
            steps = np.stack([np.cos(tilt), np.sin(tilt) * np.cos(phi),
                              np.sin(tilt) * np.sin(phi)], axis=1)
            coords = 3.8 * np.cumsum(steps, axis=0)
            bend = np.arccos(np.clip((steps[1:] * steps[:-1]).sum(1), -1, 1))
            bend = np.concatenate([bend[:1], bend])
            base = np.array([0, 7, 14])[ss]
            seq = (base + np.clip(bend * 3, 0, 6).astype(int)
                   + (rng.rand(length) < 0.15) * rng.randint(0, 20, size=length)) % 20
            self.data.append({"X": coords.astype(np.float32), "seq": seq.astype(np.int64)})

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]


def featurize(batch, k_neighbors=10):
    """Flatten a batch of chains into one residue graph."""
    X, S, E_idx, batch_id = [], [], [], []
    offset = 0
    for b, item in enumerate(batch):
        x = torch.from_numpy(item["X"])
        n = x.shape[0]
        d = torch.cdist(x, x)
        k = min(k_neighbors, n)
        nbr = d.topk(k, dim=-1, largest=False).indices
        if k < k_neighbors:
            nbr = torch.cat([nbr, nbr[:, :1].expand(n, k_neighbors - k)], dim=1)
        X.append(x)
        S.append(torch.from_numpy(item["seq"]))
        E_idx.append(nbr + offset)
        batch_id.append(torch.full((n,), b, dtype=torch.long))
        offset += n
    return torch.cat(X), torch.cat(S), torch.cat(E_idx), torch.cat(batch_id)


def node_features(X, batch_id):
    prev = torch.roll(X, 1, 0)
    nxt = torch.roll(X, -1, 0)
    same_prev = (torch.roll(batch_id, 1, 0) == batch_id).float().unsqueeze(-1)
    same_next = (torch.roll(batch_id, -1, 0) == batch_id).float().unsqueeze(-1)
    u = F.normalize(X - prev, dim=-1) * same_prev
    v = F.normalize(nxt - X, dim=-1) * same_next
    cos_angle = (u * v).sum(-1, keepdim=True)
    cross = torch.cross(u, v, dim=-1)
    return torch.cat([cos_angle, cross, same_prev, same_next], dim=-1)


def edge_features(X, E_idx, num_rbf=16):
    d = (X.unsqueeze(1) - X[E_idx]).norm(dim=-1, keepdim=True)
    mu = torch.linspace(2.0, 22.0, num_rbf)
    return torch.exp(-((d - mu) / 1.25) ** 2)


class MPNNLayer(nn.Module):
    def __init__(self, hidden, edge_in):
        super().__init__()
        self.message = nn.Sequential(nn.Linear(2 * hidden + edge_in, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden))
        self.update = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU())
        self.norm = nn.LayerNorm(hidden)

    def forward(self, h_V, h_E, E_idx):
        h_nbr = h_V[E_idx]
        h_self = h_V.unsqueeze(1).expand_as(h_nbr)
        m = self.message(torch.cat([h_self, h_nbr, h_E], dim=-1)).mean(1)
        return self.norm(h_V + self.update(torch.cat([h_V, m], dim=-1)))


class ProDesign_Model(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.node_in = nn.Linear(6, args.hidden_dim)
        self.layers = nn.ModuleList(MPNNLayer(args.hidden_dim, 16)
                                    for _ in range(args.num_encoder_layers))
        self.readout = nn.Linear(args.hidden_dim, 20)

    def forward(self, X, E_idx, batch_id):
        h_V = self.node_in(node_features(X, batch_id))
        h_E = edge_features(X, E_idx)
        for layer in self.layers:
            h_V = layer(h_V, h_E, E_idx)
        return F.log_softmax(self.readout(h_V), dim=-1)


def get_optim_scheduler(lr, epoch, model, steps_per_epoch):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr,
                                                    steps_per_epoch=steps_per_epoch, epochs=epoch)
    return optimizer, scheduler


class ProDesign:
    def __init__(self, args, steps_per_epoch):
        self.args = args
        self.model = ProDesign_Model(args)
        self.criterion = nn.NLLLoss()
        self.optimizer, self.scheduler = get_optim_scheduler(args.lr, args.epoch, self.model,
                                                             steps_per_epoch)

    def train_one_epoch(self, train_loader):
        self.model.train()
        train_sum, train_weights = 0.0, 0.0
        for step_idx, (X, S, E_idx, batch_id) in enumerate(train_loader):
            self.optimizer.zero_grad()
            log_probs = self.model(X, E_idx, batch_id)
            loss = self.criterion(log_probs, S)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1)
            self.optimizer.step()
            self.scheduler.step()

            train_sum += loss.item() * S.numel()
            train_weights += S.numel()
            if step_idx % 20 == 0:
                print("  step {:3d}  train loss: {:.4f}  lr: {:.2e}".format(
                    step_idx, loss.item(), self.scheduler.get_last_lr()[0]))
        train_loss = train_sum / train_weights
        return train_loss, np.exp(train_loss)

    @torch.no_grad()
    def valid_one_epoch(self, valid_loader):
        self.model.eval()
        valid_sum, valid_weights, correct = 0.0, 0.0, 0.0
        for X, S, E_idx, batch_id in valid_loader:
            log_probs = self.model(X, E_idx, batch_id)
            valid_sum += self.criterion(log_probs, S).item() * S.numel()
            valid_weights += S.numel()
            correct += (log_probs.argmax(-1) == S).sum().item()
        valid_loss = valid_sum / valid_weights
        return valid_loss, np.exp(valid_loss), correct / valid_weights


class Exp:
    def __init__(self, args):
        self.args = args
        set_seed(args.seed)
        self._get_data()
        self._build_method()

    def _get_data(self):
        collate = lambda b: featurize(b, self.args.k_neighbors)
        self.train_set = CATHLikeDataset(360, seed=1)
        self.valid_set = CATHLikeDataset(48, seed=2)
        self.train_loader = DataLoader(self.train_set, batch_size=self.args.batch_size, shuffle=True,
                                       num_workers=self.args.num_workers, collate_fn=collate)
        self.valid_loader = DataLoader(self.valid_set, batch_size=self.args.batch_size,
                                       shuffle=False, collate_fn=collate)

    def _build_method(self):
        steps_per_epoch = 30
        self.method = ProDesign(self.args, steps_per_epoch)

    def train(self):
        for epoch in range(self.args.epoch):
            train_loss, train_perplexity = self.method.train_one_epoch(self.train_loader)
            valid_loss, valid_perplexity, valid_rec = self.method.valid_one_epoch(self.valid_loader)
            print("Epoch: {0}, Train Loss: {1:.4f} Train Perp: {2:.4f} Valid Loss: {3:.4f} "
                  "Valid Perp: {4:.4f} Valid Rec: {5:.3f}".format(
                      epoch + 1, train_loss, train_perplexity, valid_loss, valid_perplexity,
                      valid_rec))


if __name__ == "__main__":
    args = create_parser()
    print(vars(args))
    exp = Exp(args)
    print(">>>>>>>>>>>>>>>>>>>>>>>>>> training <<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<")
    exp.train()
