"""The 2-rank benchmark workload: an MLP under DistributedDataParallel on CPU (gloo), started by
torchrun. Rank 0 prints, last, a JSON line with the median step time after warm-up."""

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--warmup", type=int, default=30)
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
times = []
for step in range(args.warmup + args.steps):
    began = time.perf_counter()
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    times.append(time.perf_counter() - began)
if dist.get_rank() == 0:
    print(json.dumps({"median_step": statistics.median(times[args.warmup:])}), flush=True)
dist.destroy_process_group()
