"""Denoising low-coverage ATAC-seq signal with a 1D residual CNN (AtacWorks-style).

Each training example is a genomic interval: the input is the coverage track from a subsampled,
low-depth experiment, the targets are the coverage from the full-depth experiment and its peak
calls. The regression head is trained with MSE + a Pearson-correlation loss, the peak head with
binary cross-entropy on its logits.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(7)
np.random.seed(7)

INTERVAL = 1000
N_TRAIN = 480
N_VAL = 96
BATCH_SIZE = 16
EPOCHS = 3
LR = 2e-4


def simulate_intervals(n):
    """Clean coverage = background + accessible peaks; noisy = 1/20 of the reads, rescaled."""
    pos = np.arange(INTERVAL)
    clean = np.zeros((n, INTERVAL), dtype=np.float32)
    peaks = np.zeros((n, INTERVAL), dtype=np.float32)
    noisy = np.zeros((n, INTERVAL), dtype=np.float32)
    for i in range(n):
        if np.random.rand() < 0.06:
            continue
        rate = np.full(INTERVAL, np.random.uniform(0.5, 2.0))
        for _ in range(np.random.randint(1, 5)):
            c = np.random.randint(50, INTERVAL - 50)
            w = np.random.uniform(15, 60)
            h = np.random.uniform(10, 60)
            rate += h * np.exp(-0.5 * ((pos - c) / w) ** 2)
            peaks[i, max(0, int(c - 1.5 * w)):int(c + 1.5 * w)] = 1.0
        clean[i] = np.random.poisson(rate)
        noisy[i] = np.random.poisson(rate / 20.0) * 20.0
    return noisy, clean, peaks


class AtacDataset(Dataset):
    def __init__(self, n):
        self.noisy, self.clean, self.peaks = simulate_intervals(n)

    def __len__(self):
        return len(self.noisy)

    def __getitem__(self, idx):
        return (torch.from_numpy(self.noisy[idx]), torch.from_numpy(self.clean[idx]),
                torch.from_numpy(self.peaks[idx]))


class ResBlock(nn.Module):
    def __init__(self, channels, kernel, dilation):
        super().__init__()
        pad = dilation * (kernel - 1) // 2
        self.conv1 = nn.Conv1d(channels, channels, kernel, padding=pad, dilation=dilation)
        self.conv2 = nn.Conv1d(channels, channels, kernel, padding=pad, dilation=dilation)

    def forward(self, x):
        return F.relu(x + self.conv2(F.relu(self.conv1(x))))


class DenoisingResNet(nn.Module):
    def __init__(self, channels=12, kernel=21, n_blocks=2):
        super().__init__()
        self.stem = nn.Conv1d(1, channels, kernel, padding=kernel // 2)
        self.blocks = nn.Sequential(*[ResBlock(channels, kernel, 2 ** b) for b in range(n_blocks)])
        self.regression = nn.Conv1d(channels, 1, 1)
        self.classification = nn.Conv1d(channels, 1, 1)

    def forward(self, x):
        h = self.blocks(F.relu(self.stem(torch.log1p(x).unsqueeze(1))))
        coverage = F.relu(self.regression(h)).squeeze(1)
        peak_logits = self.classification(h).squeeze(1)
        return coverage, peak_logits


class PearsonLoss(nn.Module):
    def forward(self, input, targets):
        x = input - input.mean(dim=1, keepdim=True)
        y = targets - targets.mean(dim=1, keepdim=True)
        r = torch.sum(x * y, dim=1) / (torch.sqrt(torch.sum(x ** 2, dim=1)) *
                                       torch.sqrt(torch.sum(y ** 2, dim=1)))
        return 1 - r.mean()


def main():
    train_ds, val_ds = AtacDataset(N_TRAIN), AtacDataset(N_VAL)
    train_loader = DataLoader(train_ds, batch_size=BATCH_SIZE, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=BATCH_SIZE)
    model = DenoisingResNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    mse, pearson, bce = nn.MSELoss(), PearsonLoss(), nn.BCEWithLogitsLoss()
    step = 0
    for epoch in range(EPOCHS):
        model.train()
        running = []
        for noisy, clean, peaks in train_loader:
            pred_cov, pred_peaks = model(noisy)
            loss_mse = mse(pred_cov, clean)
            loss_pearson = pearson(pred_cov, clean)
            loss_bce = bce(pred_peaks, peaks)
            loss = 0.001 * loss_mse + loss_pearson + loss_bce
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running.append(loss.item())
            step += 1
            if step % 10 == 0:
                print(f"epoch {epoch} step {step}: total_loss {loss.item():.4f} mse {loss_mse.item():.2f} "
                      f"pearsonloss {loss_pearson.item():.4f} bce {loss_bce.item():.4f}")
        model.eval()
        with torch.no_grad():
            corrs, accs = [], []
            for noisy, clean, peaks in val_loader:
                pred_cov, pred_peaks = model(noisy)
                keep = clean.std(dim=1) > 0
                x = pred_cov[keep] - pred_cov[keep].mean(1, keepdim=True)
                y = clean[keep] - clean[keep].mean(1, keepdim=True)
                corrs.append(((x * y).sum(1) / (x.norm(dim=1) * y.norm(dim=1))).mean().item())
                accs.append(((pred_peaks > 0).float() == peaks).float().mean().item())
        print(f"Epoch {epoch}: train loss {np.mean(running):.4f} | val corrcoef {np.mean(corrs):.4f} "
              f"val peak accuracy {np.mean(accs):.4f}")


if __name__ == "__main__":
    main()
