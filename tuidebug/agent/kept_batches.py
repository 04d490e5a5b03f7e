"""The recent batches (and model inputs) the agent holds by reference for replays, within a byte budget.

Replays run every step since the rolling checkpoint on the batches that fed them, so the agent keeps
the last ``keep_batches`` of them alive. Sixteen batches of a few MiB cost nothing; sixteen of
512 MiB would be 8 GiB the script never asked for. Past the byte budget the oldest are let go (the
replays then cycle through the ones kept, as they already do when the checkpoint is further back than
the window) and ``not_kept`` says so, for the inspector and the bundle.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

import torch

from tuidebug.format import bytes_text

# The default budget: the window costs at most this much beyond the batch the script holds anyway,
# so the agent's extra memory stays within "one batch + 64 MiB" whatever the batch size (big batches
# keep KEPT_AT_LEAST, the failing one and the one before it). Batches up to 4 MiB (the corpus's are
# KiB to a few MiB) keep all 16 steps, as under the old fixed 256 MiB; larger ones keep fewer and the
# replays cycle through them. A fixed figure, not a share of RAM: a big host must not hold more.
DEFAULT_BUDGET = 64 * 2**20
# Never fewer than this, whatever the budget: the latest batch is the failing one, except in a loop
# that reads one batch ahead (Lightning, accelerate), where it is the one before it.
KEPT_AT_LEAST = 2


class Stepped(Protocol):
    step: int


Item = TypeVar("Item", bound=Stepped)


def tensor_bytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class KeptBatches(Generic[Item]):
    """The last ``count`` items (oldest first) within ``budget`` bytes (None: DEFAULT_BUDGET)."""

    def __init__(self, count: int, budget: int | None) -> None:
        self.count = count
        self.budget = DEFAULT_BUDGET if budget is None else budget
        self._items: collections.deque[tuple[Item, int]] = collections.deque(maxlen=count)
        self._held = 0  # the sizes of _items, summed as they come and go (an append runs at every step)
        self._cut_step: int | None = None  # the newest step let go for the budget, not for the count

    def append(self, item: Item, tensors: list[torch.Tensor]) -> None:
        """Keep ``item``, which holds ``tensors`` (found by the hook's one walk of the batch); let the oldest
        go past the budget."""
        if self.count <= 0:
            return
        size = tensor_bytes(tensors)
        if len(self._items) == self.count:
            self._held -= self._items[0][1]  # the deque lets its oldest go as this one comes
        self._items.append((item, size))
        self._held += size
        while len(self._items) > KEPT_AT_LEAST and self._held > self.budget:
            gone, gone_size = self._items.popleft()
            self._held -= gone_size
            self._cut_step = gone.step

    def held(self) -> int:
        return self._held

    @property
    def not_kept(self) -> str:
        """Why fewer than ``count`` steps are kept, when the budget is the reason; else ""."""
        if self._cut_step is None or len(self._items) == self.count:
            return ""
        return (f"batches up to step {self._cut_step} not kept: more would exceed the {bytes_text(self.budget)} "
                f"budget for batches held for replays ({len(self._items)} kept, {bytes_text(self.held())})")

    def __iter__(self) -> Iterator[Item]:
        return (item for item, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Item:
        return self._items[index][0]
