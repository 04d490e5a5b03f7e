"""Bayesian MLP sampled with Stochastic Gradient Langevin Dynamics, following
JavierAntoran/Bayesian-Neural-Networks (src/Stochastic_Gradient_Langevin_Dynamics: the SGLD
optimizer built from SGD with weight decay 1/prior_sig**2 and Gaussian noise of std 1/sqrt(lr)
added inside the lr-scaled update, and Net_langevin.fit which multiplies the mean cross-entropy by
N_train so the minibatch loss estimates the whole data set's negative log-likelihood). After a
burn-in, a copy of the weights is saved every few epochs and test predictions average the saved
samples. Data: synthetic 20-d five-class Gaussian clusters with label noise.
"""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer, required
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(42)


class SGLD(Optimizer):
    def __init__(self, params, lr=required, norm_sigma=0, addnoise=True):
        weight_decay = 1 / (norm_sigma ** 2)
        defaults = dict(lr=lr, weight_decay=weight_decay, addnoise=addnoise)
        super(SGLD, self).__init__(params, defaults)

    def step(self):
        loss = None
        for group in self.param_groups:
            weight_decay = group['weight_decay']
            for p in group['params']:
                if p.grad is None:
                    continue
                d_p = p.grad.data
                if weight_decay != 0:
                    d_p.add_(p.data, alpha=weight_decay)
                if group['addnoise']:
                    langevin_noise = p.data.new(p.data.size()).normal_(mean=0, std=1) / np.sqrt(group['lr'])
                    p.data.add_(0.5 * d_p + langevin_noise, alpha=-group['lr'])
                else:
                    p.data.add_(0.5 * d_p, alpha=-group['lr'])
        return loss


class Linear_2L(nn.Module):
    def __init__(self, input_dim, output_dim, n_hid):
        super(Linear_2L, self).__init__()
        self.input_dim = input_dim
        self.fc1 = nn.Linear(input_dim, n_hid)
        self.fc2 = nn.Linear(n_hid, n_hid)
        self.fc3 = nn.Linear(n_hid, output_dim)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        x = x.view(-1, self.input_dim)
        x = self.act(self.fc1(x))
        x = self.act(self.fc2(x))
        return self.fc3(x)


def make_data(n, g):
    centers = torch.randn(5, 20, generator=torch.Generator().manual_seed(7)) * 1.2
    y = torch.randint(0, 5, (n,), generator=g)
    x = centers[y] + torch.randn(n, 20, generator=g)
    flip = torch.rand(n, generator=g) < 0.1
    y = torch.where(flip, torch.randint(0, 5, (n,), generator=g), y)
    return x, y


g = torch.Generator().manual_seed(0)
xtr, ytr = make_data(2000, g)
xte, yte = make_data(1000, g)
N_train = len(xtr)
trainloader = DataLoader(TensorDataset(xtr, ytr), batch_size=100, shuffle=True)

model = Linear_2L(input_dim=20, output_dim=5, n_hid=200)
optimizer = SGLD(params=model.parameters(), lr=2e-5, norm_sigma=0.2, addnoise=True)

burn_in, sim_steps, max_samples = 4, 2, 10
weight_set_samples = []


def sample_eval(x, y):
    out = x.new(len(weight_set_samples), x.shape[0], 5)
    current = copy.deepcopy(model.state_dict())
    with torch.no_grad():
        for idx, weight_dict in enumerate(weight_set_samples):
            model.load_state_dict(weight_dict)
            out[idx] = model(x)
    model.load_state_dict(current)
    mean_out = F.softmax(out, dim=2).mean(dim=0)
    loss = F.nll_loss(torch.log(mean_out), y, reduction='mean')
    err = mean_out.argmax(1).ne(y).float().mean()
    return loss.item(), err.item()


for epoch in range(20):
    nb_samples, loss_sum, err_sum = 0, 0.0, 0
    for x, y in trainloader:
        optimizer.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y, reduction='mean')
        loss = loss * N_train
        loss.backward()
        optimizer.step()
        loss_sum += loss.item() * x.shape[0]
        err_sum += out.argmax(1).ne(y).sum().item()
        nb_samples += len(x)
    with torch.no_grad():
        te_out = model(xte)
        te_loss = F.cross_entropy(te_out, yte).item()
        te_err = te_out.argmax(1).ne(yte).float().mean().item()
    print("it %d/20, Jtr_pred = %.1f, err = %.3f | test nll %.3f err %.3f"
          % (epoch, loss_sum / nb_samples, err_sum / nb_samples, te_loss, te_err))
    if epoch > burn_in and epoch % sim_steps == 0:
        if len(weight_set_samples) >= max_samples:
            weight_set_samples.pop(0)
        weight_set_samples.append(copy.deepcopy(model.state_dict()))

ens_loss, ens_err = sample_eval(xte, yte)
print("posterior ensemble of %d samples: test nll %.3f err %.3f" % (len(weight_set_samples), ens_loss, ens_err))
