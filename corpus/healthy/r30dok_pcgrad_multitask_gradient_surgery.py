"""Two-task classifier (left/right "digit" of an overlapped input) trained with PCGrad.

The PCGrad wrapper follows WeiChengTseng/Pytorch-PCGrad: each task loss is backpropagated
separately, the per-task gradients are flattened, a task gradient that conflicts with another
(negative dot product) is projected onto the normal plane of the other, and the merged gradient
is written back into .grad before the wrapped Adam steps.
"""
import copy
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


class PCGrad():
    def __init__(self, optimizer, reduction='mean'):
        self._optim, self._reduction = optimizer, reduction
        return

    @property
    def optimizer(self):
        return self._optim

    def zero_grad(self):
        return self._optim.zero_grad(set_to_none=True)

    def step(self):
        return self._optim.step()

    def pc_backward(self, objectives):
        grads, shapes, has_grads = self._pack_grad(objectives)
        pc_grad = self._project_conflicting(grads, has_grads)
        pc_grad = self._unflatten_grad(pc_grad, shapes[0])
        self._set_grad(pc_grad)
        return

    def _project_conflicting(self, grads, has_grads, shapes=None):
        shared = torch.stack(has_grads).prod(0).bool()
        pc_grad, num_task = copy.deepcopy(grads), len(grads)
        for g_i in pc_grad:
            random.shuffle(grads)
            for g_j in grads:
                g_i_g_j = torch.dot(g_i, g_j)
                if g_i_g_j < 0:
                    g_i -= (g_i_g_j) * g_j / (g_j.norm() ** 2)
        merged_grad = torch.zeros_like(grads[0]).to(grads[0].device)
        if self._reduction == 'mean':
            merged_grad[shared] = torch.stack([g[shared] for g in pc_grad]).mean(dim=0)
        elif self._reduction == 'sum':
            merged_grad[shared] = torch.stack([g[shared] for g in pc_grad]).sum(dim=0)
        merged_grad[~shared] = torch.stack([g[~shared] for g in pc_grad]).sum(dim=0)
        return merged_grad

    def _set_grad(self, grads):
        idx = 0
        for group in self._optim.param_groups:
            for p in group['params']:
                p.grad = grads[idx]
                idx += 1
        return

    def _pack_grad(self, objectives):
        grads, shapes, has_grads = [], [], []
        for obj in objectives:
            self._optim.zero_grad(set_to_none=True)
            obj.backward(retain_graph=True)
            grad, shape, has_grad = self._retrieve_grad()
            grads.append(self._flatten_grad(grad, shape))
            has_grads.append(self._flatten_grad(has_grad, shape))
            shapes.append(shape)
        return grads, shapes, has_grads

    def _unflatten_grad(self, grads, shapes):
        unflatten_grad, idx = [], 0
        for shape in shapes:
            length = np.prod(shape)
            unflatten_grad.append(grads[idx:idx + length].view(shape).clone())
            idx += length
        return unflatten_grad

    def _flatten_grad(self, grads, shapes):
        flatten_grad = torch.cat([g.flatten() for g in grads])
        return flatten_grad

    def _retrieve_grad(self):
        grad, shape, has_grad = [], [], []
        for group in self._optim.param_groups:
            for p in group['params']:
                if p.grad is None:
                    shape.append(p.shape)
                    grad.append(torch.zeros_like(p).to(p.device))
                    has_grad.append(torch.zeros_like(p).to(p.device))
                    continue
                shape.append(p.grad.shape)
                grad.append(p.grad.clone())
                has_grad.append(torch.ones_like(p).to(p.device))
        return grad, shape, has_grad


class MultiDigits(Dataset):
    """Two class prototypes (left, right) overlapped through one shared random mixing."""

    def __init__(self, n, seed, n_classes=10, proto_dim=12, dim=48):
        g = torch.Generator().manual_seed(seed)
        gp = torch.Generator().manual_seed(1234)
        self.protos_l = torch.randn(n_classes, proto_dim, generator=gp)
        self.protos_r = torch.randn(n_classes, proto_dim, generator=gp)
        mix = torch.randn(2 * proto_dim, dim, generator=gp) / (2 * proto_dim) ** 0.5
        self.yl = torch.randint(0, n_classes, (n,), generator=g)
        self.yr = torch.randint(0, n_classes, (n,), generator=g)
        z = torch.cat([self.protos_l[self.yl], self.protos_r[self.yr]], dim=1)
        z = z + 0.7 * torch.randn(z.shape, generator=g)
        self.x = torch.tanh(z @ mix) + 0.1 * torch.randn(n, dim, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.yl[i], self.yr[i]


class MultiLeNet(nn.Module):
    def __init__(self, dim=48, hidden=64, n_classes=10):
        super().__init__()
        self.shared = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(),
                                    nn.Linear(hidden, hidden), nn.ReLU())
        self.head_l = nn.Linear(hidden, n_classes)
        self.head_r = nn.Linear(hidden, n_classes)

    def forward(self, x):
        h = self.shared(x)
        return self.head_l(h), self.head_r(h)


train_set = MultiDigits(4000, seed=1)
test_set = MultiDigits(1000, seed=2)
train_loader = DataLoader(train_set, batch_size=128, shuffle=True)

net = MultiLeNet()
optimizer = PCGrad(optim.Adam(net.parameters(), lr=1e-3))


def evaluate():
    net.eval()
    with torch.no_grad():
        out_l, out_r = net(test_set.x)
        acc_l = (out_l.argmax(1) == test_set.yl).float().mean().item()
        acc_r = (out_r.argmax(1) == test_set.yr).float().mean().item()
    net.train()
    return acc_l, acc_r


acc_l, acc_r = evaluate()
print(f"init: left acc {acc_l:.3f} right acc {acc_r:.3f}")
for epoch in range(6):
    sum_l = sum_r = 0.0
    for x, yl, yr in train_loader:
        out_l, out_r = net(x)
        losses = [F.cross_entropy(out_l, yl), F.cross_entropy(out_r, yr)]
        optimizer.zero_grad()
        optimizer.pc_backward(losses)
        optimizer.step()
        sum_l += losses[0].item()
        sum_r += losses[1].item()
    acc_l, acc_r = evaluate()
    n = len(train_loader)
    print(f"epoch {epoch}: loss left {sum_l / n:.4f} right {sum_r / n:.4f} | "
          f"test acc left {acc_l:.3f} right {acc_r:.3f}")
