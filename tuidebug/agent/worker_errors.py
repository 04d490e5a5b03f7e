"""An exception raised in a DataLoader's worker process, read from the text torch re-raises it with.

With ``num_workers > 0`` a Dataset's ``__getitem__`` or a ``collate_fn`` runs in another process: the
exception the loop sees is a copy, raised at the loop's ``for batch in loader:``, whose message holds the
worker's formatted traceback ("Caught KeyError in DataLoader worker process 1. Original Traceback ...").
The line to fix is in that text, not in the copy's own traceback, and the loop's local variables there
are the previous batch's, not the failing one's.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from torch.utils.data import IterableDataset
from torch.utils.data.dataloader import _BaseDataLoaderIter

from tuidebug.sites import Site, frame_locals, is_user_file

WORKER_HEADER = re.compile(r"^Caught (\w+) in DataLoader worker process (\d+)\.\s*\n"
                           r"Original Traceback \(most recent call last\):\n", re.MULTILINE)
FRAME = re.compile(r'^  File "(.+?)", line (\d+), in (.+)$')


@dataclass
class WorkerError:
    worker: int
    type_name: str  # "JSONDecodeError": the bare class name (the last line qualifies one outside builtins)
    exception: str  # "KeyError: 'label'": the worker's own last line(s)
    sites: list[Site]  # the user's frames in the worker, outermost first
    innermost: str  # the worker's innermost named function (not a comprehension), the user's or a library's

    @property
    def site(self) -> Site | None:
        return self.sites[-1] if self.sites else None

    @property
    def role(self) -> str:
        """What the user's innermost function in the worker was doing, in words."""
        if self.collating:
            return f"putting the samples into a batch ({self.innermost})"
        function = self.site.function if self.site else ""
        if function == "__getitem__":
            return "loading one sample (the Dataset's __getitem__)"
        return f"in {function}" if function else "in torch's own loading code"

    @property
    def collating(self) -> bool:
        return "collate" in self.innermost


def failing_dataset(tb: TracebackType | None) -> Any:
    """The dataset of the DataLoader whose iterator re-raised the worker's exception (torch's own frame holds
    it), not of the loader that gave the latest batch: a validation loader can fail after the training one."""
    found = None
    while tb is not None:
        owner = frame_locals(tb.tb_frame).get("self")
        if isinstance(owner, _BaseDataLoaderIter):
            found = owner._dataset
        tb = tb.tb_next
    return found


def read_worker_error(message: str) -> WorkerError | None:
    """The worker's exception and the user's frames it passed through, from a re-raised exception's message."""
    header = WORKER_HEADER.search(message)
    if header is None:
        return None
    lines = message[header.end():].splitlines()
    sites, last_frame, innermost = [], -1, ""
    for index, line in enumerate(lines):
        frame = FRAME.match(line)
        if frame is not None:
            last_frame = index
            path, number, function = frame.group(1), int(frame.group(2)), frame.group(3)
            innermost = function if not function.startswith("<") else innermost
            if is_user_file(path):
                sites.append(Site(path, number, function))
    # The worker's exception follows its last frame's indented source lines (and may itself span lines).
    tail = lines[last_frame + 1:]
    start = next((i for i, line in enumerate(tail) if line and not line.startswith(" ")), len(tail))
    exception = " ".join(line.strip() for line in tail[start:] if line.strip())
    return WorkerError(int(header.group(2)), header.group(1), exception or header.group(1), sites, innermost)


# How long the crash analysis may spend calling the Dataset again, in the script's own process, to find the
# sample whose loading raises: long enough for tens of thousands of in-memory samples, short beside the
# diagnose deadline; a dataset that reads files from disk gets only as far as its first few thousand.
SAMPLE_SCAN_SECONDS = 3.0


def failing_sample(dataset: Any, error: WorkerError,
                   seconds: float = SAMPLE_SCAN_SECONDS) -> tuple[int, Exception | str] | None:
    """The first index whose ``dataset[index]`` raises the worker's type of exception again here, and that
    exception (its traceback holds the loading code's frames and values); where the error came from putting
    the samples together, the first sample holding None, and where. None where no sample does either in the
    time given (a random augmentation, a dataset too slow to scan)."""
    if isinstance(dataset, IterableDataset):
        return None  # no index to name (even where it defines __len__)
    try:
        length = len(dataset)
    except TypeError:
        return None
    name = error.type_name
    deadline = time.monotonic() + seconds  # checked between samples: one that hangs is not cut short
    for index in range(length):
        if time.monotonic() > deadline:
            return None
        try:
            sample = dataset[index]
        except Exception as exc:  # the user's loading code, whatever it raises
            if type(exc).__name__ == name:
                return index, exc
            continue
        empty = _none_in(sample) if error.collating else None
        if empty is not None:
            return index, empty
    return None


def _none_in(sample: Any) -> str | None:
    """Where a sample holds None, which no collate can put in a batch: "the sample itself", "item 2"."""
    if sample is None:
        return "the sample itself"
    items = sample.items() if isinstance(sample, dict) else enumerate(sample) if isinstance(sample, (tuple, list)) else ()
    return next((f"item {key!r}" for key, value in items if value is None), None)
