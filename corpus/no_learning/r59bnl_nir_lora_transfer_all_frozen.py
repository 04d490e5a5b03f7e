"""NIR calibration transfer with LoRA: an MLP that predicts protein, moisture and oil content
of grain samples from their near-infrared spectra is first fitted on the master instrument;
the secondary instrument (a different grating: offset and stretched wavelength axis, and
a different detector gain) only has a small transfer set, so the master calibration is
adapted with low-rank adapters (the loralib Linear layer and helpers are vendored below)
instead of being refitted. The spectra and reference values are generated here."""
import math
import os
import shutil
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

# ---------------------------------------------------------------- loralib (layers.py, utils.py)


class LoRALayer():
    def __init__(self, r, lora_alpha, lora_dropout, merge_weights):
        self.r = r
        self.lora_alpha = lora_alpha
        if lora_dropout > 0.:
            self.lora_dropout = nn.Dropout(p=lora_dropout)
        else:
            self.lora_dropout = lambda x: x
        self.merged = False
        self.merge_weights = merge_weights


class LoRALinear(nn.Linear, LoRALayer):
    def __init__(self, in_features, out_features, r=0, lora_alpha=1, lora_dropout=0.,
                 merge_weights=True, **kwargs):
        nn.Linear.__init__(self, in_features, out_features, **kwargs)
        LoRALayer.__init__(self, r=r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
                           merge_weights=merge_weights)
        if r > 0:
            self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
            self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
            self.scaling = self.lora_alpha / self.r
            self.weight.requires_grad = False
        self.reset_parameters()

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)
        if hasattr(self, 'lora_A'):
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def train(self, mode: bool = True):
        nn.Linear.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                if self.r > 0:
                    self.weight.data -= (self.lora_B @ self.lora_A) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                if self.r > 0:
                    self.weight.data += (self.lora_B @ self.lora_A) * self.scaling
                self.merged = True
        return self

    def forward(self, x):
        if self.r > 0 and not self.merged:
            result = F.linear(x, self.weight, bias=self.bias)
            result += (self.lora_dropout(x) @ self.lora_A.transpose(0, 1)
                       @ self.lora_B.transpose(0, 1)) * self.scaling
            return result
        return F.linear(x, self.weight, bias=self.bias)


def mark_only_lora_as_trainable(model: nn.Module, bias: str = 'none') -> None:
    for n, p in model.named_parameters():
        if 'lora_' not in n:
            p.requires_grad = False
    if bias == 'none':
        return
    elif bias == 'all':
        for n, p in model.named_parameters():
            if 'bias' in n:
                p.requires_grad = True
    elif bias == 'lora_only':
        for m in model.modules():
            if isinstance(m, LoRALayer) and hasattr(m, 'bias') and m.bias is not None:
                m.bias.requires_grad = True
    else:
        raise NotImplementedError


# ---------------------------------------------------------------- data

N_WL = 160
WAVELENGTHS = np.linspace(1100, 2500, N_WL)
ANALYTES = ["protein", "moisture", "oil"]


def band(center, width):
    return np.exp(-0.5 * ((WAVELENGTHS - center) / width) ** 2)


PURE = np.stack([
    band(1510, 40) + 0.8 * band(2055, 50) + 0.6 * band(2180, 35),     # protein (N-H)
    band(1450, 45) + 1.4 * band(1940, 55),                           # water (O-H)
    band(1725, 30) + 0.9 * band(2310, 30) + 0.7 * band(1210, 35),    # oil (C-H)
])


