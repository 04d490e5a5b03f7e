"""What a diagnostic probe may use: the one interface between the probes and the agent.

A probe is a function of a ``ProbeContext`` that returns a ``ProbeOutcome``. It registers itself
with ``@probe("name")``; the agent (the layer above) finds it in ``PROBES`` and runs it on its own
thread while the training thread is paused, then restores every piece of state it could disturb.

A probe reads the run through ``ctx.run`` (a ``RunView``: what the hooks observed, the recent
history, the failure) and runs the user's pipeline through ``ctx.trainer`` (a ``Trainer``: the
script's own loop replayed, or a copy of the model). Both are implemented in ``tuidebug.agent``;
this module only states what they offer, so that the probes never import the agent.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, ContextManager, Protocol

import torch

from tuidebug.protocol import Step
from tuidebug.sites import frame_locals

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


def optimizer_params(*optimizers: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every tensor the optimizers hold, param group by param group (one held by two optimizers comes twice)."""
    return [p for optimizer in optimizers for group in optimizer.param_groups for p in group["params"]]


@dataclass
class ProbeOutcome:
    """A probe's answer: ``fail`` means the cause it checks is present (its ``fix`` says what to do),
    ``pass`` that it is ruled out, ``inconclusive`` that the probe could not tell (the summary says why)."""

    status: str
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: str = ""
    curve: list[float] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Adjust:
    """One trial's changes to an iteration of the pipeline, each the counterfactual of a cause.

    ``lr_scale`` multiplies every learning rate for the optimizer step; ``clip`` clips the gradient
    norm before it; ``mode`` is a context (a TorchFunctionMode) active while the forward and the loss
    run; ``zero_grad`` clears the gradients before the iteration's backward; ``train_mode`` puts the
    model in training mode for the iteration; ``measure_update`` reports the step's size relative
    to the weights (it copies the parameters, so only the probes that need it ask);
    ``before_forward`` is handed the model being trained just before the forward (to hook its
    modules, or to change a weight for a trial); ``before_backward`` is handed the loss just before
    it goes backward (to hook its graph);
    ``freeze_schedule`` keeps the LR schedulers where they are (the script's loop steps them);
    ``from_base_rates`` sets every group a scheduler drives to its base rate (``initial_lr``) times ``lr_scale``
    and leaves the others' rates as they are (a schedule that annealed to 0 with the run's end, replayed at its
    peak).
    """

    lr_scale: float = 1.0
    clip: float | None = None
    mode: Callable[[], ContextManager] | None = None
    zero_grad: bool = False
    train_mode: bool = False
    measure_update: bool = False
    before_forward: Callable[[torch.nn.Module], None] | None = None
    before_backward: Callable[[torch.Tensor], None] | None = None
    freeze_schedule: bool = False
    from_base_rates: bool = False

    def key(self) -> tuple:
        """What makes two trials the same (a mode by identity: the same class or the same object)."""
        return (self.lr_scale, self.clip, self.zero_grad, self.train_mode, self.freeze_schedule, self.from_base_rates,
                id(self.mode) if self.mode else None, id(self.before_forward) if self.before_forward else None)


@dataclass
class Iteration:
    """What one iteration did: its mean loss, its gradient norm before any clipping, and how far
    the optimizer step moved the weights relative to their size."""

    loss: float | None = None
    grad_norm: float | None = None
    grads_finite: bool = True
    weights_finite: bool = True  # after the step: an update can overflow where the gradient did not
    update_ratio: float | None = None


class Trainer(Protocol):
    """Runs the user's pipeline on a batch: their own loop replayed, or a copy of the model."""

    method: str
    iterations: int

    def prepare(self, examples: int | None = None) -> Any:
        """The probe's batch: the first ``examples`` of the captured one, or all of it."""

    def recent_batches(self) -> list[Any]:
        """The batches that fed the steps before the failure, oldest first."""

    def reset(self, state: Any) -> None:
        """Start the next iteration from a saved state (``RunView.break_state`` or a checkpoint)."""

    def step(self, batch: Any, adjust: Adjust | None = None) -> Iteration:
        """One iteration of the pipeline on ``batch``, with a trial's changes."""

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        """The parameters the iterations train."""

    def note(self) -> str | None:
        """One line for the evidence: how the pipeline was run."""


class NoPipeline(Exception):
    """There is no way to run the pipeline here: the message says what the user can add."""


class LoopGone(Exception):
    """The script's loop ended (or raised) while a probe was replaying through it."""


class NeedsLoop(Exception):
    """The probe needs the script's live loop, which has ended, and copies are not wanted here
    (``diagnose`` re-runs the probe on a second run of the script instead)."""


@dataclass
class HeldFrame:
    """The user's frame that called backward on a non-finite loss, as it was then: its values stay
    the failing step's after the probes' replays have run the loop on (and rebound its variables)."""

    path: str
    line: int
    function: str
    locals: dict[str, Any]
    globals: dict[str, Any]

    @classmethod
    def of(cls, frame: FrameType) -> HeldFrame:
        return cls(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, dict(frame_locals(frame)),
                   dict(frame.f_globals))


