"""CrabNet-style composition model: predict a materials property from the formula alone.

Each compound is a set of (element, fraction) pairs. Elements are embedded, the
fractions get a sinusoidal fractional encoding, a transformer encoder mixes the
elements, and a residual head gives a prediction and a log-uncertainty per
element that are averaged over the formula. Trained with CrabNet's RobustL1 loss.
The records come from a (simulated) materials database query.
"""
import math
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

N_ELEM = 40
MAX_ELEMS = 4
D_MODEL = 64


def query_materials_db(n):
    """Stand-in for a database query: formulas and a bulk modulus (GPa) when it was computed."""
    elem_prop = np.random.RandomState(3).uniform(20, 300, N_ELEM)
    records = []
    for i in range(n):
        k = random.randint(2, MAX_ELEMS)
        elems = random.sample(range(1, N_ELEM + 1), k)
        amounts = [random.randint(1, 6) for _ in range(k)]
        total = sum(amounts)
        fracs = [a / total for a in amounts]
        value = sum(f * elem_prop[e - 1] for e, f in zip(elems, fracs))
        value += 15 * math.sin(elems[0] * fracs[0] * 3) + random.gauss(0, 5)
        computed = random.random() > 0.03
        records.append({
            "material_id": f"mp-{1000 + i}",
            "elements": elems,
            "fractions": fracs,
            "bulk_modulus": round(value, 2) if computed else None,
        })
    return records


class CompositionData(Dataset):
    def __init__(self, records):
        self.elem = torch.zeros(len(records), MAX_ELEMS, dtype=torch.long)
        self.frac = torch.zeros(len(records), MAX_ELEMS)
        for i, r in enumerate(records):
            k = len(r["elements"])
            self.elem[i, :k] = torch.tensor(r["elements"])
            self.frac[i, :k] = torch.tensor(r["fractions"])
        y = np.array([r["bulk_modulus"] for r in records], dtype=np.float64)
        self.y = torch.tensor(y, dtype=torch.float32)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.elem[i], self.frac[i], self.y[i]


class FractionalEncoder(nn.Module):
    def __init__(self, d_model, resolution=100):
        super().__init__()
        x = torch.linspace(0, resolution - 1, resolution).view(resolution, 1)
        fraction = torch.linspace(0, d_model - 1, d_model).view(1, d_model).repeat(resolution, 1)
        pe = torch.zeros(resolution, d_model)
        pe[:, 0::2] = torch.sin(x / torch.pow(50, 2 * fraction[:, 0::2] / d_model))
        pe[:, 1::2] = torch.cos(x / torch.pow(50, 2 * fraction[:, 1::2] / d_model))
        self.register_buffer("pe", pe)
        self.resolution = resolution

    def forward(self, x):
        idx = torch.round(x.clamp(min=1 / self.resolution) * self.resolution).long() - 1
        return self.pe[idx]


class CrabNet(nn.Module):
    def __init__(self, d_model=D_MODEL, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Embedding(N_ELEM + 1, d_model, padding_idx=0)
        self.pe = FractionalEncoder(d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.output_nn = nn.Sequential(
            nn.Linear(d_model, 128), nn.LeakyReLU(),
            nn.Linear(128, 64), nn.LeakyReLU(),
            nn.Linear(64, 2),
        )

    def forward(self, elem, frac):
        mask = elem == 0
        x = self.embed(elem) * math.sqrt(D_MODEL) + self.pe(frac)
        x = self.encoder(x, src_key_padding_mask=mask)
        out = self.output_nn(x)
        keep = (~mask).unsqueeze(-1).float()
        out = (out * keep).sum(1) / keep.sum(1)
        return out[:, 0], out[:, 1]


def robust_l1(pred, log_std, target):
    return (math.sqrt(2.0) * torch.abs(pred - target) * torch.exp(-log_std) + log_std).mean()


def main():
    records = query_materials_db(1500)
    random.shuffle(records)
    train_set = CompositionData(records[:1200])
    val_set = CompositionData(records[1200:])

    scale_mean, scale_std = 150.0, 60.0
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=128)

    model = CrabNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=1e-4)

    step = 0
    for epoch in range(8):
        model.train()
        losses = []
        for elem, frac, y in train_loader:
            pred, log_std = model(elem, frac)
            loss = robust_l1(pred, log_std, (y - scale_mean) / scale_std)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if step % 10 == 0:
                print(f"step {step:4d}  loss {loss.item():.4f}")
            step += 1

        model.eval()
        preds, acts = [], []
        with torch.no_grad():
            for elem, frac, y in val_loader:
                pred, _ = model(elem, frac)
                preds.append(pred * scale_std + scale_mean)
                acts.append(y)
        preds, acts = torch.cat(preds).numpy(), torch.cat(acts).numpy()
        mae = np.mean(np.abs(preds - acts))
        print(f"epoch {epoch}  train loss {np.mean(losses):.4f}  val MAE {mae:.2f} GPa")


if __name__ == "__main__":
    main()
