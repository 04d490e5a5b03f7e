"""5-fold cross-validation of a 1-D CNN heartbeat classifier (normal / premature ventricular /
atrial-fibrillation-like beats), written after the k-fold loop example: one model whose
weights are restored to their initial state at the end of every fold, a per-fold train /
validation split, and the fold scores averaged at the end. The ECG beats are synthesised
here (Gaussian P-QRS-T waves, noise and baseline wander)."""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Subset, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

BEAT_LEN = 128
CLASSES = ["N", "V", "A"]


def make_beats(n, seed):
    rng = np.random.RandomState(seed)
    t = np.linspace(0, 1, BEAT_LEN)
    X = np.zeros((n, 1, BEAT_LEN), dtype=np.float32)
    y = rng.randint(0, 3, n)

    def g(c, w, a):
        return a * np.exp(-0.5 * ((t - c) / w) ** 2)

    for i in range(n):
        shift = rng.uniform(-0.03, 0.03)
        if y[i] == 0:      # normal: P, narrow QRS, T
            sig = g(0.25 + shift, 0.03, 0.3) + g(0.45 + shift, 0.012, 1.0) \
                - g(0.42 + shift, 0.01, 0.15) + g(0.70 + shift, 0.05, 0.3)
        elif y[i] == 1:    # PVC: no P wave, wide tall QRS, inverted T
            sig = g(0.42 + shift, 0.035, 1.3) - g(0.70 + shift, 0.06, 0.35)
        else:              # AF-like: no P wave, fibrillatory baseline, normal QRS
            sig = g(0.45 + shift, 0.012, 1.0) + g(0.70 + shift, 0.05, 0.25) \
                + 0.12 * np.sin(2 * np.pi * rng.uniform(6, 9) * t + rng.uniform(0, 6))
        sig = sig + 0.1 * np.sin(2 * np.pi * rng.uniform(0.2, 0.6) * t + rng.uniform(0, 6))
        sig = sig + 0.05 * rng.randn(BEAT_LEN)
        X[i, 0] = sig
    return torch.from_numpy(X), torch.from_numpy(y).long()


class BeatCNN(nn.Module):
    def __init__(self, n_classes=3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(32, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1))
        self.classifier = nn.Linear(32, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def kfold_indices(n, num_folds, seed=12345):
    perm = np.random.RandomState(seed).permutation(n)
    folds = np.array_split(perm, num_folds)
    for k in range(num_folds):
        val_idx = folds[k]
        train_idx = np.concatenate([folds[j] for j in range(num_folds) if j != k])
        yield train_idx, val_idx


def run_epoch(model, loader, optimizer=None):
    train = optimizer is not None
    model.train(train)
    total, correct, loss_sum = 0, 0, 0.0
    with torch.set_grad_enabled(train):
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            if train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            loss_sum += loss.item() * len(y)
            correct += (logits.argmax(1) == y).sum().item()
            total += len(y)
    return loss_sum / total, correct / total


def main():
    X, y = make_beats(640, seed=1)
    dataset = TensorDataset(X, y)
    num_folds, max_epochs = 5, 5

    model = BeatCNN()
    initial_state = copy.deepcopy(model.state_dict())
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.5)

    fold_scores = []
    for fold, (train_idx, val_idx) in enumerate(kfold_indices(len(dataset), num_folds)):
        train_loader = DataLoader(Subset(dataset, train_idx), batch_size=64, shuffle=True)
        val_loader = DataLoader(Subset(dataset, val_idx), batch_size=128)
        print(f"===== fold {fold} ({len(train_idx)} train / {len(val_idx)} val) =====")
        for epoch in range(max_epochs):
            lr = optimizer.param_groups[0]["lr"]
            tr_loss, tr_acc = run_epoch(model, train_loader, optimizer)
            va_loss, va_acc = run_epoch(model, val_loader)
            scheduler.step()
            print(f"fold {fold} epoch {epoch}  lr {lr:.2e}  train loss {tr_loss:.4f} "
                  f"acc {tr_acc:.3f}  val loss {va_loss:.4f} acc {va_acc:.3f}")
        fold_scores.append(va_acc)
        # restore the initial weights so that the next fold starts from scratch
        model.load_state_dict(initial_state)

    print("fold val accuracies:", " ".join(f"{s:.3f}" for s in fold_scores))
    print(f"cross-validated accuracy {np.mean(fold_scores):.3f} +- {np.std(fold_scores):.3f}")


if __name__ == "__main__":
    main()
