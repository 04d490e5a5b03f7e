"""The big-batch workload: a trivial model trained for a few steps on batches of ``--mib`` MiB each.

Runs bare (``python bench/big_batch.py``) and under the agent. Each batch is a fresh float32 tensor
from a DataLoader (no collation: ``batch_size=None``), as a loader that reads large samples yields
them, so the agent sees and may keep every one. The last line is a JSON summary: the RSS at the
end (the loop's last batch still alive, as in a real loop) and the process's peak RSS.
"""

import argparse
import json
import resource

import psutil
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES = 1024


class FreshBatches(Dataset):
    """``steps`` batches of ``rows`` x FEATURES uniform values, each allocated when asked for."""

    def __init__(self, steps: int, rows: int) -> None:
        self.steps, self.rows = steps, rows

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.rand(self.rows, FEATURES)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=64, help="bytes of each batch, in MiB")
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = args.mib * 2**20 // (4 * FEATURES)
    model = nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for x in DataLoader(FreshBatches(args.steps, rows), batch_size=None):
        loss = model(x).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"summary": True, "rss_end": psutil.Process().memory_info().rss, "rss_peak": peak}), flush=True)


if __name__ == "__main__":
    main()
