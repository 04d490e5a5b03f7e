"""Pedestrian trajectory forecasting with Social-STGCNN: every scene is a graph whose nodes are
the pedestrians and whose weighted adjacency (1 / distance between relative displacements,
normalised Laplacian) changes per frame; a spatio-temporal graph CNN encodes the 8 observed
frames and a time-extrapolator CNN predicts a bivariate Gaussian (mu_x, mu_y, sigma_x, sigma_y,
rho) of every pedestrian's displacement for the next 12 frames, trained with the bivariate
negative log-likelihood. As in the reference training script, graphs are fed one at a time and
the loss is accumulated over a mini-batch of scenes before each optimizer step.
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--obs_seq_len", type=int, default=8)
parser.add_argument("--pred_seq_len", type=int, default=12)
parser.add_argument("--n_stgcnn", type=int, default=1)
parser.add_argument("--n_txpcnn", type=int, default=5)
parser.add_argument("--kernel_size", type=int, default=3)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--num_epochs", type=int, default=5)
parser.add_argument("--clip_grad", type=float, default=None)
parser.add_argument("--lr", type=float, default=0.3)
args = parser.parse_args()

torch.manual_seed(0)
np.random.seed(0)


def anorm(p1, p2):
    norm = math.sqrt((p1[0] - p2[0]) ** 2 + (p1[1] - p2[1]) ** 2)
    if norm == 0:
        return 0
    return 1 / norm


def seq_to_graph(seq_rel):
    """seq_rel: (peds, 2, T) relative displacements -> V (T, peds, 2), A (T, peds, peds)."""
    n_peds, _, seq_len = seq_rel.shape
    V = np.zeros((seq_len, n_peds, 2))
    A = np.zeros((seq_len, n_peds, n_peds))
    for s in range(seq_len):
        step_rel = seq_rel[:, :, s]
        for h in range(n_peds):
            V[s, h, :] = step_rel[h]
            A[s, h, h] = 1
            for k in range(h + 1, n_peds):
                A[s, h, k] = A[s, k, h] = anorm(step_rel[h], step_rel[k])
        deg = A[s].sum(1)
        d_inv_sqrt = np.diag(deg ** -0.5)
        A[s] = d_inv_sqrt @ (np.diag(deg) - A[s]) @ d_inv_sqrt
    return torch.from_numpy(V).float(), torch.from_numpy(A).float()


class TrajectoryScenes(Dataset):
    """Synthetic crowd scenes (ETH/UCY-like): 2-6 pedestrians walking with individual speeds,
    headings and slow turns, some of them standing (waiting, chatting), positions sampled at
    2.5 fps, with annotation noise."""

    def __init__(self, n_scenes, seed):
        rng = np.random.default_rng(seed)
        total = args.obs_seq_len + args.pred_seq_len
        self.graphs = []
        for _ in range(n_scenes):
            n_peds = rng.integers(2, 7)
            heading = rng.uniform(0, 2 * np.pi, n_peds)
            speed = rng.uniform(0.2, 0.6, n_peds) * (rng.random(n_peds) > 0.25)
            turn = rng.normal(0, 0.05, n_peds)
            pos = np.zeros((n_peds, 2, total + 1))
            pos[:, :, 0] = rng.uniform(-5, 5, (n_peds, 2))
            for t in range(total):
                heading = heading + turn
                step = speed[:, None] * np.stack([np.cos(heading), np.sin(heading)], 1)
                pos[:, :, t + 1] = pos[:, :, t] + step + rng.normal(0, 0.01, (n_peds, 2))
            rel = np.diff(pos, axis=2)
            V_obs, A_obs = seq_to_graph(rel[:, :, :args.obs_seq_len])
            V_tr, _ = seq_to_graph(rel[:, :, args.obs_seq_len:])
            self.graphs.append((V_obs, A_obs, V_tr))

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, i):
        return self.graphs[i]


class ConvTemporalGraphical(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.kernel_size = kernel_size
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=(1, 1))

    def forward(self, x, A):
        x = self.conv(x)
        x = torch.einsum("nctv,tvw->nctw", (x, A))
        return x.contiguous(), A


class st_gcn(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        padding = ((kernel_size[0] - 1) // 2, 0)
        self.gcn = ConvTemporalGraphical(in_channels, out_channels, kernel_size[1])
        self.tcn = nn.Sequential(
            nn.BatchNorm2d(out_channels),
            nn.PReLU(),
            nn.Conv2d(out_channels, out_channels, (kernel_size[0], 1), (1, 1), padding),
            nn.BatchNorm2d(out_channels),
        )
        self.residual = nn.Sequential(nn.Conv2d(in_channels, out_channels, kernel_size=1), nn.BatchNorm2d(out_channels))
        self.prelu = nn.PReLU()

    def forward(self, x, A):
        res = self.residual(x)
        x, A = self.gcn(x, A)
        return self.prelu(self.tcn(x) + res), A


class social_stgcnn(nn.Module):
    def __init__(self, n_stgcnn=1, n_txpcnn=1, input_feat=2, output_feat=5, seq_len=8, pred_seq_len=12, kernel_size=3):
        super().__init__()
        self.n_stgcnn, self.n_txpcnn = n_stgcnn, n_txpcnn
        self.st_gcns = nn.ModuleList([st_gcn(input_feat, output_feat, (kernel_size, seq_len))])
        for _ in range(1, n_stgcnn):
            self.st_gcns.append(st_gcn(output_feat, output_feat, (kernel_size, seq_len)))
        self.tpcnns = nn.ModuleList([nn.Conv2d(seq_len, pred_seq_len, 3, padding=1)])
        for _ in range(1, n_txpcnn):
            self.tpcnns.append(nn.Conv2d(pred_seq_len, pred_seq_len, 3, padding=1))
        self.tpcnn_ouput = nn.Conv2d(pred_seq_len, pred_seq_len, 3, padding=1)
        self.prelus = nn.ModuleList([nn.PReLU() for _ in range(n_txpcnn)])

    def forward(self, v, a):
        for k in range(self.n_stgcnn):
            v, a = self.st_gcns[k](v, a)
        v = v.view(v.shape[0], v.shape[2], v.shape[1], v.shape[3])
        v = self.prelus[0](self.tpcnns[0](v))
        for k in range(1, self.n_txpcnn - 1):
            v = self.prelus[k](self.tpcnns[k](v)) + v
        v = self.tpcnn_ouput(v)
        v = v.view(v.shape[0], v.shape[2], v.shape[1], v.shape[3])
        return v, a


def bivariate_loss(V_pred, V_trgt):
    normx = V_trgt[:, :, 0] - V_pred[:, :, 0]
    normy = V_trgt[:, :, 1] - V_pred[:, :, 1]
    sx = torch.exp(V_pred[:, :, 2])
    sy = torch.exp(V_pred[:, :, 3])
    corr = torch.tanh(V_pred[:, :, 4])
    sxsy = sx * sy
    z = (normx / sx) ** 2 + (normy / sy) ** 2 - 2 * ((corr * normx * normy) / sxsy)
    negRho = 1 - corr ** 2
    result = torch.exp(-z / (2 * negRho))
    denom = 2 * np.pi * (sxsy * torch.sqrt(negRho))
    result = result / denom
    epsilon = 1e-20
    result = -torch.log(torch.clamp(result, min=epsilon))
    return torch.mean(result)


def graph_loss(V_pred, V_target):
    return bivariate_loss(V_pred, V_target)


def run_epoch(model, loader, optimizer=None):
    training = optimizer is not None
    model.train(training)
    loss_batch, batch_count, n_steps = 0.0, 0, 0
    turn_point = len(loader) - 1
    loss, is_fst_loss = None, True
    for cnt, (V_obs, A_obs, V_tr) in enumerate(loader):
        batch_count += 1
        with torch.set_grad_enabled(training):
            V_pred, _ = model(V_obs.permute(0, 3, 1, 2), A_obs.squeeze(0))
            V_pred = V_pred.permute(0, 2, 3, 1).squeeze(0)
            l = graph_loss(V_pred, V_tr.squeeze(0))
        loss = l if is_fst_loss else loss + l
        is_fst_loss = False
        if batch_count % args.batch_size == 0 or cnt == turn_point:
            loss = loss / args.batch_size
            is_fst_loss = True
            if training:
                optimizer.zero_grad()
                loss.backward()
                if args.clip_grad is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
                optimizer.step()
                n_steps += 1
            loss_batch += loss.item()
    return loss_batch / math.ceil(len(loader) / args.batch_size), n_steps


def main():
    loader_train = DataLoader(TrajectoryScenes(640, seed=1), batch_size=1, shuffle=True)
    loader_val = DataLoader(TrajectoryScenes(128, seed=2), batch_size=1)
    model = social_stgcnn(n_stgcnn=args.n_stgcnn, n_txpcnn=args.n_txpcnn, output_feat=5,
                          seq_len=args.obs_seq_len, kernel_size=args.kernel_size, pred_seq_len=args.pred_seq_len)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    steps = 0
    for epoch in range(args.num_epochs):
        train_loss, n = run_epoch(model, loader_train, optimizer)
        steps += n
        val_loss, _ = run_epoch(model, loader_val)
        print(f"TRAIN: Epoch: {epoch} steps: {steps} Loss: {train_loss:.4f}   VALD: Loss: {val_loss:.4f}")


if __name__ == "__main__":
    main()
