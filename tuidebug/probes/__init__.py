"""Diagnostic probes: one module per family, each a function of a ``ProbeContext``.

A probe runs in the training process while the run is paused, on its own thread, and returns a
``ProbeOutcome``: a status (pass, fail, inconclusive), a one-line summary, evidence, and a fix when
it fails. It reaches the pipeline only through ``ctx.trainer`` (the user's own loop replayed, or a
copy of the model), and the runtime restores every piece of state afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


@dataclass
class ProbeOutcome:
    status: str
    summary: str
    evidence: list[str] = field(default_factory=list)
    fix: str = ""
    curve: list[float] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProbeContext:
    """What a probe may use. Created by the agent's ProbeRuntime."""

    probe: str
    run_id: int
    agent: Any
    runtime: Any
    params: dict[str, Any]
    trainer_factory: Callable[[], Any] | None = None
    result: Any = None
    last_progress: float = 0.0
    _trainer: Any = None

    @property
    def trainer(self) -> Any:
        """How to run the pipeline on a batch (raises NoPipeline when there is no way)."""
        if self._trainer is None:
            self._trainer = self.trainer_factory()
        return self._trainer

    @property
    def used_trainer(self) -> Any:
        """The trainer, if the probe used one."""
        return self._trainer

    @property
    def method(self) -> str:
        return self._trainer.method if self._trainer is not None else "the agent's observations"

    def progress(self, fraction: float, text: str = "") -> None:
        self.runtime.progress(self, fraction, text)

    def cancelled(self) -> bool:
        return self.runtime.cancel.is_set()

    def close(self) -> None:
        if self._trainer is not None:
            self._trainer.close()


def _registry() -> dict[str, Callable[[ProbeContext], ProbeOutcome]]:
    from tuidebug.probes import nan, overfit, replay, unsafe_math

    return {
        "overfit": overfit.run,
        "nan.lr": nan.learning_rate,
        "nan.inputs": nan.nan_inputs,
        "nan.unsafe_math": unsafe_math.unsafe_math,
        "nan.grad_explosion": nan.gradient_explosion,
        "replay": replay.replay_bundle,
    }


PROBES = _registry()
