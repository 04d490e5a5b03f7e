"""LSTM encoder + fully connected decoder for multi-step forecasting
(Seq2Seq with the last hidden state, 'LSTM-FC'). Synthetic noisy sine series."""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

CONTEXT = 48
HORIZON = 24


def make_series(n):
    t = torch.arange(CONTEXT + HORIZON, dtype=torch.float32)
    freq = torch.empty(n, 1).uniform_(0.08, 0.3)
    phase = torch.empty(n, 1).uniform_(0, 2 * math.pi)
    amp = torch.empty(n, 1).uniform_(0.5, 1.5)
    series = amp * torch.sin(freq * t + phase) + 0.05 * torch.randn(n, CONTEXT + HORIZON)
    return series


class WindowDataset(Dataset):
    def __init__(self, series):
        self.series = series

    def __len__(self):
        return len(self.series)

    def __getitem__(self, i):
        s = self.series[i]
        x = s[:CONTEXT].unsqueeze(-1)
        y = s[CONTEXT:].unsqueeze(-1)
        return x, y


class Seq2SeqModel(nn.Module):
    def __init__(self, hidden_size=64):
        super().__init__()
        self.encoder = nn.LSTM(1, hidden_size, batch_first=True)
        self.decoder = nn.Sequential(
            nn.Linear(hidden_size, hidden_size),
            nn.ReLU(),
            nn.Linear(hidden_size, HORIZON),
        )

    def forward(self, x):
        o, _ = self.encoder(x)
        y_hat = self.decoder(o[:, -1, :]).unsqueeze(1)
        return y_hat


train_loader = DataLoader(WindowDataset(make_series(1024)), batch_size=32, shuffle=True)
val_loader = DataLoader(WindowDataset(make_series(256)), batch_size=64)

model = Seq2SeqModel()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.MSELoss()
val_metric = nn.L1Loss()

for epoch in range(6):
    model.train()
    running = 0.0
    for x, y in train_loader:
        optimizer.zero_grad()
        y_hat = model(x)
        loss = criterion(y_hat, y)
        loss.backward()
        optimizer.step()
        running += loss.item()
    model.eval()
    maes = []
    with torch.no_grad():
        for x, y in val_loader:
            maes.append(val_metric(model(x), y).item())
    print(f"epoch {epoch}: train MSE {running / len(train_loader):.4f}  val MAE {sum(maes) / len(maes):.4f}")
