"""Regress a 6-DoF camera motion from a pair of flattened feature maps, trained with accelerate.

The scheduler is optional (--scheduler none|step), as in the SfmLearner training script.
"""
import argparse

import torch
import torch.nn as nn
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset


class FramePairDataset(Dataset):
    """Two feature vectors per sample; the pose is a fixed nonlinear function of their difference."""

    def __init__(self, n, dim=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.ref = torch.randn(n, dim, generator=g)
        motion = torch.randn(n, 6, generator=g) * 0.5
        mixing = torch.randn(6, dim, generator=torch.Generator().manual_seed(99))
        self.tgt = self.ref + torch.tanh(motion @ mixing)
        self.pose = motion

    def __len__(self):
        return len(self.pose)

    def __getitem__(self, idx):
        return {"ref": self.ref[idx], "tgt": self.tgt[idx], "pose": self.pose[idx]}


class PoseNet(nn.Module):
    def __init__(self, dim=32, hidden=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2 * dim, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 6),
        )

    def forward(self, ref, tgt):
        return self.net(torch.cat([ref, tgt - ref], dim=1))


def parse_args():
    parser = argparse.ArgumentParser(description="pose regression")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("-b", "--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--scheduler", choices=["none", "step"], default="none")
    parser.add_argument("--lr-step", type=int, default=3, help="epochs between lr decays")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    accelerator = Accelerator(cpu=True)

    train_set = FramePairDataset(1280, seed=1)
    val_set = FramePairDataset(256, seed=2)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)

    model = PoseNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.999))
    scheduler = None
    if args.scheduler == "step":
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.lr_step * len(train_loader), gamma=0.5)

    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)
    if scheduler:
        scheduler = accelerator.prepare(scheduler)
    criterion = nn.SmoothL1Loss()

    n_iter = 0
    for epoch in range(args.epochs):
        model.train()
        running = 0.0
        for i, batch in enumerate(train_loader):
            pred = model(batch["ref"], batch["tgt"])
            loss = criterion(pred, batch["pose"])

            optimizer.zero_grad()
            accelerator.backward(loss)
            if scheduler:
                scheduler.step()
            else:
                optimizer.step()

            running += loss.item()
            n_iter += 1
            if n_iter % 20 == 0:
                accelerator.print(f"iter {n_iter:4d}  loss {loss.item():.4f}")

        model.eval()
        with torch.no_grad():
            val_loss = criterion(model(val_set.ref, val_set.tgt), val_set.pose).item()
        accelerator.print(f"epoch {epoch}  train loss {running / len(train_loader):.4f}  val loss {val_loss:.4f}")


if __name__ == "__main__":
    main()
