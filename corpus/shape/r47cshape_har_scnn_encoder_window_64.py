"""Human activity recognition from body-worn IMU windows (9 channels: body acc, gyro, total acc).

SCNN encoder in the style of the LFR HAR experiments, with a linear activity head on top.
Windows are cut at 64 samples (1.28 s at 50 Hz) from synthetic recordings of 6 activities.
"""
import math
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_CLASSES = 6
N_CHANNELS = 9
WINDOW = 64
BATCH_SIZE = 128
EPOCHS = 8


class HARWindows(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, N_CLASSES, (n,), generator=g)
        t = torch.arange(WINDOW, dtype=torch.float32) / 50.0
        freqs = torch.tensor([0.0, 0.3, 0.6, 1.2, 2.0, 2.8])
        amps = torch.tensor([0.05, 0.1, 0.2, 0.6, 0.9, 1.2])
        phase = torch.rand(n, N_CHANNELS, 1, generator=g) * 2 * math.pi
        chan_gain = torch.linspace(0.5, 1.5, N_CHANNELS).view(1, N_CHANNELS, 1)
        f = freqs[self.y].view(n, 1, 1)
        a = amps[self.y].view(n, 1, 1)
        x = a * chan_gain * torch.sin(2 * math.pi * f * t.view(1, 1, -1) + phase)
        x = x + 0.3 * torch.randn(n, N_CHANNELS, WINDOW, generator=g)
        self.x = x

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class HARSCnnEncoder(nn.Module):
    def __init__(self, dim=128, input_channel=9):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(input_channel, 32, kernel_size=8,
                      stride=1, bias=False, padding=(8 // 2)),
            nn.BatchNorm1d(32),
            nn.ReLU(),
            nn.MaxPool1d(kernel_size=2, stride=2, padding=1),
            nn.Dropout(0.35),
            nn.Conv1d(32, 64, kernel_size=8, stride=1, bias=False, padding=4),
            nn.BatchNorm1d(64),
            nn.ReLU(),
            nn.MaxPool1d(kernel_size=2, stride=2, padding=1),
            nn.Conv1d(64, 128, kernel_size=8, stride=1, bias=False, padding=4),
            nn.BatchNorm1d(128),
            nn.ReLU(),
            nn.MaxPool1d(kernel_size=2, stride=2, padding=1),
        )
        if dim == 128 * 18:
            self.mlp = nn.Identity()
        else:
            self.mlp = nn.Linear(128 * 18, dim)

    def forward(self, xb):
        out = self.conv(xb)
        out = out.view(out.size(0), -1)
        out = self.mlp(out)
        return out


class ActivityClassifier(nn.Module):
    def __init__(self, dim=128, n_classes=N_CLASSES):
        super().__init__()
        self.encoder = HARSCnnEncoder(dim=dim, input_channel=N_CHANNELS)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(dim, n_classes))

    def forward(self, x):
        return self.head(self.encoder(x))


def evaluate(model, loader, criterion):
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            loss_sum += criterion(logits, y).item() * len(y)
            correct += (logits.argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return loss_sum / total, correct / total


def main():
    start = time.time()
    train_ds = HARWindows(1536, seed=1)
    val_ds = HARWindows(384, seed=2)
    train_loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=256)

    model = ActivityClassifier()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)

    step = 0
    for epoch in range(EPOCHS):
        running = 0.0
        for x, y in train_loader:
            optimizer.zero_grad()
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
            if step % 12 == 0:
                print(f"step {step:4d}  train loss {loss.item():.4f}")
        val_loss, val_acc = evaluate(model, val_loader, criterion)
        print(f"epoch {epoch + 1}/{EPOCHS}  train loss {running / len(train_loader):.4f}  "
              f"val loss {val_loss:.4f}  val acc {val_acc:.3f}")
    print(f"done in {time.time() - start:.1f}s")


if __name__ == "__main__":
    main()
