"""Noise Conditional Score Network on 2-D toy data, after ermongroup/ncsn
(losses/dsm.py anneal_dsm_score_estimation, runners anneal_Langevin_dynamics).

A conditional MLP predicts the score of the data perturbed by Gaussian noise at one of L noise
levels (geometric from sigma_1 = 2.0 to sigma_L = 0.02); its output is divided by sigma as in
ncsnv2. Samples are drawn afterwards with
annealed Langevin dynamics. Data: a mixture of 4 Gaussians with unequal weights.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

N_SIGMAS = 10
BATCH = 128
EPOCHS = 20

centers = torch.tensor([[-2.0, -2.0], [-2.0, 2.0], [2.0, -2.0], [2.0, 2.0]])
weights = torch.tensor([0.4, 0.3, 0.2, 0.1])
comp = torch.multinomial(weights, 6400, replacement=True)
data = centers[comp] + 0.15 * torch.randn(6400, 2)
loader = DataLoader(TensorDataset(data), batch_size=BATCH, shuffle=True)

sigmas = torch.tensor(np.exp(np.linspace(np.log(2.0), np.log(0.02), N_SIGMAS))).float()


class ConditionalScoreNet(nn.Module):
    def __init__(self, n_sigmas, hidden=128):
        super().__init__()
        self.embed = nn.Embedding(n_sigmas, hidden)
        self.fc1 = nn.Linear(2, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 2)
        self.act = nn.Softplus()

    def forward(self, x, y):
        h = self.act(self.fc1(x) + self.embed(y))
        h = self.act(self.fc2(h) + self.embed(y))
        return self.fc3(h) / sigmas[y].view(-1, 1)


def anneal_dsm_score_estimation(scorenet, samples, labels, sigmas, anneal_power=2.):
    used_sigmas = sigmas[labels].view(samples.shape[0], *([1] * len(samples.shape[1:])))
    perturbed_samples = samples + torch.randn_like(samples) * used_sigmas
    target = - 1 / (used_sigmas ** 2) * (perturbed_samples - samples)
    scores = scorenet(perturbed_samples, labels)
    target = target.view(target.shape[0], -1)
    scores = scores.view(scores.shape[0], -1)
    loss = 1 / 2. * ((scores - target) ** 2).sum(dim=-1) * used_sigmas.squeeze() ** anneal_power

    return loss.mean(dim=0)


@torch.no_grad()
def anneal_Langevin_dynamics(x_mod, scorenet, sigmas, n_steps_each=50, step_lr=0.002):
    for c, sigma in enumerate(sigmas):
        labels = torch.ones(x_mod.shape[0], dtype=torch.long) * c
        step_size = step_lr * (sigma / sigmas[-1]) ** 2
        for s in range(n_steps_each):
            noise = torch.randn_like(x_mod) * torch.sqrt(step_size * 2)
            grad = scorenet(x_mod, labels)
            x_mod = x_mod + step_size * grad + noise
    return x_mod


@torch.no_grad()
def sample_stats(scorenet, n=1000):
    x = anneal_Langevin_dynamics(torch.rand(n, 2) * 8 - 4, scorenet, sigmas, step_lr=2e-5)
    d = torch.cdist(x, centers)
    near = d.min(1)
    ok = near.values < 0.5
    frac = torch.bincount(near.indices[ok], minlength=4).float() / n
    return ok.float().mean().item(), frac


score = ConditionalScoreNet(N_SIGMAS)
optimizer = optim.Adam(score.parameters(), lr=3e-3, weight_decay=0.000, betas=(0.9, 0.999), amsgrad=False)

ok, frac = sample_stats(score)
print(f"before training: samples within 0.5 of a mode {ok:.2f}, mode weights {[round(f, 2) for f in frac.tolist()]}")

step = 0
for epoch in range(EPOCHS):
    total, count = 0.0, 0
    for (X,) in loader:
        step += 1
        score.train()
        labels = torch.randint(0, len(sigmas), (X.shape[0],))
        loss = anneal_dsm_score_estimation(score, X, labels, sigmas, 2.0)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * X.shape[0]
        count += X.shape[0]
    print(f"epoch {epoch:2d} step {step:4d}  dsm loss {total / count:.4f}")

ok, frac = sample_stats(score)
print(f"after training: samples within 0.5 of a mode {ok:.2f}, mode weights {[round(f, 2) for f in frac.tolist()]}  "
      f"(true {weights.tolist()})")
