"""Sequence classification with a small S4D model (diagonal state-space layers), trained like
the state-spaces/s4 standalone example.py: AdamW on the ordinary weights, separate parameter
groups (no weight decay, smaller lr) for the SSM parameters, cosine annealing per epoch."""
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class DropoutNd(nn.Module):
    def __init__(self, p=0.5, tie=True, transposed=True):
        super().__init__()
        self.p = p
        self.tie = tie
        self.transposed = transposed
        self.binomial = torch.distributions.binomial.Binomial(probs=1 - self.p)

    def forward(self, X):
        if self.training:
            if not self.transposed:
                X = X.transpose(-1, -2)
            mask_shape = X.shape[:2] + (1,) * (X.ndim - 2) if self.tie else X.shape
            mask = torch.rand(*mask_shape, device=X.device) < 1.0 - self.p
            X = X * mask * (1.0 / (1 - self.p))
            if not self.transposed:
                X = X.transpose(-1, -2)
            return X
        return X


class S4DKernel(nn.Module):
    def __init__(self, d_model, N=64, dt_min=0.001, dt_max=0.1, lr=None):
        super().__init__()
        H = d_model
        log_dt = torch.rand(H) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        C = torch.randn(H, N // 2, dtype=torch.cfloat)
        self.C = nn.Parameter(torch.view_as_real(C))
        self.register("log_dt", log_dt, lr)
        log_A_real = torch.log(0.5 * torch.ones(H, N // 2))
        A_imag = math.pi * torch.arange(N // 2).float().unsqueeze(0).repeat(H, 1)
        self.register("log_A_real", log_A_real, lr)
        self.register("A_imag", A_imag, lr)

    def forward(self, L):
        dt = torch.exp(self.log_dt)
        C = torch.view_as_complex(self.C)
        A = -torch.exp(self.log_A_real) + 1j * self.A_imag
        dtA = A * dt.unsqueeze(-1)
        K = dtA.unsqueeze(-1) * torch.arange(L, device=A.device)
        C = C * (torch.exp(dtA) - 1.0) / A
        K = 2 * torch.einsum("hn, hnl -> hl", C, torch.exp(K)).real
        return K

    def register(self, name, tensor, lr=None):
        if lr == 0.0:
            self.register_buffer(name, tensor)
        else:
            self.register_parameter(name, nn.Parameter(tensor))
            optim = {"weight_decay": 0.0}
            if lr is not None:
                optim["lr"] = lr
            setattr(getattr(self, name), "_optim", optim)


class S4D(nn.Module):
    def __init__(self, d_model, d_state=64, dropout=0.0, transposed=True, **kernel_args):
        super().__init__()
        self.h = d_model
        self.n = d_state
        self.transposed = transposed
        self.D = nn.Parameter(torch.randn(self.h))
        self.kernel = S4DKernel(self.h, N=self.n, **kernel_args)
        self.activation = nn.GELU()
        self.dropout = DropoutNd(dropout) if dropout > 0.0 else nn.Identity()
        self.output_linear = nn.Sequential(
            nn.Conv1d(self.h, 2 * self.h, kernel_size=1),
            nn.GLU(dim=-2),
        )

    def forward(self, u):
        if not self.transposed:
            u = u.transpose(-1, -2)
        L = u.size(-1)
        k = self.kernel(L=L)
        k_f = torch.fft.rfft(k, n=2 * L)
        u_f = torch.fft.rfft(u, n=2 * L)
        y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]
        y = y + u * self.D.unsqueeze(-1)
        y = self.dropout(self.activation(y))
        y = self.output_linear(y)
        if not self.transposed:
            y = y.transpose(-1, -2)
        return y, None


class S4Model(nn.Module):
    def __init__(self, d_input, d_output=10, d_model=64, n_layers=2, dropout=0.1, prenorm=False, lr=0.001):
        super().__init__()
        self.prenorm = prenorm
        self.encoder = nn.Linear(d_input, d_model)
        self.s4_layers = nn.ModuleList()
        self.norms = nn.ModuleList()
        self.dropouts = nn.ModuleList()
        for _ in range(n_layers):
            self.s4_layers.append(S4D(d_model, dropout=dropout, transposed=True, lr=min(0.001, lr)))
            self.norms.append(nn.LayerNorm(d_model))
            self.dropouts.append(nn.Dropout1d(dropout))
        self.decoder = nn.Linear(d_model, d_output)

    def forward(self, x):
        x = self.encoder(x)
        x = x.transpose(-1, -2)
        for layer, norm, dropout in zip(self.s4_layers, self.norms, self.dropouts):
            z = x
            if self.prenorm:
                z = norm(z.transpose(-1, -2)).transpose(-1, -2)
            z, _ = layer(z)
            z = dropout(z)
            x = z + x
            if not self.prenorm:
                x = norm(x.transpose(-1, -2)).transpose(-1, -2)
        x = x.transpose(-1, -2)
        x = x.mean(dim=1)
        x = self.decoder(x)
        return x


def make_data(n, L=64, n_classes=4):
    """Class = which of four frequencies the noisy pulse train oscillates at."""
    y = torch.randint(0, n_classes, (n,))
    t = torch.arange(L).float()
    freqs = torch.tensor([3.0, 4.0, 5.0, 6.0])[y]
    phase = torch.rand(n) * 2 * math.pi
    x = torch.sin(2 * math.pi * freqs[:, None] * t[None, :] / L + phase[:, None])
    x = x + 1.5 * torch.randn(n, L)
    return x.unsqueeze(-1), y


def setup_optimizer(model, lr, weight_decay, epochs):
    all_parameters = list(model.parameters())
    params = [p for p in all_parameters if not hasattr(p, "_optim")]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    hps = [getattr(p, "_optim") for p in all_parameters if hasattr(p, "_optim")]
    hps = [dict(s) for s in sorted(list(dict.fromkeys(frozenset(hp.items()) for hp in hps)))]
    for hp in hps:
        params = [p for p in all_parameters if getattr(p, "_optim", None) == hp]
        optimizer.add_param_group({"params": params, **hp})
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
    for i, hp in enumerate(hps):
        print("Optimizer group", i + 1, "|", len(optimizer.param_groups[i + 1]["params"]), "tensors |", hp)
    return optimizer, scheduler


x_train, y_train = make_data(1024)
x_val, y_val = make_data(512)
trainloader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
valloader = DataLoader(TensorDataset(x_val, y_val), batch_size=256, shuffle=False)

epochs = 6
model = S4Model(d_input=1, d_output=4, d_model=32, n_layers=2, dropout=0.1, prenorm=False, lr=0.01)
criterion = nn.CrossEntropyLoss()
optimizer, scheduler = setup_optimizer(model, lr=0.01, weight_decay=0.01, epochs=epochs)


def train():
    model.train()
    train_loss, correct, total = 0.0, 0, 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
    return train_loss / (batch_idx + 1), 100.0 * correct / total


@torch.no_grad()
def evaluate(loader):
    model.eval()
    eval_loss, correct, total = 0.0, 0, 0
    for batch_idx, (inputs, targets) in enumerate(loader):
        outputs = model(inputs)
        eval_loss += criterion(outputs, targets).item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
    return eval_loss / (batch_idx + 1), 100.0 * correct / total


start = time.time()
val_loss, val_acc = evaluate(valloader)
print(f"Epoch 0 | val loss {val_loss:.4f} | val acc {val_acc:.1f}%")
for epoch in range(1, epochs + 1):
    train_loss, train_acc = train()
    val_loss, val_acc = evaluate(valloader)
    scheduler.step()
    print(f"Epoch {epoch} | train loss {train_loss:.4f} acc {train_acc:.1f}% | "
          f"val loss {val_loss:.4f} acc {val_acc:.1f}% | lr {scheduler.get_last_lr()[0]:.5f}")
print(f"done in {time.time() - start:.1f}s")
