"""WaveNet-style autoregressive model on raw (non mu-law) audio: a stack of dilated causal ReLU
convolutions with residual and skip connections predicts the next sample, trained with MSE."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

SEG = 256


class RawAudioSegments(Dataset):
    """Synthetic recordings: harmonic tones plus noise; some takes contain hand claps/door slams."""

    def __init__(self, n=512, sr=8000):
        g = torch.Generator().manual_seed(1)
        t = torch.arange(SEG + 1) / sr
        self.segments = []
        for _ in range(n):
            f0 = 100 + 300 * torch.rand(1, generator=g)
            x = sum((0.3 / k) * torch.sin(2 * math.pi * k * f0 * t + torch.rand(1, generator=g) * 6.28)
                    for k in range(1, 4))
            x = x + 0.01 * torch.randn(SEG + 1, generator=g)
            if torch.rand(1, generator=g) < 0.08:
                onset = int(torch.randint(0, SEG - 64, (1,), generator=g))
                burst = torch.randn(64, generator=g) * torch.exp(-torch.arange(64) / 12.0)
                x[onset:onset + 64] += 40.0 * burst
            self.segments.append(x)

    def __len__(self):
        return len(self.segments)

    def __getitem__(self, i):
        x = self.segments[i]
        return x[:-1].unsqueeze(0), x[1:].unsqueeze(0)


class CausalConv1d(nn.Conv1d):
    def __init__(self, cin, cout, k, dilation=1):
        super().__init__(cin, cout, k, dilation=dilation)
        self.left = (k - 1) * dilation

    def forward(self, x):
        return super().forward(F.pad(x, (self.left, 0)))


class ResidualBlock(nn.Module):
    def __init__(self, res_ch, skip_ch, dilation):
        super().__init__()
        self.dilated = CausalConv1d(res_ch, res_ch, 2, dilation)
        self.res = nn.Conv1d(res_ch, res_ch, 1)
        self.skip = nn.Conv1d(res_ch, skip_ch, 1)

    def forward(self, x):
        z = F.relu(self.dilated(x))
        return x + self.res(z), self.skip(z)


class WaveNet(nn.Module):
    def __init__(self, res_ch=24, skip_ch=32, dilations=(1, 2, 4, 8, 16, 32, 1, 2, 4, 8)):
        super().__init__()
        self.causal = CausalConv1d(1, res_ch, 2)
        self.blocks = nn.ModuleList(ResidualBlock(res_ch, skip_ch, d) for d in dilations)
        self.post1 = nn.Conv1d(skip_ch, skip_ch, 1)
        self.post2 = nn.Conv1d(skip_ch, 1, 1)

    def forward(self, x):
        h = self.causal(x)
        skips = 0
        for block in self.blocks:
            h, s = block(h)
            skips = skips + s
        return self.post2(F.relu(self.post1(F.relu(skips))))


def main():
    loader = DataLoader(RawAudioSegments(384), batch_size=8, shuffle=True)
    model = WaveNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.MSELoss()

    step = 0
    for epoch in range(3):
        total = 0.0
        for x, y in loader:
            pred = model(x)
            loss = criterion(pred, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            step += 1
            if step % 20 == 0:
                print(f"step {step:4d}  mse {loss.item():.5f}")
        print(f"epoch {epoch + 1}  mean mse {total / len(loader):.5f}")


if __name__ == "__main__":
    main()
