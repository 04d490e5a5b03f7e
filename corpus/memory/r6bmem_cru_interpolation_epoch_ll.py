"""Recurrent Kalman network (RKN / CRU-style) for irregularly sampled multivariate time series.

Each series is encoded step by step into a latent observation with an uncertainty, a Kalman
cell with factorised covariance (upper / lower / side) filters the latent state over time,
and a decoder maps the posterior state back to a Gaussian over the observed channels.
Task: interpolation - half of the time points are hidden from the filter and the model is
scored on all of them with a Gaussian negative log-likelihood.

Data: synthetic 3-channel sensor series (sums of sinusoids with random phases and noise).
"""
import argparse
import math
from datetime import datetime

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser('RKN interpolation')
parser.add_argument('--epochs', type=int, default=1)
parser.add_argument('--lr', type=float, default=5e-3)
parser.add_argument('--lr-decay', type=float, default=1.0)
parser.add_argument('--batch-size', type=int, default=8)
parser.add_argument('--latent-obs-dim', type=int, default=8)
parser.add_argument('--num-basis', type=int, default=8)
parser.add_argument('--seq-len', type=int, default=20)
parser.add_argument('--obs-keep', type=float, default=0.5)
parser.add_argument('--grad-clip', action='store_true', default=True)
parser.add_argument('--log-every', type=int, default=20)
parser.add_argument('--seed', type=int, default=0)


def rmse(target, predicted, mask):
    return torch.sqrt(torch.sum(mask * torch.square(target - predicted)) / torch.sum(mask))


def mse(target, predicted, mask):
    return torch.sum(mask * torch.square(target - predicted)) / torch.sum(mask)


def GaussianNegLogLik(targets, pred_mean, pred_variance, mask):
    pred_variance = torch.clamp(pred_variance, min=1e-6)
    const = np.log(2 * np.pi)
    nll = mask * (torch.log(pred_variance) + torch.square(pred_mean - targets) / pred_variance + const)
    per_step = 0.5 * torch.sum(nll, -1)
    return torch.sum(per_step) / torch.clamp(torch.sum(mask[..., 0]), min=1.0)


def make_series(n, T, D=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 4 * math.pi, T)
    freq = 0.5 + torch.rand(n, 1, D, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, D, generator=g)
    amp = 0.5 + torch.rand(n, 1, D, generator=g)
    clean = amp * torch.sin(freq * t[None, :, None] + phase)
    obs = clean + 0.05 * torch.randn(n, T, D, generator=g)
    return obs.double(), clean.double()


class Encoder(nn.Module):
    def __init__(self, in_dim, lod):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, 2 * lod))
        self.lod = lod

    def forward(self, x):
        h = self.net(x)
        mean, var = h[..., :self.lod], h[..., self.lod:]
        return mean, nn.functional.softplus(var) + 1e-4


class Decoder(nn.Module):
    def __init__(self, lsd, out_dim):
        super().__init__()
        self.mean_net = nn.Sequential(nn.Linear(lsd, 32), nn.ReLU(), nn.Linear(32, out_dim))
        self.var_net = nn.Sequential(nn.Linear(lsd + lsd, 32), nn.ReLU(), nn.Linear(32, out_dim))

    def forward(self, post_mean, post_cov):
        var_in = torch.cat([post_mean, post_cov[0], post_cov[1]], -1)
        return self.mean_net(post_mean), nn.functional.softplus(self.var_net(var_in)) + 1e-4


def bmv(mat, vec):
    return torch.bmm(mat, vec[..., None])[..., 0]


def dadat(a, diag_mat):
    return bmv(a ** 2, diag_mat)


def dadbt(a, diag_mat, b):
    return bmv(a * b, diag_mat)