class RunView(Protocol):
    """What a probe may read of the run (implemented by the agent)."""

    model: torch.nn.Module | None
    optimizers: list[torch.optim.Optimizer]
    history: Any  # the recent Step records, oldest first
    batches: Any  # the recent captured batches (``Captured``), oldest first
    failure: Any  # the first non-finite value, or None; its ``loss`` and ``held_frame`` (a HeldFrame) when the
    # loss was non-finite before backward
    facts: Any  # what the hooks observed of the loop (``tuidebug.agent.facts.Facts``)
    crash: Any  # the analysed exception the script raised, or None

    def model_inputs(self) -> tuple[tuple, dict] | None:
        """The arguments of the model's latest call (at a crash, the failing one)."""

    def known_models(self) -> list[torch.nn.Module]:
        """Every model the hooks have seen, in the order they were first called."""

    def trained_module(self) -> torch.nn.Module | None:
        """The module holding every parameter the optimizer trains: the model, or the module whose own
        method calls the parts the hooks saw (``model.calculate_loss(batch)``)."""

    def lightning_module(self) -> torch.nn.Module | None:
        """The LightningModule that trains the model, if the loop is Lightning's."""

    def checkpoint_before_failure(self) -> tuple[int, Any, int] | None:
        """(step, state, steps from it to the failure) of the rolling checkpoint to replay from."""

    def calm_checkpoint_before_failure(self) -> tuple[int, Any, int] | None:
        """The same for the latest checkpoint taken while the loss was at its usual level, older than the
        rolling one (the loss climbed since), else None."""

    def dataset(self) -> Any:
        """The dataset of the loader that fed the latest batch, or None."""

    def recent_batches(self) -> list[Any]:
        """The captured batches (``step``, ``batch``) of the steps up to the failure, oldest first."""

    def loader_batch_size(self) -> int | None:
        """The batch_size of the DataLoader the loop trains from, if it trains from one (and it sets one)."""

    def can_replay(self) -> bool:
        """Whether ``ctx.trainer`` can run the pipeline here (a live loop, or a copy where wanted)."""

    def user_frames(self) -> list[Any]:
        """The training thread's frames in the user's own code, innermost first (empty after the script ended)."""

    def uses_grad_scaler(self) -> bool:
        """Whether the script scales its loss with an AMP GradScaler."""

    def hand_updated_parameters(self) -> list[torch.Tensor]:
        """The weights a loop without an optimizer updates by hand (empty where an optimizer steps)."""

    def load_case(self, path: str) -> tuple[dict[str, Any], Any, list[Any]]:
        """A reproduction bundle: its metadata, the state to replay from, and its batches."""


@dataclass
class ProbeContext:
    """A probe's view of the paused run. Created by the agent for each probe it runs."""

    probe: str
    run_id: int
    run: RunView
    break_state: Any  # the state at the pause, restored after the probe
    params: dict[str, Any]
    trainer_factory: Callable[[], Trainer]
    report_progress: Callable[[float, str], None]
    is_cancelled: Callable[[], bool]
    deadline: float = math.inf  # time.monotonic() by which the probe should have answered
    _trainer: Trainer | None = None

    @property
    def trainer(self) -> Trainer:
        """How to run the pipeline on a batch (raises NoPipeline when there is no way)."""
        if self._trainer is None:
            self._trainer = self.trainer_factory()
        return self._trainer

    @property
    def used_trainer(self) -> Trainer | None:
        return self._trainer

    @property
    def method(self) -> str:
        return self._trainer.method if self._trainer is not None else "the agent's observations"

    @property
    def history(self) -> list[Step]:
        return list(self.run.history)

    def progress(self, fraction: float, text: str = "") -> None:
        self.report_progress(fraction, text)

    def cancelled(self) -> bool:
        return self.is_cancelled()

    def time_left(self) -> float:
        """Seconds until the probe should answer with what it has (its budget, set by the caller)."""
        return self.deadline - time.monotonic()


ProbeFunction = Callable[[ProbeContext], ProbeOutcome]
PROBES: dict[str, ProbeFunction] = {}
# Probes that never replay through the script's loop run on the training thread itself (paused): its
# thread-local state (grad mode, autocast) and thread pools are the script's, and a thread of its own
# would need memory the run may not have (the OOM being diagnosed).
ON_TRAINING_THREAD: set[str] = set()
# Probes whose trials mean the same on a copy of the model trained with the script's own loss as on
# the script's loop: they train a copy when the loss can be rebuilt, and spend none of the loop's
# iterations (the others replay the loop itself: its quirks are what they test).
PREFERS_COPY: set[str] = set()


def probe(name: str, on_training_thread: bool = False, prefers_copy: bool = False) -> Callable[[ProbeFunction], ProbeFunction]:
    """Register a probe under ``name`` (the name the tree's check nodes give)."""

    def register(function: ProbeFunction) -> ProbeFunction:
        if name in PROBES:
            raise ValueError(f"probe {name!r} is registered twice")
        PROBES[name] = function
        if on_training_thread:
            ON_TRAINING_THREAD.add(name)
        if prefers_copy:
            PREFERS_COPY.add(name)
        return function

    return register
