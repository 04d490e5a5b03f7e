"""Which rank of a torchrun job stands out: the straggler, and the rank whose memory grows.

Both compare each rank with the others of the same job, so a whole job that is slow or that grows
raises nothing here (the single-process checks cover those); what is flagged is one rank unlike the
rest, which points at its shard of the data, its device or code that runs on it alone.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

# Steps each rank must have reported before ranks are compared, and how many of the latest are compared.
# DDP equalises whole steps (every rank waits in the gradient all-reduce for the slowest), so the time
# compared is a step's data loading and forward, from the previous step's end to the first backward.
STRAGGLER_WINDOW = 20
# A rank is a straggler when its median data + forward time is this many times the median of the other
# ranks' medians, and longer by at least STRAGGLER_MIN_SECONDS. Equal shards on equal devices differ by
# scheduling noise: up to about 1.2x on a loaded two-core box in the distributed tests (two workers
# sharing two cores); 1.5x leaves room for that, and the floor keeps microsecond steps from raising it.
STRAGGLER_RATIO = 1.5
STRAGGLER_MIN_SECONDS = 0.005
# A rank's memory stands out when it grew this many bytes more than any other rank's since its first
# reading after training began, and at least twice as much: ranks hold the same model and batches of the
# same size, so their memory moves together; 256 MiB is above what a loader worker or an allocator
# round-up adds on one rank alone.
RANK_GROWTH_BYTES = 256 * 1024**2


@dataclass
class Straggler:
    rank: int
    seconds: float  # its median data + forward time
    others: float  # the median over the other ranks


def straggler(times: dict[int, list[float]]) -> Straggler | None:
    """The rank whose data + forward time is far above the others', given each rank's latest times."""
    medians = {rank: statistics.median(values[-STRAGGLER_WINDOW:]) for rank, values in times.items()
               if len(values) >= STRAGGLER_WINDOW}
    if len(medians) < 2 or len(medians) < len(times):
        return None
    slowest = max(medians, key=medians.__getitem__)
    others = statistics.median(value for rank, value in medians.items() if rank != slowest)
    mine = medians[slowest]
    if mine >= STRAGGLER_RATIO * others and mine - others >= STRAGGLER_MIN_SECONDS:
        return Straggler(slowest, mine, others)
    return None


def memory_outlier(growth: dict[int, int]) -> tuple[int, int, int] | None:
    """(rank, its growth, the largest other growth) for the one rank whose memory grew far more."""
    if len(growth) < 2:
        return None
    rank = max(growth, key=growth.__getitem__)
    others = max(value for r, value in growth.items() if r != rank)
    mine = growth[rank]
    if mine - max(others, 0) >= RANK_GROWTH_BYTES and mine >= 2 * max(others, 0):
        return rank, mine, others
    return None
