"""Mixed-precision MLP regressor: bfloat16 autocast on CPU with a dynamic GradScaler.

The loop is the "typical use" from the AMP examples: scale the loss, backward,
scaler.step (which unscales, and skips optimizer.step when it finds inf/NaN
gradients), then scaler.update (which halves the scale after a skipped step and
grows it again after a run of good steps). The scale starts at the top of the
float32 range, so the first few steps overflow and are skipped until the scaler
has backed off -- the same thing a GPU fp16 run does at its default 65536.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def make_data(n, dim=16, seed=0):
    """Tabular regression; the target sits around 12 with a nonlinear part on top."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    w = torch.randn(dim, generator=g)
    y = 12.0 + 3.0 * torch.sin(x @ w / 2) + x[:, 0] * x[:, 1] + 0.1 * torch.randn(n, generator=g)
    return x, y


class Regressor(nn.Module):
    def __init__(self, dim=16, hidden=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(-1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--init-scale", type=float, default=2.0 ** 127)
    args = parser.parse_args()

    torch.manual_seed(0)
    x, y = make_data(4096)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)

    model = Regressor()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler("cpu", init_scale=args.init_scale, growth_interval=200)

    step = 0
    skipped = 0
    for epoch in range(args.epochs):
        running = 0.0
        for i, (inputs, targets) in enumerate(loader):
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                preds = model(inputs)
                loss = F.mse_loss(preds, targets)

            scaler.scale(loss).backward()
            scale_before = scaler.get_scale()
            scaler.step(optimizer)
            scaler.update()
            step += 1
            if scaler.get_scale() < scale_before:
                skipped += 1
                print(f"step {step}: gradient overflow, skipping step, "
                      f"scale -> {scaler.get_scale():.3e}")

            running += loss.item()
            if (i + 1) % 16 == 0:
                print(f"epoch {epoch} step {step:4d} mse {running / 16:.4f} "
                      f"scale {scaler.get_scale():.3e}")
                running = 0.0
    print(f"done: {step} steps, {skipped} skipped by the scaler")


if __name__ == "__main__":
    main()
