"""LFADS-style sequential VAE on deconvolved two-photon calcium traces.

A bidirectional GRU encodes each trial into an initial condition g0, a GRU generator
unrolls the latent dynamics, low-dimensional factors are read out to the parameters of
a Gamma observation model per neuron and time bin (as in lfads-torch's Gamma recon).
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader, random_split

torch.manual_seed(0)

N_NEURONS = 40
N_BINS = 35
N_TRIALS = 480
G0_DIM = 16
GEN_DIM = 48
FAC_DIM = 8


def simulate_deconvolved_session(n_trials, n_bins, n_neurons, seed=1):
    g = torch.Generator().manual_seed(seed)
    t = torch.linspace(0, 1, n_bins)
    phase = torch.rand(n_trials, 1, generator=g) * 2 * math.pi
    freq = 1.0 + torch.rand(n_trials, 1, generator=g) * 2.0
    latents = torch.stack([torch.sin(2 * math.pi * freq * t + phase),
                           torch.cos(2 * math.pi * freq * t + phase),
                           torch.sin(math.pi * freq * t + 0.5 * phase)], -1)
    loading = torch.randn(3, n_neurons, generator=g) * 0.8
    rate = torch.exp(latents @ loading - 0.5)
    shape = 2.0
    dist = torch.distributions.Gamma(torch.full_like(rate, shape), shape / rate)
    dff = dist.sample()
    # deconvolution (OASIS-style) zeroes out events below the noise floor
    dff = torch.where(dff < 0.15, torch.zeros_like(dff), dff)
    return dff


class CalciumTrials(Dataset):
    def __init__(self, dff):
        self.dff = dff

    def __len__(self):
        return self.dff.shape[0]

    def __getitem__(self, i):
        return self.dff[i]


class LFADS(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.GRU(N_NEURONS, 32, batch_first=True, bidirectional=True)
        self.g0_post = nn.Linear(64, 2 * G0_DIM)
        self.g0_to_gen = nn.Linear(G0_DIM, GEN_DIM)
        self.generator = nn.GRUCell(1, GEN_DIM)
        self.factors = nn.Linear(GEN_DIM, FAC_DIM, bias=False)
        self.readout = nn.Linear(FAC_DIM, 2 * N_NEURONS)

    def forward(self, x):
        _, h = self.encoder(x)
        h = torch.cat([h[0], h[1]], -1)
        mean, logvar = self.g0_post(h).chunk(2, -1)
        g0 = mean + torch.randn_like(mean) * torch.exp(0.5 * logvar)
        gen = torch.tanh(self.g0_to_gen(g0))
        zeros = x.new_zeros(x.shape[0], 1)
        outs = []
        for _ in range(x.shape[1]):
            gen = self.generator(zeros, gen)
            outs.append(self.readout(self.factors(gen)))
        params = torch.stack(outs, 1)
        logalphas, logbetas = params.chunk(2, -1)
        return logalphas, logbetas, mean, logvar


def gamma_recon_loss(data, logalphas, logbetas):
    alphas = torch.exp(logalphas)
    log_prob = (alphas * logbetas + (alphas - 1) * torch.log(data)
                - torch.exp(logbetas) * data - torch.lgamma(alphas))
    return -log_prob.sum(-1).mean()


def kl_g0(mean, logvar):
    return 0.5 * (mean.pow(2) + logvar.exp() - 1 - logvar).sum(-1).mean()


dff = simulate_deconvolved_session(N_TRIALS, N_BINS, N_NEURONS)
print(f"session: {dff.shape[0]} trials x {dff.shape[1]} bins x {dff.shape[2]} neurons, "
      f"mean dF/F {dff.mean():.3f}")
train_set, valid_set = random_split(CalciumTrials(dff), [400, 80],
                                    generator=torch.Generator().manual_seed(0))
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
valid_loader = DataLoader(valid_set, batch_size=80)

model = LFADS()
optimizer = torch.optim.Adam(model.parameters(), lr=4e-3)

step = 0
for epoch in range(12):
    model.train()
    running = 0.0
    for batch in train_loader:
        logalphas, logbetas, mean, logvar = model(batch)
        recon = gamma_recon_loss(batch, logalphas, logbetas)
        kl = kl_g0(mean, logvar)
        loss = recon + min(1.0, step / 100) * kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
    model.eval()
    with torch.no_grad():
        for batch in valid_loader:
            logalphas, logbetas, mean, logvar = model(batch)
            val_recon = gamma_recon_loss(batch, logalphas, logbetas).item()
            pred_mean = torch.exp(logalphas - logbetas)
            r2 = 1 - ((pred_mean - batch) ** 2).sum() / ((batch - batch.mean()) ** 2).sum()
    print(f"epoch {epoch:2d} step {step:4d} train loss {running / len(train_loader):9.3f} "
          f"valid recon {val_recon:9.3f} valid R2 {r2.item():.3f}")
