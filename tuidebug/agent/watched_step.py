"""One real iteration of the user's loop watched op by op: what no hook sees in a loss written by hand.

A loss function of torch.nn is seen by its wrapper (``hooks.py``); ``(pred - y) ** 2`` or
``returns - values`` is a handful of tensor ops on the user's lines. Once per run, from the end of
step WATCHED_STEP to the end of the next, a TorchFunctionMode looks at those ops (the run's own
iteration, nothing replayed: it costs one slower step). A run that calls a model compiled with
``torch.compile`` is not watched (``done`` is set): a mode entered around it would make dynamo
compile it again.
"""

from __future__ import annotations

import torch

from tuidebug.probes.shape import SilentShapes

# The iteration after the second step: the first may build lazy modules and warm caches, and a
# failure in the first steps is diagnosed without it.
WATCHED_STEP = 2


class WatchedStep:
    def __init__(self) -> None:
        self.watch: SilentShapes | None = None
        self.done = False  # watched once already, or not to be watched

    def begin(self, step: int, batch: int | None, loader_batch: int | None) -> None:
        """At a step's end, once the loop goes on (after a pause and its probes): the watch starts after
        step WATCHED_STEP, once; ``batch`` is the model's batch size (its input's first dim),
        ``loader_batch`` the batch_size of the DataLoader that feeds the loop, if one does."""
        if not self.done and self.watch is None and step >= WATCHED_STEP:
            self.done = True
            self.watch = SilentShapes(batch, loader_batch)
            self.watch.__enter__()

    def end(self) -> SilentShapes | None:
        """At the next step's end (or the loop's): the watch, once it has ended, else None."""
        return self._end() if self.watch is not None else None

    def _end(self) -> SilentShapes | None:
        """Leaves the mode when it is the innermost one of this thread (a mode the user entered within the
        iteration and has not left yet must stay: the watch ends at a later step instead)."""
        depth = torch._C._len_torch_function_stack()
        if not depth or torch._C._get_function_stack_at(depth - 1) is not self.watch:
            return None
        watch, self.watch = self.watch, None
        watch.__exit__(None, None, None)
        return watch
