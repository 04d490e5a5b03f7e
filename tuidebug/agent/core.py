"""The agent's view of the training run, fed by the hooks on the training thread.

Everything here runs inside the user's process on their training thread, so every method does
the least it can: it keeps references to tensors and leaves reading their values to the writer
thread (``resolve``). A step ends at the first optimizer's step post-hook (or a step the
GradScaler skipped); the step count is the number of such iterations.
"""

from __future__ import annotations

import collections
import math
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import torch

from tuidebug.agent.client import AgentClient
from tuidebug.agent.control import Control
from tuidebug.agent.gradients import parameters_with_grad, per_parameter_norms, total_norm_now, total_of
from tuidebug.agent.probing import ProbeRuntime
from tuidebug.agent.snapshot import Snapshot
from tuidebug.protocol import Event, Step

MAX_LOSSES_PER_STEP = 256
HISTORY_STEPS = 512
MIN_REPLAY_STEPS = 5  # a checkpoint closer to the failure than this may miss the climb to it
CHECKPOINT_BUDGET = 0.005  # of the step time; the interval stays within [every, 2 * every] steps

# The agent of this process, for ``tuidebug.watch``; None when not running under tuidebug.
CURRENT: Agent | None = None


@dataclass
class AgentConfig:
    break_on_nan: bool = True
    break_at: int | None = None
    post_mortem: bool = True
    stop_on_disconnect: bool = False
    norm_stride: int = 10
    keep_batches: int = 4
    checkpoint_every: int = 25
    checkpoint_max_params: int = 50_000_000
    replay: str | None = None  # a reproduction bundle to re-run once the model and optimizer are seen

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AgentConfig:
        known = {k: v for k, v in values.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass
class Captured:
    """A batch the DataLoader yielded, the step it fed, its size, and which loader it came from."""

    step: int
    batch: Any
    size: int | None
    source: int


@dataclass
class Observed:
    """What the hooks saw of the pipeline, for probes that run it on a copy."""

    models: list[torch.nn.Module] = field(default_factory=list)
    model: torch.nn.Module | None = None
    model_inputs: tuple[tuple, dict] | None = None
    input_size: int | None = None
    output: weakref.ref | None = None
    criterion: torch.nn.Module | None = None
    criterion_targets: tuple = ()
    watch_loss: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None
    stateful: list[weakref.ref] = field(default_factory=list)  # LR schedulers, grad scalers, in creation order

    def stateful_objects(self) -> list[Any]:
        return [obj for ref in self.stateful if (obj := ref()) is not None]


@dataclass
class Failure:
    """The first non-finite value: the step it happened in, and the batches that led to it."""

    step: int
    reason: str
    recent: list[Captured]
    trials: dict[tuple, Any] = field(default_factory=dict)  # replays already run, shared by the probes


@dataclass
class PendingStep:
    """A step whose tensor values are read on the writer thread, after the device caught up."""

    step: int
    time: float
    losses: list[torch.Tensor]
    norms: list[torch.Tensor]  # every parameter's gradient norm, of every optimizer that stepped
    lrs: list[Any]
    step_seconds: float | None
    batch_size: int | None
    epoch: int | None
    cuda_allocated: int | None
    skipped: bool
    layer_names: list[str] | None = None
    layer_norms: list[torch.Tensor] | None = None
    backward_calls: int = 0
    ready: Any = None  # a CUDA event when any tensor lives on a GPU


class Agent:
    def __init__(self, config: AgentConfig, client: AgentClient | None) -> None:
        self.config = config
        self.client = client
        self.thread_id = threading.get_ident()
        self._forked = False  # a forked child keeps the parent thread's ident: say it is not the agent
        os.register_at_fork(after_in_child=self._mark_forked)
        self.control = Control(self)
        self.probes = ProbeRuntime(self)
        self.script_running = True
        self.step = 0
        self.observed = Observed()
        self.optimizers: list[torch.optim.Optimizer] = []
        self.batches: collections.deque[Captured] = collections.deque(maxlen=config.keep_batches)
        self.history: collections.deque[Step] = collections.deque(maxlen=HISTORY_STEPS)
        self.loaders: dict[int, weakref.ref] = {}
        self.failure: Failure | None = None
        self.checkpoints: collections.deque[tuple[int, Snapshot]] = collections.deque(maxlen=2)
        self._checkpoint_numel: int | None = None
        self._next_checkpoint = 1
        self._primary: weakref.ref | None = None
        self._losses: list[torch.Tensor] = []
        self._backward_calls = 0
        self._norms: list[torch.Tensor] = []
        self._layer: tuple[list[str], list[torch.Tensor]] | None = None
        self._stepped = False
        self._last_step_end: float | None = None  # the first step has no duration of its own
        self._batch_size: int | None = None
        self._epoch: int | None = None
        self._param_names: dict[int, str] = {}
        self._scaled: tuple[weakref.ref, torch.Tensor] | None = None
        self._skips_reported = 0

    def active(self) -> bool:
        """Hooks do nothing outside the training process's main thread (forked workers, DataParallel)."""
        return threading.get_ident() == self.thread_id and not self._forked

    def _mark_forked(self) -> None:
        self._forked = True

    def send(self, message: Any) -> None:
        if self.client is not None:
            self.client.send(message)

    def event(self, kind: str, message: str, details: list[str] | None = None) -> None:
        self.send(Event(kind=kind, message=message, time=time.time(), step=self.step, details=details or []))

    # --- observations from the hooks -------------------------------------------------------

    @property
    def model(self) -> torch.nn.Module | None:
        return self.observed.model

    def on_top_level_call(self, module: torch.nn.Module, args: tuple) -> None:
        """An outermost module call: the model if it has parameters, else maybe the loss module."""
        module = getattr(module, "_orig_mod", module)  # torch.compile's wrapper
        seen = self.observed
        if module is seen.model:
            return
        if next(module.parameters(), None) is not None:
            self._new_model(module)
        elif isinstance(module, torch.nn.modules.loss._Loss) and args and seen.output is not None:
            if seen.output() is args[0]:  # the loss of the model's own output: replayable on a copy
                seen.criterion, seen.criterion_targets = module, tuple(args[1:])

    def on_model_inputs(self, args: tuple, kwargs: dict) -> None:
        self.observed.model_inputs = (args, kwargs)
        self.observed.input_size = batch_size_of((args, kwargs))

    def on_model_output(self, output: Any) -> None:
        self.observed.output = weakref.ref(output) if isinstance(output, torch.Tensor) else None

    def _new_model(self, module: torch.nn.Module) -> None:
        """A model seen for the first time is announced and named; several models (a GAN) take turns
        as the current one at no cost."""
        seen = self.observed
        if module not in seen.models:
            seen.models.append(module)
            self._checkpoint_numel = None
            count = sum(p.numel() for p in module.parameters())
            self.event("model", f"{type(module).__name__} with {count:,} parameters")
            self._param_names.update({id(p): name for name, p in module.named_parameters()})
            self.on_new_model(module)
        seen.model = module

    def on_new_model(self, module: torch.nn.Module) -> None:
        """Set by the hooks: watch the model's own calls (with kwargs) from now on."""

    def watch(self, model: torch.nn.Module, optimizer: Any, loss_fn: Any) -> None:
        """``tuidebug.watch``: the user names the model, optimizer and loss explicitly."""
        self._new_model(model)
        if optimizer is not None and optimizer not in self.optimizers:
            self.optimizers.insert(0, optimizer)
        self.observed.watch_loss = loss_fn
        self.event("watch", "tuidebug.watch: model, optimizer and loss given by the script")

    def on_stateful(self, obj: Any) -> None:
        """An LR scheduler or grad scaler: probes save and restore its state."""
        if all(ref() is not obj for ref in self.observed.stateful):
            self.observed.stateful.append(weakref.ref(obj))

    def on_batch(self, fetch: Callable[[], Any], epoch: int | None, source: int) -> Any:
        """The batch the loop gets next: normally ``fetch()``'s, the DataLoader's own."""
        if self.probes.wants_replay(source):
            return self.probes.next_batch(lambda: self._capture(fetch(), epoch, source))
        batch = self._capture(fetch(), epoch, source)
        self.control.safe_point("batch")
        if self.config.replay and self.model is not None and self.optimizers:
            bundle, self.config.replay = self.config.replay, None
            self.probes.start("replay", {"bundle": bundle}, live_loop=True)
            self.control.hold("re-running the saved failing case", "batch")
        if self.probes.wants_replay(source):  # a probe asked for its first iteration while paused here
            return self.probes.begin(batch)
        return batch

    def _capture(self, batch: Any, epoch: int | None, source: int) -> Any:
        self._batch_size = batch_size_of(batch)
        self._epoch = epoch
        self.batches.append(Captured(self.step + 1, batch, self._batch_size, source))
        return batch

    def resolve(self, record: PendingStep) -> Step:
        """On the writer thread: the Step message, also kept in the recent history probes read."""
        step = to_step(record)
        self.history.append(step)
        return step

    def on_loader(self, loader: Any) -> None:
        self.loaders[id(loader)] = weakref.ref(loader)

    def checkpoint_before_failure(self) -> tuple[int, Snapshot, int] | None:
        """(step, snapshot, steps from it to the failure) of the latest checkpoint at least
        MIN_REPLAY_STEPS before the failure, or the oldest one before it."""
        failing_step = self.failure.step if self.failure else self.step + 1
        before = [(step, snap) for step, snap in self.checkpoints if step < failing_step]
        if not before:
            return None
        far_enough = [c for c in before if failing_step - c[0] >= MIN_REPLAY_STEPS]
        step, snapshot = far_enough[-1] if far_enough else before[0]
        return step, snapshot, failing_step - step

    def remember_failure(self, reason: str) -> None:
        if self.failure is None:
            self.failure = Failure(self.step + 1, reason, list(self.batches))

    def take_snapshot(self) -> Snapshot:
        return Snapshot.take(self.observed.models, self.optimizers, self.observed.stateful_objects())

    def on_scaled_loss(self, scaler: Any, raw: torch.Tensor, scaled: torch.Tensor) -> None:
        self.on_stateful(scaler)
        self._scaled = (weakref.ref(scaled), raw.detach())

    def on_backward(self, tensor: torch.Tensor) -> None:
        if self._scaled is not None and self._scaled[0]() is tensor:
            loss = self._scaled[1]
        else:
            loss = tensor.detach()
        self._scaled = None
        if self.probes.replaying:
            self.probes.record_loss(loss)
            return
        if len(self._losses) >= MAX_LOSSES_PER_STEP:  # fold long accumulations into one sum
            self._losses = [torch.stack([t.reshape(()) for t in self._losses]).sum()]
        self._losses.append(loss)
        self._backward_calls += 1
        value = loss.item() if self.config.break_on_nan else 0.0  # one host sync, only while armed
        if not math.isfinite(value):
            self.event("nonfinite_loss", f"non-finite loss ({value:g}) before backward")
            self.control.break_on_nonfinite("non-finite loss before backward", "backward")
        else:
            self.control.safe_point("backward")

    def current_losses(self) -> list[torch.Tensor]:
        """The losses of the step in progress (at a break, the failing one)."""
        return list(self._losses)

    def before_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.probes.replaying:
            self.probes.before_replay_step(optimizer)
            return
        if optimizer not in self.optimizers:
            self.optimizers.append(optimizer)
            groups = len(optimizer.param_groups)
            self.event("optimizer", f"{type(optimizer).__name__} with {groups} param group(s)")
        if self._primary is None:
            self._primary = weakref.ref(optimizer)
        self._stepped = True
        params = parameters_with_grad(optimizer)
        norms = per_parameter_norms(params)
        if not norms:
            return
        self._norms.extend(norms)
        if self._wants_layers() and optimizer is self._primary():
            self._layer = ([self._param_name(p, i) for i, p in enumerate(params)], norms)
        if self.config.break_on_nan:
            total = total_norm_now(norms)
            if not math.isfinite(total):
                self.event("nonfinite_grad", f"non-finite gradient norm ({total:g}) before optimizer step")
                self.control.break_on_nonfinite("non-finite gradient before the optimizer step", "before_step")

    def after_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.probes.replaying:
            self.probes.after_replay_step(optimizer)
            return
        if self._primary is not None and optimizer is self._primary():
            self._finish_step(skipped=False)

    def on_scaler_skipped(self, scale: float | None) -> None:
        """GradScaler.step fired no optimizer hook: it skipped the step on inf/NaN gradients."""
        if self.probes.replaying:
            return
        if self._skips_reported < 5:
            self._skips_reported += 1
            self.event("amp_skip", f"GradScaler skipped the optimizer step (inf/NaN gradients), scale {scale}")
        self._finish_step(skipped=True)

    def optimizer_stepped_since(self) -> bool:
        """Whether an optimizer hook fired since the last call; resets the flag."""
        stepped, self._stepped = self._stepped, False
        return stepped

    def on_warning(self, text: str) -> None:
        self.event("warning", text)

    # --- steps ----------------------------------------------------------------------------

    def _finish_step(self, skipped: bool) -> None:
        self.step += 1
        now = time.perf_counter()
        record = PendingStep(
            step=self.step, time=time.time(), losses=self._losses, norms=self._norms,
            lrs=self._learning_rates(),
            step_seconds=None if self._last_step_end is None else now - self._last_step_end,
            batch_size=self._batch_size, epoch=self._epoch,
            cuda_allocated=torch.cuda.memory_allocated() if torch.cuda.is_initialized() else None,
            skipped=skipped, backward_calls=self._backward_calls,
        )
        if self._layer is not None:
            record.layer_names, record.layer_norms = self._layer
        if torch.cuda.is_initialized() and any(t.is_cuda for t in record.losses + record.norms):
            record.ready = torch.cuda.Event()
            record.ready.record()
        self._losses, self._norms, self._layer, self._backward_calls = [], [], None, 0
        self._last_step_end = now
        if self.client is not None:
            self.client.send_metric(record)
        self._maybe_checkpoint(record.step_seconds)
        self.control.after_step(self.step)

    def _maybe_checkpoint(self, step_seconds: float | None) -> None:
        """While break-on-NaN is armed, keep a recent host copy of the state, so that the NaN probes
        can replay the steps that led to a failure at other rates or with clipping. The interval
        stretches so that copying costs at most CHECKPOINT_BUDGET of the training time."""
        every = self.config.checkpoint_every
        if not self.config.break_on_nan or every <= 0 or self.step < self._next_checkpoint:
            return
        if self._checkpoint_numel is None:
            self._checkpoint_numel = sum(p.numel() for m in self.observed.models for p in m.parameters())
        if self._checkpoint_numel > self.config.checkpoint_max_params:
            return
        started = time.perf_counter()
        self.checkpoints.append((self.step, self.take_snapshot()))
        cost = time.perf_counter() - started
        budget_steps = cost / (CHECKPOINT_BUDGET * step_seconds) if step_seconds else every
        self._next_checkpoint = self.step + min(2 * every, max(every, math.ceil(budget_steps)))

    def _wants_layers(self) -> bool:
        stride = self.config.norm_stride
        return stride > 0 and (self.step + 1) % stride == 0

    def _learning_rates(self) -> list[Any]:
        return [group.get("lr") for opt in self.optimizers for group in opt.param_groups]

    def _param_name(self, param: torch.Tensor, index: int) -> str:
        return self._param_names.get(id(param), f"param{index}")


def batch_size_of(batch: Any, depth: int = 0) -> int | None:
    """The leading dimension of the first tensor in a batch of any nesting."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    if depth > 4:
        return None
    if isinstance(batch, dict):
        values = batch.values()
    elif isinstance(batch, (list, tuple)):
        values = batch
    elif hasattr(batch, "__dataclass_fields__"):
        values = (getattr(batch, name) for name in batch.__dataclass_fields__)
    else:
        return None
    for value in values:
        size = batch_size_of(value, depth + 1)
        if size is not None:
            return size
    return None


def to_step(record: PendingStep) -> Step:
    """Read a pending step's tensors (on the writer thread) into a Step message."""
    if record.ready is not None:
        record.ready.synchronize()
    losses = [float(t) for t in record.losses]
    norms = [float(t) for t in record.norms]
    step = Step(
        step=record.step, time=record.time, backward_calls=record.backward_calls,
        loss=sum(losses) / record.backward_calls if losses else None,
        grad_norm=total_of(norms) if norms else None,
        lrs=[float(lr) for lr in record.lrs if lr is not None],
        step_seconds=record.step_seconds, batch_size=record.batch_size, epoch=record.epoch,
        cuda_allocated=record.cuda_allocated, skipped=record.skipped,
    )
    if record.layer_norms is not None:
        step.layer_norms = dict(zip(record.layer_names, (float(t) for t in record.layer_norms)))
    return step
