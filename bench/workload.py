"""One benchmark workload: a small CNN, an MLP or a tiny model, trained step after step.

The same code runs bare (``python bench/workload.py``) and under the agent. With ``--control
FIFO`` it warms up, then runs one segment of ``--segment-steps`` steps per line it reads from the
FIFO and prints that segment's median and mean step time as a JSON line: the bench alternates
segments between a bare and an agent process, so both see the same machine load. Without it, it
runs ``--steps`` steps. Either way the last line is a JSON summary with the RSS after warm-up and at
the end. A step is one loop iteration, data loading included. One intra-op thread by default: on a
small shared box, OpenMP threads that spin while descheduled make step times swing tenfold.
"""

import argparse
import json
import statistics
import time
from collections.abc import Iterator

import psutil
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build(kind: str) -> tuple[nn.Module, TensorDataset, int]:
    if kind == "tiny":  # for long runs: memory, not speed
        model = nn.Sequential(nn.Flatten(), nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
        return model, TensorDataset(torch.randn(1024, 1, 4, 4), torch.randint(0, 10, (1024,))), 32
    if kind == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
        return model, TensorDataset(torch.randn(4096, 1, 28, 28), torch.randint(0, 10, (4096,))), 64
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 5 * 5, 10),
    )
    return model, TensorDataset(torch.randn(2048, 1, 28, 28), torch.randint(0, 10, (2048,))), 32


def batches(loader: DataLoader) -> Iterator:
    while True:
        yield from loader


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=["mlp", "cnn", "tiny"])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--control", help="a FIFO: one segment per line read from it")
    parser.add_argument("--segment-steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, data, batch_size = build(args.model)
    stream = batches(DataLoader(data, batch_size=batch_size, shuffle=True, drop_last=True))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    def run(steps: int) -> list[float]:
        times = []
        last = time.perf_counter()
        for _ in range(steps):
            x, y = next(stream)
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            now = time.perf_counter()
            times.append(now - last)
            last = now
        return times

    process = psutil.Process()
    run(args.warmup)
    rss_warm = process.memory_info().rss
    summary = {}
    if args.control:
        with open(args.control) as control:
            for _ in control:
                times = run(args.segment_steps)
                print(json.dumps({"median_step": statistics.median(times), "mean_step": statistics.mean(times)}),
                      flush=True)
    else:
        times = run(args.steps - args.warmup)
        summary = {"median_step": statistics.median(times), "mean_step": statistics.mean(times)}
    print(json.dumps({**summary, "summary": True, "rss_warm": rss_warm, "rss_end": process.memory_info().rss}),
          flush=True)


if __name__ == "__main__":
    main()
