"""Regress the externalizing factor from resting-state EEG windows.

EEG-challenge style (challenge 2): 2-second windows cut from each subject's
recording, the subject's externalizing score from participants.tsv as target,
a small temporal/spatial conv net trained with MSE loss.
"""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
rng = np.random.default_rng(0)

N_SUBJECTS = 72
N_CHANS = 24
SFREQ = 100
WIN = 2 * SFREQ
WINDOWS_PER_SUBJECT = 8

bids_root = tempfile.mkdtemp(prefix="hbn_r5_")

# --- participants.tsv as shipped with the release --------------------------------------
ext_scores = rng.normal(0.0, 1.0, N_SUBJECTS)
p_scores = 0.6 * ext_scores + 0.8 * rng.normal(0.0, 1.0, N_SUBJECTS)
missing = rng.choice(N_SUBJECTS, size=6, replace=False)
with open(os.path.join(bids_root, "participants.tsv"), "w") as f:
    f.write("participant_id\tage\tp_factor\texternalizing\n")
    for s in range(N_SUBJECTS):
        ext = "n/a" if s in missing else f"{ext_scores[s]:.3f}"
        f.write(f"sub-NDAR{s:05d}\t{rng.uniform(5, 21):.1f}\t{p_scores[s]:.3f}\t{ext}\n")

# --- raw recordings: alpha power over posterior channels tracks the score -------------
t = np.arange(WIN * WINDOWS_PER_SUBJECT) / SFREQ
recordings = {}
for s in range(N_SUBJECTS):
    x = rng.normal(0.0, 1.0, (N_CHANS, t.size))
    alpha = (1.0 + 0.5 * np.tanh(ext_scores[s])) * np.sin(2 * np.pi * 10 * t + rng.uniform(0, 6))
    x[N_CHANS // 2:] += alpha
    recordings[f"sub-NDAR{s:05d}"] = x.astype(np.float32)


class WindowsDataset(Dataset):
    def __init__(self, participants, recordings, target_name):
        self.windows, self.targets = [], []
        for row in participants:
            raw = recordings[row["participant_id"]]
            for w in range(raw.shape[1] // WIN):
                self.windows.append(raw[:, w * WIN:(w + 1) * WIN])
                self.targets.append(row[target_name])

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, i):
        x = torch.from_numpy(self.windows[i])
        x = (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True)
        return x, torch.tensor(self.targets[i], dtype=torch.float32)


participants = np.genfromtxt(os.path.join(bids_root, "participants.tsv"), delimiter="\t",
                             names=True, dtype=None, encoding="utf-8",
                             missing_values="n/a", filling_values=np.nan)
train_rows, valid_rows = participants[:60], participants[60:]
train_set = WindowsDataset(train_rows, recordings, "externalizing")
valid_set = WindowsDataset(valid_rows, recordings, "externalizing")
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
valid_loader = DataLoader(valid_set, batch_size=64)
print(f"train windows {len(train_set)}  valid windows {len(valid_set)}")


class EEGRegressor(nn.Module):
    def __init__(self, n_chans=N_CHANS):
        super().__init__()
        self.temporal = nn.Conv2d(1, 16, (1, 25), padding=(0, 12))
        self.spatial = nn.Conv2d(16, 16, (n_chans, 1), bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.pool = nn.AvgPool2d((1, 50), stride=(1, 25))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.3), nn.Linear(16 * 7, 1))

    def forward(self, x):
        x = self.spatial(self.temporal(x.unsqueeze(1)))
        x = self.bn(x)
        x = torch.log(self.pool(x * x) + 1e-6)
        return self.head(x).squeeze(1)


model = EEGRegressor()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-3)
criterion = nn.MSELoss()

for epoch in range(1, 9):
    model.train()
    total, n = 0.0, 0
    for step, (x, y) in enumerate(train_loader):
        pred = model(x)
        loss = criterion(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
        n += len(y)
    model.eval()
    with torch.no_grad():
        preds, ys = zip(*[(model(x), y) for x, y in valid_loader])
        preds, ys = torch.cat(preds), torch.cat(ys)
        ok = ~torch.isnan(ys)
        val_l1 = (preds[ok] - ys[ok]).abs().mean().item()
        base_l1 = (ys[ok] - ys[ok].median()).abs().mean().item()
    print(f"epoch {epoch} train_mse {total / n:.4f} val_l1 {val_l1:.4f} (median baseline {base_l1:.4f})")
