"""Time-series regression with a Mean Squared Log Error loss.

The targets span several orders of magnitude (0.001 to 1000) and the relative error matters
more than the absolute one, so the model is trained with a hand-written MSLE loss on top of a
tsai-style FCN (three Conv1d/BatchNorm/ReLU blocks, global average pooling, a linear head).
Synthetic series: the target is a decay rate read off a noisy multi-channel signal.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

N_VARS, SEQ_LEN = 3, 64


class DecaySeries(Dataset):
    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        self.y = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), size=n)).astype(np.float32)
        t = np.linspace(0, 1, SEQ_LEN)
        rate = np.log10(self.y)[:, None]
        x = np.stack([
            np.exp(-(rate + 3) * t) + 0.05 * rng.randn(n, SEQ_LEN),
            np.sin(2 * np.pi * (1 + rate) * t) + 0.05 * rng.randn(n, SEQ_LEN),
            rate / 3 + 0.3 * rng.randn(n, SEQ_LEN),
        ], axis=1)
        self.x = x.astype(np.float32)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i])


class ConvBlock(nn.Sequential):
    def __init__(self, ni, nf, ks):
        super().__init__(nn.Conv1d(ni, nf, ks, padding=ks // 2), nn.BatchNorm1d(nf), nn.ReLU())


class FCN(nn.Module):
    def __init__(self, c_in, c_out, layers=(32, 64, 32), kss=(7, 5, 3)):
        super().__init__()
        self.convblock1 = ConvBlock(c_in, layers[0], kss[0])
        self.convblock2 = ConvBlock(layers[0], layers[1], kss[1])
        self.convblock3 = ConvBlock(layers[1], layers[2], kss[2])
        self.gap = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(layers[-1], c_out)

    def forward(self, x):
        x = self.convblock3(self.convblock2(self.convblock1(x)))
        return self.fc(self.gap(x).squeeze(-1))


class MSLELoss(nn.Module):
    def __init__(self, reduction='mean'):
        super().__init__()
        assert reduction in ['mean', 'sum', 'none'], "You must set reduction to 'mean', 'sum' or 'none'"
        self.reduction = reduction
        self.mse = nn.MSELoss(reduction=reduction)

    def forward(self, input, target):
        loss = self.mse(torch.log(input.view(-1) + 1), torch.log(target + 1))
        return loss


def main():
    train_dl = DataLoader(DecaySeries(1536, 0), batch_size=64, shuffle=True)
    valid_dl = DataLoader(DecaySeries(512, 1), batch_size=256)
    model = FCN(N_VARS, 1)
    loss_func = MSLELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    for epoch in range(4):
        model.train()
        train_loss = 0.0
        for i, (xb, yb) in enumerate(train_dl):
            pred = model(xb)
            loss = loss_func(pred, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            train_loss += loss.item()
            if i % 8 == 0:
                print(f"epoch {epoch} batch {i:2d} loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            valid_loss = sum(loss_func(model(xb), yb).item() for xb, yb in valid_dl) / len(valid_dl)
        print(f"epoch {epoch} train_loss {train_loss / len(train_dl):.4f} valid_loss {valid_loss:.4f}")


if __name__ == "__main__":
    main()
