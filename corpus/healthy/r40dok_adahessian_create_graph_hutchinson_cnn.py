"""Small ResNet-style CNN trained with AdaHessian, as in amirgholami/adahessian
image_classification (optim_adahessian.py + main.py): every step calls
loss.backward(create_graph=True) so that p.grad carries a graph, the optimizer draws Rademacher
vectors and takes torch.autograd.grad(grads, params, grad_outputs=v) for the Hutchinson estimate
of the Hessian diagonal (spatially averaged over conv kernels), keeps an EMA of its square, and
updates p.data with lr 0.15 divided by the Hessian-diagonal RMS. Data: synthetic 16x16 two-channel
'textures' whose class is set by stripe orientation and frequency.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class Adahessian(Optimizer):
    def __init__(self, params, lr=0.15, betas=(0.9, 0.999), eps=1e-4,
                 weight_decay=0, hessian_power=1, single_gpu=True):
        defaults = dict(lr=lr, betas=betas, eps=eps,
                        weight_decay=weight_decay, hessian_power=hessian_power)
        self.single_gpu = single_gpu
        super(Adahessian, self).__init__(params, defaults)

    def get_trace(self, params, grads):
        for i, grad in enumerate(grads):
            if grad.grad_fn is None:
                raise RuntimeError('Gradient tensor {:} does not have grad_fn. When calling\n'.format(i) +
                                   '\t\t\t  loss.backward(), make sure the option create_graph is\n' +
                                   '\t\t\t  set to True.')

        v = [2 * torch.randint_like(p, high=2) - 1 for p in params]

        hvs = torch.autograd.grad(
            grads,
            params,
            grad_outputs=v,
            only_inputs=True,
            retain_graph=True)

        hutchinson_trace = []
        for hv in hvs:
            param_size = hv.size()
            if len(param_size) <= 2:
                tmp_output = hv.abs()
            elif len(param_size) == 4:
                tmp_output = torch.mean(hv.abs(), dim=[2, 3], keepdim=True)
            hutchinson_trace.append(tmp_output)
        return hutchinson_trace

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        params = []
        groups = []
        grads = []
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is not None:
                    params.append(p)
                    groups.append(group)
                    grads.append(p.grad)

        hut_traces = self.get_trace(params, grads)

        for (p, group, grad, hut_trace) in zip(params, groups, grads, hut_traces):
            state = self.state[p]
            if len(state) == 0:
                state['step'] = 0
                state['exp_avg'] = torch.zeros_like(p.data)
                state['exp_hessian_diag_sq'] = torch.zeros_like(p.data)

            exp_avg, exp_hessian_diag_sq = state['exp_avg'], state['exp_hessian_diag_sq']
            beta1, beta2 = group['betas']
            state['step'] += 1

            exp_avg.mul_(beta1).add_(grad.detach_(), alpha=1 - beta1)
            exp_hessian_diag_sq.mul_(beta2).addcmul_(hut_trace, hut_trace, value=1 - beta2)

            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']

            k = group['hessian_power']
            denom = (
                (exp_hessian_diag_sq.sqrt() ** k) /
                math.sqrt(bias_correction2) ** k).add_(
                group['eps'])

            p.data = p.data - \
                group['lr'] * (exp_avg / bias_correction1 / denom + group['weight_decay'] * p.data)

        return loss


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or inplanes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetTiny(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def make_data(n, g):
    y = torch.randint(0, 4, (n,), generator=g)
    ii, jj = torch.meshgrid(torch.arange(16.), torch.arange(16.), indexing='ij')
    freq = torch.where(y >= 2, 1.1, 0.6)[:, None, None]
    phase = torch.rand(n, 1, 1, generator=g) * 6.28
    coord = torch.where((y % 2 == 0)[:, None, None], ii[None], jj[None])
    img = torch.sin(freq * coord + phase)
    x = torch.stack([img, -img * 0.5], 1) + 2.0 * torch.randn(n, 2, 16, 16, generator=g)
    return x, y


g = torch.Generator().manual_seed(0)
xtr, ytr = make_data(1024, g)
xte, yte = make_data(512, g)
train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True)

model = ResNetTiny()
criterion = nn.CrossEntropyLoss()
optimizer = Adahessian(model.parameters(), lr=0.15, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [3], gamma=0.1)


def test():
    model.eval()
    with torch.no_grad():
        out = model(xte)
        return criterion(out, yte).item(), (out.argmax(1) == yte).float().mean().item()


print("init: test loss %.4f acc %.3f" % test())
for epoch in range(4):
    model.train()
    train_loss, correct, total = 0.0, 0, 0
    for data, target in train_loader:
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward(create_graph=True)
        train_loss += loss.item() * target.size(0)
        optimizer.step()
        correct += (output.argmax(1) == target).sum().item()
        total += target.size(0)
    scheduler.step()
    tl, ta = test()
    print("epoch %d: train loss %.4f acc %.3f | test loss %.4f acc %.3f" % (epoch, train_loss / total, correct / total, tl, ta))
