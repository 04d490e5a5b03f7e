"""Amortized clustering with a Set Transformer (ISAB encoder, PMA decoder), after juho-lee/set_transformer
run.py: each training example is a whole 2-D data set drawn from a random mixture of 4 Gaussians,
and the network outputs the mixture parameters; the loss is the negative log-likelihood of the set."""
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)


class MAB(nn.Module):
    def __init__(self, dim_Q, dim_K, dim_V, num_heads, ln=False):
        super(MAB, self).__init__()
        self.dim_V = dim_V
        self.num_heads = num_heads
        self.fc_q = nn.Linear(dim_Q, dim_V)
        self.fc_k = nn.Linear(dim_K, dim_V)
        self.fc_v = nn.Linear(dim_K, dim_V)
        if ln:
            self.ln0 = nn.LayerNorm(dim_V)
            self.ln1 = nn.LayerNorm(dim_V)
        self.fc_o = nn.Linear(dim_V, dim_V)

    def forward(self, Q, K):
        Q = self.fc_q(Q)
        K, V = self.fc_k(K), self.fc_v(K)

        dim_split = self.dim_V // self.num_heads
        Q_ = torch.cat(Q.split(dim_split, 2), 0)
        K_ = torch.cat(K.split(dim_split, 2), 0)
        V_ = torch.cat(V.split(dim_split, 2), 0)

        A = torch.softmax(Q_.bmm(K_.transpose(1, 2)) / math.sqrt(self.dim_V), 2)
        O = torch.cat((Q_ + A.bmm(V_)).split(Q.size(0), 0), 2)
        O = O if getattr(self, "ln0", None) is None else self.ln0(O)
        O = O + F.relu(self.fc_o(O))
        O = O if getattr(self, "ln1", None) is None else self.ln1(O)
        return O


class SAB(nn.Module):
    def __init__(self, dim_in, dim_out, num_heads, ln=False):
        super(SAB, self).__init__()
        self.mab = MAB(dim_in, dim_in, dim_out, num_heads, ln=ln)

    def forward(self, X):
        return self.mab(X, X)


class ISAB(nn.Module):
    def __init__(self, dim_in, dim_out, num_heads, num_inds, ln=False):
        super(ISAB, self).__init__()
        self.I = nn.Parameter(torch.Tensor(1, num_inds, dim_out))
        nn.init.xavier_uniform_(self.I)
        self.mab0 = MAB(dim_out, dim_in, dim_out, num_heads, ln=ln)
        self.mab1 = MAB(dim_in, dim_out, dim_out, num_heads, ln=ln)

    def forward(self, X):
        H = self.mab0(self.I.repeat(X.size(0), 1, 1), X)
        return self.mab1(X, H)


class PMA(nn.Module):
    def __init__(self, dim, num_heads, num_seeds, ln=False):
        super(PMA, self).__init__()
        self.S = nn.Parameter(torch.Tensor(1, num_seeds, dim))
        nn.init.xavier_uniform_(self.S)
        self.mab = MAB(dim, dim, dim, num_heads, ln=ln)

    def forward(self, X):
        return self.mab(self.S.repeat(X.size(0), 1, 1), X)


class SetTransformer(nn.Module):
    def __init__(self, dim_input, num_outputs, dim_output, num_inds=16, dim_hidden=64, num_heads=4, ln=False):
        super(SetTransformer, self).__init__()
        self.enc = nn.Sequential(
            ISAB(dim_input, dim_hidden, num_heads, num_inds, ln=ln),
            ISAB(dim_hidden, dim_hidden, num_heads, num_inds, ln=ln),
        )
        self.dec = nn.Sequential(
            PMA(dim_hidden, num_heads, num_outputs, ln=ln),
            SAB(dim_hidden, dim_hidden, num_heads, ln=ln),
            SAB(dim_hidden, dim_hidden, num_heads, ln=ln),
            nn.Linear(dim_hidden, dim_output),
        )

    def forward(self, X):
        return self.dec(self.enc(X))


