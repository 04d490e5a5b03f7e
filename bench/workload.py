"""One benchmark workload: a small CNN, an MLP, a tiny model or a scale point, trained step after step.

The same code runs bare (``python bench/workload.py``) and under the agent. With ``--control
FIFO`` it warms up, then runs one segment of ``--segment-steps`` steps per line it reads from the
FIFO and prints that segment's median and mean step time as a JSON line: the bench alternates
segments between a bare and an agent process, so both see the same machine load. Without it, it
runs ``--steps`` steps. With ``--count-reads`` each segment also gives the host reads of tensor values
(``item``, ``tolist``, ``cpu``, ``numpy``, ``float``, ``bool``, ``int``) the training thread made per step:
on a GPU each is a device sync; on this CPU-only box, counting them is how the bench counts syncs. Either way the last line is a JSON summary with the RSS after warm-up and at
the end. A step is one loop iteration, data loading included. One intra-op thread by default: on a
small shared box, OpenMP threads that spin while descheduled make step times swing tenfold.
"""

import argparse
import json
import statistics
import sys
import time
import threading
from collections.abc import Callable, Iterator

import psutil
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


# The scale points of ``make bench``: models with 10, 1,000 and 10,000 parameter tensors (half as many
# small heads over one input: a module call per two tensors, as in a deep network), and MLPs whose bare
# step takes about 0.3 ms and 30 ms on a 2-core VM (the "mlp" takes about 3 ms).
WIDE_HEADS = {"tensors-10": 5, "tensors-1000": 500, "tensors-10000": 5000}
SCALE_MLP = {"step-0.3ms": (16, 16, 8), "step-15ms": (784, 768, 192), "step-30ms": (784, 1024, 256)}  # inputs, width, batch
READS = ("item", "tolist", "cpu", "numpy", "__float__", "__bool__", "__int__")


class Wide(nn.Module):
    def __init__(self, heads: int) -> None:
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(16, 4) for _ in range(heads))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([head(x.flatten(1)) for head in self.heads]).sum(0)


def build(kind: str) -> tuple[nn.Module, TensorDataset, int]:
    if kind in WIDE_HEADS:
        return Wide(WIDE_HEADS[kind]), TensorDataset(torch.randn(1024, 16), torch.randint(0, 4, (1024,))), 32
    if kind in SCALE_MLP:
        inputs, width, batch = SCALE_MLP[kind]
        model = nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                              nn.Linear(width, 10))
        return model, TensorDataset(torch.randn(4096, inputs), torch.randint(0, 10, (4096,))), batch
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


def training(kind: str) -> Callable[[int], list[float]]:
    """The workload's loop (seeded, Adam, cross-entropy): a function that runs that many steps and
    returns each one's time, data loading included."""
    torch.manual_seed(0)
    model, data, batch_size = build(kind)
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

    return run


def batches(loader: DataLoader) -> Iterator:
    while True:
        yield from loader


class ReadCounter:
    """Counts the training thread's reads of tensor values, by wrapping torch.Tensor's reading methods
    (before the agent's hooks are installed, so its reads go through the wrappers too)."""

    def __init__(self) -> None:
        self.count = 0
        self.thread = threading.current_thread()
        for name in READS:
            setattr(torch.Tensor, name, self._counted(getattr(torch.Tensor, name)))

    def _counted(self, read: Callable) -> Callable:
        def counted(tensor: torch.Tensor, *args, **kwargs):
            if threading.current_thread() is self.thread:
                self.count += 1
            return read(tensor, *args, **kwargs)
        return counted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=["mlp", "cnn", "tiny", *WIDE_HEADS, *SCALE_MLP])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--control", help="a FIFO: one segment per line read from it")
    parser.add_argument("--segment-steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--count-reads", action="store_true", help="count the host reads of tensor values per step")
    parser.add_argument("--results", help="also append each segment's JSON line to this file (under the screen)")
    parser.add_argument("--reads-as-on-a-gpu", action="store_true",
                        help="under the agent: it reads the losses as it would on a GPU (with the gradients, once)")
    args = parser.parse_args()
    reads = ReadCounter() if args.count_reads else None
    if args.reads_as_on_a_gpu and "tuidebug.agent.core" in sys.modules:
        sys.modules["tuidebug.agent.core"].blocks_host = lambda tensor: True
    torch.set_num_threads(args.threads)
    run = training(args.model)
    process = psutil.Process()
    run(args.warmup)
    rss_warm = process.memory_info().rss
    summary = {}
    if args.control:
        with open(args.control) as control:
            for _ in control:
                before = reads.count if reads else 0
                times = run(args.segment_steps)
                segment = {"median_step": statistics.median(times), "mean_step": statistics.mean(times)}
                if reads:
                    segment["reads_per_step"] = (reads.count - before) / args.segment_steps
                print(json.dumps(segment), flush=True)
                if args.results:
                    with open(args.results, "a") as results:
                        results.write(json.dumps(segment) + "\n")
    else:
        times = run(args.steps - args.warmup)
        summary = {"median_step": statistics.median(times), "mean_step": statistics.mean(times)}
    print(json.dumps({**summary, "summary": True, "rss_warm": rss_warm, "rss_end": process.memory_info().rss}),
          flush=True)


if __name__ == "__main__":
    main()