class RKNCell(nn.Module):
    def __init__(self, lod, num_basis):
        super().__init__()
        self._lod = lod
        self._num_basis = num_basis
        eye = torch.eye(lod, dtype=torch.float64)
        self._tm_11_basis = nn.Parameter(eye.repeat(num_basis, 1, 1) * 0.9)
        self._tm_12_basis = nn.Parameter(0.1 * eye.repeat(num_basis, 1, 1))
        self._tm_21_basis = nn.Parameter(-0.1 * eye.repeat(num_basis, 1, 1))
        self._tm_22_basis = nn.Parameter(eye.repeat(num_basis, 1, 1) * 0.9)
        self._coefficient_net = nn.Sequential(nn.Linear(2 * lod, num_basis), nn.Softmax(dim=-1))
        self._log_transition_noise = nn.Parameter(torch.full((1, 2 * lod), -2.0, dtype=torch.float64))

    def get_transition_model(self, post_mean):
        coeff = self._coefficient_net(post_mean)[..., None, None]
        tm11 = (coeff * self._tm_11_basis).sum(1)
        tm12 = (coeff * self._tm_12_basis).sum(1)
        tm21 = (coeff * self._tm_21_basis).sum(1)
        tm22 = (coeff * self._tm_22_basis).sum(1)
        trans_cov = nn.functional.softplus(self._log_transition_noise)
        return [tm11, tm12, tm21, tm22], trans_cov

    def _update(self, prior_mean, prior_cov, obs_mean, obs_var, obs_valid):
        cov_u, cov_l, cov_s = prior_cov
        denominator = cov_u + obs_var
        q_upper = cov_u / denominator
        q_lower = cov_s / denominator
        residual = obs_mean - prior_mean[:, :self._lod]
        new_mean = prior_mean + torch.cat([q_upper * residual, q_lower * residual], -1)
        covar_factor = 1 - q_upper
        new_covar_upper = covar_factor * cov_u
        new_covar_lower = cov_l - q_lower * cov_s
        new_covar_side = covar_factor * cov_s
        obs_valid = obs_valid[..., None]
        masked_mean = new_mean.where(obs_valid, prior_mean)
        masked_covar_upper = new_covar_upper.where(obs_valid, cov_u)
        masked_covar_lower = new_covar_lower.where(obs_valid, cov_l)
        masked_covar_side = new_covar_side.where(obs_valid, cov_s)
        return masked_mean, [masked_covar_upper, masked_covar_lower, masked_covar_side]

    def _predict(self, post_mean, post_covar):
        [tm11, tm12, tm21, tm22], trans_covar = self.get_transition_model(post_mean)
        trans_covar_upper = trans_covar[..., :self._lod]
        trans_covar_lower = trans_covar[..., self._lod:]
        mu = post_mean[:, :self._lod]
        ml = post_mean[:, self._lod:]
        nmu = bmv(tm11, mu) + bmv(tm12, ml)
        nml = bmv(tm21, mu) + bmv(tm22, ml)
        cu, cl, cs = post_covar
        ncu = dadat(tm11, cu) + 2.0 * dadbt(tm11, cs, tm12) + dadat(tm12, cl) + trans_covar_upper
        ncl = dadat(tm21, cu) + 2.0 * dadbt(tm21, cs, tm22) + dadat(tm22, cl) + trans_covar_lower
        ncs = dadbt(tm21, cu, tm11) + dadbt(tm22, cs, tm11) + dadbt(tm21, cs, tm12) + dadbt(tm22, cl, tm12)
        return torch.cat([nmu, nml], dim=-1), [ncu, ncl, ncs]

    def forward(self, prior_mean, prior_cov, obs, obs_var, obs_valid):
        post_mean, post_cov = self._update(prior_mean, prior_cov, obs, obs_var, obs_valid)
        next_prior_mean, next_prior_cov = self._predict(post_mean, post_cov)
        return post_mean, post_cov, next_prior_mean, next_prior_cov


