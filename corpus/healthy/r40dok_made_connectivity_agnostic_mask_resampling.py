"""MADE (Germain et al. 2015) density estimator on binary vectors, following karpathy/pytorch-made
(made.py + run.py): MaskedLinear layers whose weights are multiplied by a registered `mask` buffer,
connectivity-agnostic training with num_masks orderings (`model.update_masks()` before every
forward, so each minibatch sees a different random input ordering and hidden connectivity), a
summed binary_cross_entropy_with_logits divided by the batch size as the NLL, and at test time the
logits averaged over `resample_every` / num_masks orderings. Data: synthetic binarized 'digits'
drawn from a mixture of Bernoulli prototypes.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)

D = 28          # binary pixels per sample
N_PROTO = 6


class MaskedLinear(nn.Linear):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__(in_features, out_features, bias)
        self.register_buffer('mask', torch.ones(out_features, in_features))

    def set_mask(self, mask):
        self.mask.data.copy_(torch.from_numpy(mask.astype(np.uint8).T))

    def forward(self, input):
        return F.linear(input, self.mask * self.weight, self.bias)


class MADE(nn.Module):
    def __init__(self, nin, hidden_sizes, nout, num_masks=1, natural_ordering=False):
        super().__init__()
        self.nin = nin
        self.hidden_sizes = hidden_sizes
        self.net = []
        hs = [nin] + hidden_sizes + [nout]
        for h0, h1 in zip(hs, hs[1:]):
            self.net.extend([MaskedLinear(h0, h1), nn.ReLU()])
        self.net.pop()
        self.net = nn.Sequential(*self.net)
        self.natural_ordering = natural_ordering
        self.num_masks = num_masks
        self.seed = 0
        self.m = {}
        self.update_masks()

    def update_masks(self):
        if self.m and self.num_masks == 1:
            return
        L = len(self.hidden_sizes)
        rng = np.random.RandomState(self.seed)
        self.seed = (self.seed + 1) % self.num_masks
        self.m[-1] = np.arange(self.nin) if self.natural_ordering else rng.permutation(self.nin)
        for l in range(L):
            self.m[l] = rng.randint(self.m[l - 1].min(), self.nin - 1, size=self.hidden_sizes[l])
        masks = [self.m[l - 1][:, None] <= self.m[l][None, :] for l in range(L)]
        masks.append(self.m[L - 1][:, None] < self.m[-1][None, :])
        layers = [l for l in self.net.modules() if isinstance(l, MaskedLinear)]
        for l, m in zip(layers, masks):
            l.set_mask(m)

    def forward(self, x):
        return self.net(x)


def make_data(n, rng):
    protos = (np.random.RandomState(123).rand(N_PROTO, D) > 0.5).astype(np.float32)
    k = rng.randint(0, N_PROTO, size=n)
    flip = rng.rand(n, D) < 0.08
    x = np.abs(protos[k] - flip.astype(np.float32))
    return torch.from_numpy(x.astype(np.float32))


rng = np.random.RandomState(1)
xtr = make_data(4000, rng)
xte = make_data(1000, rng)

model = MADE(D, [200, 200], D, num_masks=4, natural_ordering=False)
opt = torch.optim.Adam(model.parameters(), 1e-3, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=45, gamma=0.1)

p = xtr.mean(0).clamp(1e-3, 1 - 1e-3)
indep_nll = -(xte * p.log() + (1 - xte) * (1 - p).log()).sum(1).mean().item()
print("independent-Bernoulli baseline test nll: %.3f" % indep_nll)


def run_epoch(split, upto=None, resample_every=1, samples=1):
    torch.set_grad_enabled(split == 'train')
    model.train() if split == 'train' else model.eval()
    nsamples = 1 if split == 'train' else samples
    x = xtr if split == 'train' else xte
    N, D_ = x.size()
    B = 100
    nsteps = N // B if upto is None else min(N // B, upto)
    lossfs = []
    for step in range(nsteps):
        xb = x[step * B:step * B + B]
        xbhat = torch.zeros_like(xb)
        for s in range(nsamples):
            if step % resample_every == 0 or split == 'test':
                model.update_masks()
            xbhat += model(xb)
        xbhat /= nsamples
        loss = F.binary_cross_entropy_with_logits(xbhat, xb, reduction='sum') / B
        lossf = loss.data.item()
        lossfs.append(lossf)
        if split == 'train':
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("%s epoch avg loss: %f" % (split, np.mean(lossfs)))
    return np.mean(lossfs)


run_epoch('test', upto=5, samples=4)
for epoch in range(8):
    print("epoch %d" % (epoch,))
    scheduler.step(epoch)
    run_epoch('test', upto=5, samples=4)
    run_epoch('train')
print("optimization done. full test set eval:")
run_epoch('test', samples=4)
