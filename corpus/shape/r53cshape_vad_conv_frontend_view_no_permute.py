"""Frame-level voice activity detection on log-mel spectrograms.

A LAS/DeepSpeech-style front end (2D convs over frequency x time) feeds a
bidirectional GRU that labels every frame as speech / non-speech.
"""
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
N_MELS, N_FRAMES = 32, 64


class SyntheticVAD(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.specs = torch.randn(n, 1, N_MELS, N_FRAMES, generator=g) * 0.5
        self.labels = torch.zeros(n, N_FRAMES)
        for i in range(n):
            for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
                start = int(torch.randint(0, N_FRAMES - 8, (1,), generator=g))
                length = int(torch.randint(4, 16, (1,), generator=g))
                end = min(N_FRAMES, start + length)
                f0 = int(torch.randint(2, 8, (1,), generator=g))
                for k in range(1, 4):
                    self.specs[i, 0, min(N_MELS - 1, f0 * k), start:end] += 1.0
                self.labels[i, start:end] = 1.0

    def __len__(self):
        return len(self.specs)

    def __getitem__(self, i):
        return self.specs[i], self.labels[i]


class ConvFrontEnd(nn.Module):
    def __init__(self, hidden_dim=16):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, hidden_dim, 3, stride=(2, 1), padding=1),
            nn.BatchNorm2d(hidden_dim), nn.Hardtanh(0, 20),
            nn.Conv2d(hidden_dim, hidden_dim, 3, stride=(2, 1), padding=1),
            nn.BatchNorm2d(hidden_dim), nn.Hardtanh(0, 20),
        )

    def forward(self, x):
        return self.conv(x)


class VADModel(nn.Module):
    def __init__(self, hidden_dim=16, rnn_hidden=32):
        super().__init__()
        self.front = ConvFrontEnd(hidden_dim)
        self.rnn = nn.GRU(hidden_dim * (N_MELS // 4), rnn_hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * rnn_hidden, 1)

    def forward(self, specs):
        conv_feat = self.front(specs)
        batch_size, hidden_dim, num_channels, seq_length = conv_feat.size()
        conv_feat = conv_feat.contiguous().view(batch_size, seq_length, num_channels * hidden_dim)
        out, _ = self.rnn(conv_feat)
        return self.fc(out).squeeze(-1)


def main():
    train_ds, val_ds = SyntheticVAD(512, 1), SyntheticVAD(200, 2)
    train_dl = DataLoader(train_ds, batch_size=32, shuffle=True)
    val_dl = DataLoader(val_ds, batch_size=100)
    model = VADModel()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    step = 0
    t0 = time.time()
    for epoch in range(4):
        model.train()
        for specs, labels in train_dl:
            logits = model(specs)
            loss = F.binary_cross_entropy_with_logits(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f}")
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for specs, labels in val_dl:
                pred = (model(specs) > 0).float()
                correct += (pred == labels).sum().item()
                total += labels.numel()
        print(f"epoch {epoch + 1} val frame acc {correct / total:.3f} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
