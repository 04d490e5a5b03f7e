"""Ways for a probe to run the user's pipeline on one batch, and to slice a batch.

``ReplayTrainer`` hands the batch to the user's own loop through the DataLoader hook: their
forward, their loss code, their backward and step (see ``probing.ProbeRuntime``). ``CopyTrainer``
trains a deep copy of the model and optimizer with what the hooks observed (the model's inputs and
an ``nn.Module`` loss) or the loss function given to ``tuidebug.watch``; it is what works when the
loop is gone (post-mortem) or there is no DataLoader.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ContextManager

import torch

from tuidebug.agent.snapshot import Snapshot

if TYPE_CHECKING:
    from tuidebug.agent.core import Agent
    from tuidebug.agent.probing import ProbeRuntime


class NoPipeline(Exception):
    """No way to run the pipeline: the message says what the user can add."""


@dataclass
class Adjust:
    """Changes a probe makes to one iteration: scaled learning rates, gradient clipping, and a
    context (a TorchFunctionMode) active while the forward and the loss run."""

    lr_scale: float = 1.0
    clip: float | None = None
    mode: Callable[[], ContextManager] | None = None


@dataclass
class Iteration:
    """What one iteration did: its mean loss and its total gradient norm before any clipping."""

    loss: float | None = None
    grad_norm: float | None = None
    grads_finite: bool = True


def adjusted_step(optimizer: torch.optim.Optimizer, adjust: Adjust, result: Iteration) -> list[Any]:
    """Before ``optimizer.step``: measure the gradients, clip, scale the rates; returns the rates to restore."""
    params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    if params:
        norm = torch.nn.utils.clip_grad_norm_(params, adjust.clip if adjust.clip else float("inf"))
        result.grad_norm = float(norm)
        result.grads_finite = bool(torch.isfinite(norm))
    saved = [group["lr"] for group in optimizer.param_groups]
    if adjust.lr_scale != 1.0:
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * adjust.lr_scale
    return saved


def restore_rates(optimizer: torch.optim.Optimizer, saved: list[Any]) -> None:
    for group, lr in zip(optimizer.param_groups, saved):
        group["lr"] = lr


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

    def __init__(self, runtime: ProbeRuntime, captured: Any, recent: list[Any]) -> None:
        self.runtime = runtime
        self.batch = captured.batch
        self.size = captured.size
        self.iterations = 0
        self._recent = recent  # oldest first, ending with ``captured``

    def prepare(self, examples: int | None = None) -> Any:
        """The probe's batch: the first ``examples`` of the captured one, or all of it."""
        return self.batch if examples is None else slice_batch(self.batch, examples, self.size)

    def recent_batches(self) -> list[Any]:
        """The batches the loop fed most recently (from the same loader), oldest first."""
        return list(self._recent)

    def reset(self, snapshot: Snapshot) -> None:
        """Start the next iteration from ``snapshot``: restored on the training thread at hand-off."""
        self.runtime.pending_restore = snapshot

    def step(self, batch: Any, adjust: Adjust | None = None) -> Iteration:
        """One iteration of the user's loop on ``batch``."""
        self.iterations += 1
        return self.runtime.replay_iteration(batch, adjust or Adjust())

    def note(self) -> str | None:
        if not self.iterations:
            return None
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
        self._originals = (observed.model, optimizer)
        self.model, self.optimizer = copy.deepcopy(self._originals)

    def prepare(self, examples: int | None = None) -> Any:
        return self.inputs if examples is None else slice_batch(self.inputs, examples, self.size)

    def recent_batches(self) -> list[Any]:
        return [self.inputs]

    def reset(self, snapshot: Snapshot) -> None:
        """Fresh copies of the real model and optimizer, loaded with ``snapshot``'s state."""
        model, optimizer = self._originals
        self.model, self.optimizer = copy.deepcopy((model, optimizer))
        snapshot.restore_into(model, self.model, optimizer, self.optimizer)

    def step(self, batch: Any, adjust: Adjust | None = None) -> Iteration:
        adjust = adjust or Adjust()
        result = Iteration()
        self.optimizer.zero_grad(set_to_none=True)
        with adjust.mode() if adjust.mode else contextlib.nullcontext():
            loss = self._loss(self.model, batch)
        result.loss = float(loss.detach())
        loss.backward()
        saved = adjusted_step(self.optimizer, adjust, result)
        self.optimizer.step()
        restore_rates(self.optimizer, saved)
        return result

    def _observed_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        (args, kwargs), targets = batch
        return self.criterion(model(*args, **kwargs), *targets)

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        return list(self.model.named_parameters())

    def note(self) -> str:
        return "trained a copy: the real model and optimizer were not touched"

    def close(self) -> None:
        self.model = self.optimizer = None