class MultivariateNormalDiag:
    def __init__(self, dim):
        self.dim = dim

    def sample(self, B, K, labels):
        N = labels.shape[-1]
        device = labels.device
        mu = -4 + 8 * torch.rand(B, K, self.dim).to(device)
        sigma = 0.3 * torch.ones(B, K, self.dim).to(device)
        eps = torch.randn(B, N, self.dim).to(device)
        rlabels = labels.unsqueeze(-1).repeat(1, 1, self.dim)
        X = torch.gather(mu, 1, rlabels) + eps * torch.gather(sigma, 1, rlabels)
        return X, (mu, sigma)

    def log_prob(self, X, params):
        mu, sigma = params
        dim = self.dim
        X = X.unsqueeze(2)
        mu = mu.unsqueeze(1)
        sigma = sigma.unsqueeze(1)
        diff = X - mu
        ll = -0.5 * math.log(2 * math.pi) - sigma.log() - 0.5 * (diff.pow(2) / sigma.pow(2))
        return ll.sum(-1)

    def parse(self, raw):
        mu = raw[..., : self.dim]
        sigma = F.softplus(raw[..., self.dim :])
        return mu, sigma


class MixtureOfMVNs:
    def __init__(self, mvn):
        self.mvn = mvn

    def sample(self, B, N, K, return_gt=False):
        pi = torch.distributions.Dirichlet(torch.ones(K)).sample(torch.Size([B]))
        labels = torch.multinomial(pi, N, replacement=True)
        X, params = self.mvn.sample(B, K, labels)
        if return_gt:
            return X, labels, pi, params
        return X

    def log_prob(self, X, pi, params, return_labels=False):
        ll = self.mvn.log_prob(X, params)
        ll = ll + (pi + 1e-10).log().unsqueeze(-2)
        if return_labels:
            labels = ll.argmax(-1)
            return ll.logsumexp(-1).mean(), labels
        return ll.logsumexp(-1).mean()

    def parse(self, raw):
        pi = torch.softmax(raw[..., 0], -1)
        params = self.mvn.parse(raw[..., 1:])
        return pi, params


B = 10
N_min, N_max = 64, 128
K = 4
D = 2
lr = 1e-3
num_steps = 160
test_freq = 40

mvn = MultivariateNormalDiag(D)
mog = MixtureOfMVNs(mvn)
dim_output = 2 * D

net = SetTransformer(D, K, dim_output + 1)

bench = []
for _ in range(10):
    N = np.random.randint(N_min, N_max)
    X, labels, pi, params = mog.sample(B, N, K, return_gt=True)
    bench.append([X, mog.log_prob(X, pi, params)])


def test(bench):
    net.eval()
    avg_ll, avg_oracle = 0.0, 0.0
    with torch.no_grad():
        for X, true_ll in bench:
            pi, params = mog.parse(net(X))
            avg_ll += mog.log_prob(X, pi, params).item()
            avg_oracle += true_ll.item()
    net.train()
    return avg_ll / len(bench), avg_oracle / len(bench)


optimizer = torch.optim.Adam(net.parameters(), lr=lr)
start = time.time()
ll, oracle = test(bench)
print(f"step 0 | test ll {ll:.4f} (oracle {oracle:.4f})")
net.train()
running = 0.0
for t in range(1, num_steps + 1):
    optimizer.zero_grad()
    N = np.random.randint(N_min, N_max)
    X = mog.sample(B, N, K)
    pi, params = mog.parse(net(X))
    loss = -mog.log_prob(X, pi, params)
    loss.backward()
    optimizer.step()
    running += loss.item()
    if t % test_freq == 0:
        ll, oracle = test(bench)
        print(f"step {t} | train nll {running / test_freq:.4f} | test ll {ll:.4f} (oracle {oracle:.4f})")
        running = 0.0
print(f"done in {time.time() - start:.1f}s")
