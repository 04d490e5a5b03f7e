"""Ways for a probe to run the user's pipeline on one batch, and to slice a batch.

``ReplayTrainer`` hands the batch to the user's own loop through the DataLoader hook: their
forward, their loss code, their backward and step (see ``probing.ProbeRuntime``). ``CopyTrainer``
trains a deep copy of the model and optimizer with what the hooks observed (the model's inputs and
an ``nn.Module`` loss) or the loss function given to ``tuidebug.watch``; it is what works when the
loop is gone (post-mortem) or there is no DataLoader.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from tuidebug.agent.core import Agent
    from tuidebug.agent.probing import ProbeRuntime


class NoPipeline(Exception):
    """No way to run the pipeline: the message says what the user can add."""


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any], depth: int = 0) -> Any:
    """``value`` with ``fn`` applied to every tensor, through tuples, lists, dicts and dataclasses."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if depth > 6:
        return value
    if isinstance(value, dict):
        return type(value)({k: map_tensors(v, fn, depth + 1) for k, v in value.items()})
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(map_tensors(v, fn, depth + 1) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(map_tensors(v, fn, depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: map_tensors(getattr(value, f.name), fn, depth + 1) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value


def slice_batch(batch: Any, count: int, size: int | None) -> Any:
    """The first ``count`` examples: every tensor whose leading dimension is the batch size is cut."""
    if size is None:
        return batch
    return map_tensors(batch, lambda t: t[:count].clone() if t.dim() > 0 and t.shape[0] == size else t)


class ReplayTrainer:
    method = "replay through the script's own loop"

    def __init__(self, runtime: ProbeRuntime, batch: Any, size: int | None) -> None:
        self.runtime = runtime
        self.batch = batch
        self.size = size
        self.iterations = 0

    def prepare(self, examples: int) -> Any:
        return slice_batch(self.batch, examples, self.size)

    def step(self, batch: Any) -> float | None:
        """One iteration of the user's loop on ``batch``; the mean loss that went backward."""
        self.iterations += 1
        return self.runtime.replay_iteration(batch)

    def note(self) -> str:
        return (f"borrowed {self.iterations} iteration(s) of the script's loop: its own counters and logs saw "
                "them; model, optimizer, schedulers, scaler and RNG were restored afterwards")

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        model = self.runtime.agent.model
        return list(model.named_parameters()) if model is not None else []

    def close(self) -> None:
        """Nothing to free: the runtime restores the snapshot."""


class CopyTrainer:
    """Trains a deep copy of (model, optimizer): the real ones are never touched."""

    def __init__(self, agent: Agent) -> None:
        observed = agent.observed
        if observed.watch_loss is not None and agent.batches:
            self.method = "copy of model and optimizer with the loss given to tuidebug.watch"
            self._loss = observed.watch_loss
            self.inputs, self.size = agent.batches[-1].batch, agent.batches[-1].size
        elif observed.model_inputs is not None and observed.criterion is not None:
            self.method = "copy of model and optimizer with the observed inputs and loss module"
            self._loss = self._observed_loss
            self.inputs, self.size = (observed.model_inputs, observed.criterion_targets), observed.input_size
        else:
            raise NoPipeline(
                "the loss was computed by code tuidebug cannot replay here (no DataLoader loop to replay, "
                "no nn.Module loss seen): add `tuidebug.watch(model, optimizer, loss_fn=lambda model, batch: ...)`"
            )
        optimizer = agent.optimizers[0] if agent.optimizers else None
        if observed.model is None or optimizer is None:
            raise NoPipeline("no model and optimizer seen yet: let the script run at least one step")
        self.criterion = observed.criterion
        self.model, self.optimizer = copy.deepcopy((observed.model, optimizer))

    def prepare(self, examples: int) -> Any:
        return slice_batch(self.inputs, examples, self.size)

    def step(self, batch: Any) -> float | None:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._loss(self.model, batch)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def _observed_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        (args, kwargs), targets = batch
        return self.criterion(model(*args, **kwargs), *targets)

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        return list(self.model.named_parameters())

    def note(self) -> str:
        return "trained a copy: the real model and optimizer were not touched"

    def close(self) -> None:
        self.model = self.optimizer = None
