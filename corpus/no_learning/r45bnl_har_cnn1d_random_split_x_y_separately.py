"""Human activity recognition from wrist accelerometer windows with a small 1D CNN.

Six activities (walking, upstairs, downstairs, sitting, standing, lying), 3-axis windows of
64 samples. Train/validation split with random_split, Adam, cross-entropy.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, random_split

torch.manual_seed(0)

ACTIVITIES = ["walking", "upstairs", "downstairs", "sitting", "standing", "lying"]
N_WINDOWS = 1200
WINDOW = 64
BATCH_SIZE = 32
EPOCHS = 6


def make_recordings(n, window):
    labels = torch.randint(0, len(ACTIVITIES), (n,))
    t = torch.arange(window, dtype=torch.float32) / 20.0
    freq = torch.tensor([2.0, 1.6, 2.4, 0.0, 0.0, 0.0])
    amp = torch.tensor([1.0, 1.3, 0.8, 0.05, 0.05, 0.05])
    gravity = torch.tensor([
        [0.0, 0.0, 1.0], [0.1, 0.0, 1.0], [-0.1, 0.0, 1.0],
        [0.0, 0.7, 0.7], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0],
    ])
    phase = torch.rand(n, 1) * 2 * math.pi
    osc = amp[labels, None] * torch.sin(2 * math.pi * freq[labels, None] * t[None, :] + phase)
    x = gravity[labels][:, :, None] + osc[:, None, :] * torch.tensor([1.0, 0.5, 0.3])[None, :, None]
    x = x + 0.25 * torch.randn(n, 3, window)
    return x, labels


class HARWindows(Dataset):
    def __init__(self, windows, activities):
        self.windows = windows
        self.activities = activities

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, idx):
        return self.windows[idx], self.activities[idx]


class ActivityCNN(nn.Module):
    def __init__(self, n_classes=6):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 32, kernel_size=5, padding=2)
        self.conv2 = nn.Conv1d(32, 64, kernel_size=5, padding=2)
        self.bn1 = nn.BatchNorm1d(32)
        self.bn2 = nn.BatchNorm1d(64)
        self.fc = nn.Linear(64, n_classes)

    def forward(self, x):
        x = F.max_pool1d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = x.mean(dim=2)
        return self.fc(x)


signals, activity_ids = make_recordings(N_WINDOWS, WINDOW)
n_train = int(0.8 * N_WINDOWS)
n_val = N_WINDOWS - n_train
train_x, val_x = random_split(signals, [n_train, n_val])
train_y, val_y = random_split(activity_ids, [n_train, n_val])

train_loader = DataLoader(HARWindows(train_x, train_y), batch_size=BATCH_SIZE, shuffle=True)
val_loader = DataLoader(HARWindows(val_x, val_y), batch_size=BATCH_SIZE)

model = ActivityCNN(len(ACTIVITIES))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()

step = 0
for epoch in range(EPOCHS):
    model.train()
    running, correct, seen = 0.0, 0, 0
    for xb, yb in train_loader:
        optimizer.zero_grad()
        logits = model(xb)
        loss = criterion(logits, yb)
        loss.backward()
        optimizer.step()
        step += 1
        running += loss.item() * len(yb)
        correct += (logits.argmax(1) == yb).sum().item()
        seen += len(yb)
        if step % 30 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    model.eval()
    v_correct, v_seen = 0, 0
    with torch.no_grad():
        for xb, yb in val_loader:
            v_correct += (model(xb).argmax(1) == yb).sum().item()
            v_seen += len(yb)
    print(f"epoch {epoch + 1}/{EPOCHS}  train loss {running / seen:.4f}  "
          f"train acc {correct / seen:.3f}  val acc {v_correct / v_seen:.3f}")
