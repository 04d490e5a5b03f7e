"""A DistributedDataParallel job on CPU (gloo), for the multi-process tests: ``--nan-rank R --nan-at K``
makes rank R's loss non-finite at step K; ``--kill-rank R --kill-at K`` kills rank R there; ``--slow-rank R`` makes rank R load each batch 30 ms
late (a straggler)."""

import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--nan-rank", type=int)
parser.add_argument("--nan-at", type=int, default=10)
parser.add_argument("--kill-rank", type=int)
parser.add_argument("--kill-at", type=int, default=10)
parser.add_argument("--slow-rank", type=int)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
x = torch.randn(4096, 8)
y = x.sum(1, keepdim=True)
data = TensorDataset(x, y)
loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data))
model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
for xb, yb in loader:
    step += 1
    if rank == args.kill_rank and step == args.kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == args.slow_rank:
        time.sleep(0.03)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(xb), yb)
    if rank == args.nan_rank and step >= args.nan_at:
        loss = loss * float("nan")
    loss.backward()
    optimizer.step()
    print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    time.sleep(args.sleep)
    if step == args.steps:
        break
dist.destroy_process_group()
