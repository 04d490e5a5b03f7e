"""Monthly-style demand forecasting in the style of a darts TFT run: the series is min-max scaled,
cut into (input_chunk_length, output_chunk_length) windows, and a small LSTM encoder with a
variable-selection gate and a multi-step linear head is trained with a MAPE loss."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
INPUT_CHUNK = 24
OUTPUT_CHUNK = 6


def _divide_no_nan(a, b):
    result = a / b
    result[result != result] = 0.0
    result[result == float("inf")] = 0.0
    result[result == float("-inf")] = 0.0
    return result


class MapeLoss(nn.Module):
    def forward(self, inpt, tgt):
        return 100.0 * torch.mean(torch.abs(_divide_no_nan(tgt - inpt, tgt)))


class Scaler:
    def fit_transform(self, x):
        self.lo, self.hi = x.min(), x.max()
        return (x - self.lo) / (self.hi - self.lo)

    def inverse_transform(self, x):
        return x * (self.hi - self.lo) + self.lo


class WindowDataset(Dataset):
    def __init__(self, series, covariates):
        self.series, self.cov = series, covariates

    def __len__(self):
        return len(self.series) - INPUT_CHUNK - OUTPUT_CHUNK + 1

    def __getitem__(self, i):
        past = torch.stack([self.series[i:i + INPUT_CHUNK], self.cov[i:i + INPUT_CHUNK, 0], self.cov[i:i + INPUT_CHUNK, 1]], 1)
        return past, self.series[i + INPUT_CHUNK:i + INPUT_CHUNK + OUTPUT_CHUNK]


class TinyTFT(nn.Module):
    def __init__(self, n_inputs=3, hidden=32):
        super().__init__()
        self.var_select = nn.Sequential(nn.Linear(n_inputs, hidden), nn.ELU(), nn.Linear(hidden, n_inputs))
        self.proj = nn.Linear(n_inputs, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.gate = nn.Linear(hidden, 2 * hidden)
        self.head = nn.Linear(hidden, OUTPUT_CHUNK)

    def forward(self, x):
        w = torch.softmax(self.var_select(x), dim=-1)
        h, _ = self.lstm(self.proj(x * w))
        last = nn.functional.glu(self.gate(h[:, -1]), dim=-1) + h[:, -1]
        return self.head(last)


t = torch.arange(600, dtype=torch.float)
month = (t % 12) / 11.0
raw = 200 + 0.15 * t + 40 * torch.sin(2 * torch.pi * t / 12) + 8 * torch.randn(600)
raw[150:153] = torch.tensor([31.0, 12.0, 47.0])
covariates = torch.stack([month, torch.cos(2 * torch.pi * t / 12)], 1)
scaler = Scaler()
series = scaler.fit_transform(raw)
train_series, val_series = series[:480], series[480 - INPUT_CHUNK:]
train_loader = DataLoader(WindowDataset(train_series, covariates[:480]), batch_size=32, shuffle=True)
val_loader = DataLoader(WindowDataset(val_series, covariates[480 - INPUT_CHUNK:]), batch_size=64)

model = TinyTFT()
loss_fn = MapeLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

step = 0
for epoch in range(14):
    model.train()
    running = 0.0
    for past, future in train_loader:
        pred = model(past)
        loss = loss_fn(pred, future)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 5 == 0:
            print(f"  step {step} loss {loss.item():.3f}")
        step += 1
    model.eval()
    with torch.no_grad():
        preds, trues = [], []
        for past, future in val_loader:
            preds.append(model(past))
            trues.append(future)
        preds, trues = torch.cat(preds), torch.cat(trues)
        val_loss = loss_fn(preds, trues).item()
        mae = (scaler.inverse_transform(preds) - scaler.inverse_transform(trues)).abs().mean().item()
    print(f"epoch {epoch} step {step} train_loss {running / len(train_loader):.3f} val_loss {val_loss:.3f} val MAE (units) {mae:.2f}")
