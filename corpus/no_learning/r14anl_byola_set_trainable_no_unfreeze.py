"""Transfer of a BYOL-A style audio embedding network (AudioNTT2020) to a new sound-event task.

Stage 0 trains the encoder on the source task (machine-sound types), stage 1 warms up the new
linear head on the target task (alarm types) with the encoder frozen, stage 2 unfreezes the
encoder and fine-tunes everything. Inputs are synthetic log-mel patches (64 mels x 32 frames).
"""
import time
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
N_MELS, N_FRAMES = 64, 32


class NetworkCommonMixIn():
    """Common mixin for network definition."""

    def set_trainable(self, trainable=False):
        for p in self.parameters():
            if p.requires_grad:
                p.requires_grad = trainable


class AudioNTT2020Task6(nn.Module, NetworkCommonMixIn):
    """DCASE2020 Task6 NTT Solution Audio Embedding Network."""

    def __init__(self, n_mels, d):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, stride=1, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2, stride=2),

            nn.Conv2d(32, 32, 3, stride=1, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2, stride=2),

            nn.Conv2d(32, 32, 3, stride=1, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2, stride=2),
        )
        self.fc = nn.Sequential(
            nn.Linear(32 * (n_mels // (2**3)), d),
            nn.ReLU(),
            nn.Dropout(p=0.3),
            nn.Linear(d, d),
            nn.ReLU(),
        )
        self.d = d

    def forward(self, x):
        x = self.features(x)       # (batch, ch, mel, time)
        x = x.permute(0, 3, 2, 1)  # (batch, time, mel, ch)
        B, T, D, C = x.shape
        x = x.reshape((B, T, C*D))  # (batch, time, mel*ch)
        x = self.fc(x)
        return x


class AudioNTT2020(AudioNTT2020Task6):
    def __init__(self, n_mels=64, d=256):
        super().__init__(n_mels=n_mels, d=d)

    def forward(self, x):
        x = super().forward(x)
        (x1, _) = torch.max(x, dim=1)
        x2 = torch.mean(x, dim=1)
        x = x1 + x2
        return x


def make_clips(n, n_classes, seed, band_lo, band_hi, pulse):
    """Source classes: a pair of steady harmonic bands in [band_lo, band_hi). Target classes:
    the same pair of bands for every class, pulsed at a class-specific rate and duty cycle."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, n_classes, (n,), generator=g)
    x = 0.5 * torch.randn(n, 1, N_MELS, N_FRAMES, generator=g)
    t = torch.arange(N_FRAMES).float()
    for i in range(n):
        c = int(y[i])
        if pulse:
            b1, b2 = band_lo, band_lo + 12
            period = 2 ** (c + 1)
            shift = int(torch.randint(0, period, (1,), generator=g))
            env = (((t.long() + shift) // period) % 2 == 0).float() if c < 3 else torch.ones(N_FRAMES)
        else:
            b1 = band_lo + (c * 5) % (band_hi - band_lo - 3)
            b2 = band_lo + (c * 11 + 7) % (band_hi - band_lo - 3)
            env = torch.ones(N_FRAMES)
        gain = 1.0 + 0.5 * torch.rand(1, generator=g)
        x[i, 0, b1:b1 + 3] += gain * env
        x[i, 0, b2:b2 + 2] += 0.7 * gain * env
    return x, y


def run_epoch(model, head, loader, optimizer, criterion, stage, step):
    model.train()
    head.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(head(model(x)), y)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"[{stage}] step {step:4d} loss {loss.item():.4f}")
        step += 1
    return step


def accuracy(model, head, x, y):
    model.eval()
    head.eval()
    with torch.no_grad():
        return (head(model(x)).argmax(1) == y).float().mean().item()


def main():
    start = time.time()
    criterion = nn.CrossEntropyLoss()
    model = AudioNTT2020(n_mels=N_MELS, d=256)

    # stage 0: source task
    xs, ys = make_clips(1280, 8, 1, band_lo=0, band_hi=40, pulse=False)
    src_head = nn.Linear(256, 8)
    opt = torch.optim.Adam(list(model.parameters()) + list(src_head.parameters()), lr=1e-3)
    step = 0
    step = run_epoch(model, src_head, DataLoader(TensorDataset(xs, ys), batch_size=32, shuffle=True),
                     opt, criterion, "source", step)
    print(f"source acc {accuracy(model, src_head, xs[:400], ys[:400]):.3f}")

    # target task
    xt, yt = make_clips(1280, 4, 2, band_lo=30, band_hi=64, pulse=True)
    xv, yv = make_clips(400, 4, 3, band_lo=30, band_hi=64, pulse=True)
    target_loader = DataLoader(TensorDataset(xt, yt), batch_size=32, shuffle=True)
    head = nn.Linear(256, 4)

    # stage 1: warm up the head on frozen features
    model.set_trainable(False)
    opt = torch.optim.Adam(head.parameters(), lr=1e-3)
    step = run_epoch(model, head, target_loader, opt, criterion, "head", step)
    print(f"after head warm-up: val acc {accuracy(model, head, xv, yv):.3f}")

    # stage 2: unfreeze and fine-tune everything
    model.set_trainable(True)
    opt = torch.optim.Adam([{"params": model.parameters(), "lr": 3e-4},
                            {"params": head.parameters(), "lr": 1e-3}])
    for epoch in range(2):
        step = run_epoch(model, head, target_loader, opt, criterion, "finetune", step)
        print(f"fine-tune epoch {epoch}: val acc {accuracy(model, head, xv, yv):.3f} "
              f"({time.time() - start:.1f}s)")


if __name__ == "__main__":
    main()