def make_samples(n, seed, shift_nm=0.0, broaden=1.0, gain=None):
    rng = np.random.RandomState(seed)
    conc = np.stack([rng.uniform(8, 16, n), rng.uniform(9, 15, n), rng.uniform(1, 6, n)], 1)
    wl = WAVELENGTHS
    pure = PURE
    if shift_nm or broaden != 1.0:
        centre = wl.mean()
        wl_seen = centre + (wl - centre) * broaden + shift_nm
        pure = np.stack([np.interp(wl_seen, wl, p) for p in PURE])
    spectra = conc / conc.mean(0) @ pure * 0.3
    spectra += rng.uniform(0.1, 0.5, (n, 1)) + rng.uniform(-1e-4, 1e-4, (n, 1)) * (wl - 1800)
    spectra += 0.004 * rng.randn(n, N_WL)
    if gain is not None:
        spectra = spectra * gain
    # first-derivative (Savitzky-Golay like) preprocessing removes the baseline offset
    d = np.gradient(spectra, axis=1) * 20
    return torch.tensor(d, dtype=torch.float32), torch.tensor(conc, dtype=torch.float32)


# ---------------------------------------------------------------- model


class SpectraNet(nn.Module):
    def __init__(self, lora_r=0, lora_alpha=16):
        super().__init__()
        kw = dict(r=lora_r, lora_alpha=lora_alpha) if lora_r else None
        lin = (lambda i, o: LoRALinear(i, o, **kw)) if kw else nn.Linear
        self.fc1 = lin(N_WL, 64)
        self.fc2 = lin(64, 64)
        self.head = lin(64, len(ANALYTES))

    def forward(self, x):
        return self.head(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


Y_MEAN = torch.tensor([12.0, 12.0, 3.5])
Y_STD = torch.tensor([2.3, 1.7, 1.45])


def rmsep(model, x, y):
    model.eval()
    with torch.no_grad():
        pred = model(x) * Y_STD + Y_MEAN
    model.train()
    return ((pred - y) ** 2).mean(0).sqrt()


def fmt(r):
    return "  ".join(f"{a} {v:.2f}" for a, v in zip(ANALYTES, r.tolist()))


def run_epochs(model, loader, optimizer, epochs, x_val, y_val, tag):
    for epoch in range(epochs):
        total = 0.0
        for xb, yb in loader:
            loss = F.mse_loss(model(xb), (yb - Y_MEAN) / Y_STD)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(xb)
        print(f"[{tag}] epoch {epoch}  train mse {total / len(loader.dataset):.4f}  "
              f"val RMSEP {fmt(rmsep(model, x_val, y_val))}")


def main():
    workdir = tempfile.mkdtemp()
    ckpt = os.path.join(workdir, "master_calibration.pt")

    # 1) calibration on the master instrument
    x_m, y_m = make_samples(1280, seed=1)
    x_mv, y_mv = make_samples(300, seed=2)
    master = SpectraNet()
    opt = torch.optim.Adam(master.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(x_m, y_m), batch_size=64, shuffle=True)
    run_epochs(master, loader, opt, 4, x_mv, y_mv, "master")
    torch.save(master.state_dict(), ckpt)

    # 2) transfer to the secondary instrument
    gain = 1.0 + 0.15 * np.sin(np.linspace(0, 3, N_WL))
    shift = dict(shift_nm=80.0, broaden=1.10, gain=gain)
    x_s, y_s = make_samples(256, seed=3, **shift)
    x_sv, y_sv = make_samples(300, seed=4, **shift)
    print(f"master calibration applied to the secondary instrument: "
          f"RMSEP {fmt(rmsep(master, x_sv, y_sv))}")
    print(f"predicting the transfer-set mean: "
          f"RMSEP {fmt(((y_sv - y_s.mean(0)) ** 2).mean(0).sqrt())}")

    model = SpectraNet(lora_r=8)
    model.load_state_dict(torch.load(ckpt), strict=False)
    for p in model.parameters():
        p.requires_grad = False
    mark_only_lora_as_trainable(model, bias='lora_only')
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"trainable parameters: {n_train} / {sum(p.numel() for p in model.parameters())}")

    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                  lr=5e-3, weight_decay=0.0)
    loader = DataLoader(TensorDataset(x_s, y_s), batch_size=32, shuffle=True)
    run_epochs(model, loader, optimizer, 15, x_sv, y_sv, "transfer")
    shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
