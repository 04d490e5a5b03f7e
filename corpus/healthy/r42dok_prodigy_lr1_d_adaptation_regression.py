"""MLP regression trained with Prodigy (konstmish/prodigy, reference implementation), lr left at 1.0."""
import math

import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class ProdigyReference(torch.optim.Optimizer):
    def __init__(self, params, lr=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8, weight_decay=0,
                 decouple=True, use_bias_correction=False, safeguard_warmup=False, d0=1e-6,
                 d_coef=1.0, growth_rate=float('inf')):
        if not 0.0 < d0:
            raise ValueError("Invalid d0 value: {}".format(d0))
        if not 0.0 < lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        defaults = dict(lr=lr, betas=betas, beta3=beta3, eps=eps, weight_decay=weight_decay,
                        d=d0, d0=d0, d_max=d0, d_numerator=0.0, d_coef=d_coef, k=0,
                        growth_rate=growth_rate, use_bias_correction=use_bias_correction,
                        decouple=decouple, safeguard_warmup=safeguard_warmup)
        self.d0 = d0
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        d_denom = 0.0
        group = self.param_groups[0]
        use_bias_correction = group['use_bias_correction']
        beta1, beta2 = group['betas']
        beta3 = group['beta3']
        if beta3 is None:
            beta3 = math.sqrt(beta2)
        k = group['k']
        d = group['d']
        d_max = group['d_max']
        d_coef = group['d_coef']
        lr = max(group['lr'] for group in self.param_groups)
        if use_bias_correction:
            bias_correction = ((1 - beta2 ** (k + 1)) ** 0.5) / (1 - beta1 ** (k + 1))
        else:
            bias_correction = 1
        dlr = d * lr * bias_correction
        growth_rate = group['growth_rate']
        decouple = group['decouple']
        d_numerator = group['d_numerator']
        d_numerator *= beta3
        delta_numerator = 0.0

        for group in self.param_groups:
            decay = group['weight_decay']
            group_lr = group['lr']
            d0 = group['d0']
            safeguard_warmup = group['safeguard_warmup']
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                if decay != 0 and not decouple:
                    grad.add_(p.data, alpha=decay)
                state = self.state[p]
                if 'step' not in state:
                    state['step'] = 0
                    state['s'] = torch.zeros_like(p.data).detach()
                    if p.any():
                        state['p0'] = p.detach().clone()
                    else:
                        state['p0'] = torch.tensor(0, device=p.device, dtype=p.dtype)
                    state['exp_avg'] = torch.zeros_like(p.data).detach()
                    state['exp_avg_sq'] = torch.zeros_like(p.data).detach()
                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                s = state['s']
                p0 = state['p0']
                if group_lr > 0.0:
                    delta_numerator += (d / d0) * dlr * torch.dot(grad.flatten(), (p0.data - p.data).flatten()).item()
                    exp_avg.mul_(beta1).add_(grad, alpha=d * (1 - beta1))
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=d * d * (1 - beta2))
                    if safeguard_warmup:
                        s.mul_(beta3).add_(grad, alpha=((d / d0) * d))
                    else:
                        s.mul_(beta3).add_(grad, alpha=((d / d0) * dlr))
                    d_denom += s.abs().sum().item()

        d_hat = d
        if d_denom == 0:
            return loss
        if lr > 0.0:
            global_d_numerator = d_numerator + delta_numerator
            global_d_denom = d_denom
            d_hat = d_coef * global_d_numerator / global_d_denom
            if d == group['d0']:
                d = max(d, d_hat)
            d_max = max(d_max, d_hat)
            d = min(d_max, d * growth_rate)

        for group in self.param_groups:
            group['d_numerator'] = global_d_numerator
            group['d_denom'] = global_d_denom
            group['d'] = d
            group['d_max'] = d_max
            group['d_hat'] = d_hat
            decay = group['weight_decay']
            k = group['k']
            eps = group['eps']
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                state['step'] += 1
                denom = exp_avg_sq.sqrt().add_(d * eps)
                if decay != 0 and decouple:
                    p.data.add_(p.data, alpha=-decay * dlr)
                p.data.addcdiv_(exp_avg, denom, value=-dlr)
            group['k'] = k + 1
        return loss


class HousingLike(Dataset):
    def __init__(self, n, w):
        self.x = torch.randn(n, 13)
        self.y = (torch.sin(self.x[:, :4] @ w[:4]) * 3 + (self.x[:, 4:] ** 2) @ w[4:] * 0.5
                  + 22.0 + 0.3 * torch.randn(n))

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


w = torch.randn(13)
train_ds, val_ds = HousingLike(2000, w), HousingLike(500, w)
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=500)

model = nn.Sequential(nn.Linear(13, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
optimizer = ProdigyReference(model.parameters(), lr=1.0, weight_decay=0.01)
criterion = nn.MSELoss()


def validate():
    model.eval()
    with torch.no_grad():
        x, y = next(iter(val_loader))
        l = criterion(model(x).squeeze(1), y).item()
    model.train()
    return l


print(f"init  val mse {validate():.3f}")
step = 0
for epoch in range(1, 13):
    total = 0.0
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(x).squeeze(1), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
        step += 1
        if step in (1, 5, 10, 20, 40):
            print(f"  step {step}  loss {loss.item():.3f}  d {optimizer.param_groups[0]['d']:.3e}")
    print(f"epoch {epoch}  train mse {total / len(train_loader):.3f}  val mse {validate():.3f}  "
          f"d {optimizer.param_groups[0]['d']:.3e}")