class RKN(nn.Module):
    def __init__(self, args, target_dim=3):
        super().__init__()
        self.args = args
        self._lod = args.latent_obs_dim
        self._lsd = 2 * self._lod
        self._enc = Encoder(target_dim, self._lod).double()
        self._cell = RKNCell(self._lod, args.num_basis).double()
        self._dec = Decoder(self._lsd, target_dim).double()
        self._initial_mean = torch.zeros(1, self._lsd, dtype=torch.float64)
        self._log_icu = nn.Parameter(torch.zeros(1, self._lod, dtype=torch.float64))
        self._log_icl = nn.Parameter(torch.zeros(1, self._lod, dtype=torch.float64))

    def forward(self, obs_batch, obs_valid):
        y, y_var = self._enc(obs_batch)
        B, T = y.shape[:2]
        icu = nn.functional.softplus(self._log_icu).expand(B, -1)
        icl = nn.functional.softplus(self._log_icl).expand(B, -1)
        prior_mean = self._initial_mean.expand(B, -1)
        prior_cov = [icu, icl, torch.zeros_like(icu)]
        post_means, post_cu, post_cl = [], [], []
        for i in range(T):
            post_mean, post_cov, prior_mean, prior_cov = self._cell(
                prior_mean, prior_cov, y[:, i], y_var[:, i], obs_valid[:, i])
            post_means.append(post_mean)
            post_cu.append(post_cov[0])
            post_cl.append(post_cov[1])
        post_means = torch.stack(post_means, 1)
        post_covs = [torch.stack(post_cu, 1), torch.stack(post_cl, 1)]
        return self._dec(post_means, post_covs)

    def interpolation(self, data):
        obs, truth, obs_valid = data
        mask_truth = torch.ones_like(truth)
        obs = obs * obs_valid[..., None]
        output_mean, output_var = self.forward(obs, obs_valid)
        loss = GaussianNegLogLik(truth, output_mean, output_var, mask=mask_truth)
        mask_imput = (~obs_valid[..., None]) * mask_truth
        imput_loss = GaussianNegLogLik(truth, output_mean, output_var, mask=mask_imput)
        imput_mse = mse(truth, output_mean, mask=mask_imput)
        return loss, output_mean, output_var, truth, mask_truth, imput_loss, imput_mse

    def train_epoch(self, dl, optimizer):
        epoch_ll = 0
        epoch_rmse = 0
        epoch_mse = 0

        for i, data in enumerate(dl):
            loss, output_mean, output_var, truth, mask_truth, imput_loss, imput_mse = self.interpolation(data)

            if torch.any(torch.isnan(loss)):
                print('--NAN in loss')

            optimizer.zero_grad()
            loss.backward()
            if self.args.grad_clip:
                nn.utils.clip_grad_norm_(self.parameters(), 1)
            optimizer.step()

            epoch_ll += loss
            epoch_rmse += rmse(truth, output_mean, mask_truth).item()
            epoch_mse += mse(truth, output_mean, mask_truth).item()

            if i % self.args.log_every == 0:
                print(f'  batch {i:4d}  nll {loss.item():.4f}  imput mse {imput_mse.item():.4f}', flush=True)

        return epoch_ll / (i + 1), epoch_rmse / (i + 1), epoch_mse / (i + 1)

    @torch.no_grad()
    def eval_epoch(self, dl):
        ll, se, imput_ll, imput_se, n = 0.0, 0.0, 0.0, 0.0, 0
        for data in dl:
            loss, output_mean, _, truth, mask_truth, imput_loss, imput_mse = self.interpolation(data)
            ll += loss.item()
            se += mse(truth, output_mean, mask_truth).item()
            imput_ll += imput_loss.item()
            imput_se += imput_mse.item()
            n += 1
        return ll / n, math.sqrt(se / n), imput_ll / n, imput_se / n

    def train_model(self, train_dl, valid_dl):
        optimizer = torch.optim.Adam(self.parameters(), self.args.lr)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda epoch: self.args.lr_decay ** epoch)
        for epoch in range(self.args.epochs):
            start = datetime.now()
            print(f'Epoch {epoch} starts: {start.strftime("%H:%M:%S")}')
            train_ll, train_rmse, train_mse = self.train_epoch(train_dl, optimizer)
            valid_ll, valid_rmse, valid_imput_ll, valid_imput_mse = self.eval_epoch(valid_dl)
            scheduler.step()
            print(f'Epoch {epoch}: train nll {float(train_ll):.4f} rmse {train_rmse:.4f} | '
                  f'valid nll {valid_ll:.4f} rmse {valid_rmse:.4f} '
                  f'imput nll {valid_imput_ll:.4f} imput mse {valid_imput_mse:.4f} '
                  f'({(datetime.now() - start).total_seconds():.1f}s)')


def main():
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)

    n_train, n_valid = 160 * args.batch_size, 64
    obs, clean = make_series(n_train + n_valid, args.seq_len, seed=args.seed)
    keep = torch.rand(n_train + n_valid, args.seq_len, generator=torch.Generator().manual_seed(1)) < args.obs_keep
    keep[:, 0] = True
    train_ds = TensorDataset(obs[:n_train], clean[:n_train], keep[:n_train])
    valid_ds = TensorDataset(obs[n_train:], clean[n_train:], keep[n_train:])
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
    valid_dl = DataLoader(valid_ds, batch_size=32)

    model = RKN(args)
    print(f'{n_train} training series, {len(train_dl)} batches per epoch, '
          f'{sum(p.numel() for p in model.parameters())} parameters')
    model.train_model(train_dl, valid_dl)


if __name__ == '__main__':
    main()
