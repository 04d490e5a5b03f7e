"""Running a probe while the training thread is paused, and putting everything back afterwards.

A probe is a plain function of a ``ProbeContext``; it runs on its own thread while the training
thread waits in ``Control.hold``. When it trains through the user's loop (``ReplayTrainer``), each
iteration is a hand-off: the probe asks for one, the training thread leaves the hold, the
DataLoader hook hands the probe's batch to the loop instead of a fresh one, and at the loop's next
batch request the training thread reports the loss and waits again. When the probe ends, the
snapshot taken before it is restored and the batch that was due is delivered: the run goes on as
if nothing happened, except that the script's own Python counters saw the borrowed iterations.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

import torch

from tuidebug.agent.snapshot import Snapshot
from tuidebug.agent.trainers import (
    Adjust, CopyTrainer, Iteration, NoPipeline, ReplayTrainer, adjusted_step, restore_rates,
)
from tuidebug.probes import PROBES, ProbeContext, ProbeOutcome
from tuidebug.protocol import Command, ProbeProgress, ProbeResult

if TYPE_CHECKING:
    from tuidebug.agent.core import Agent

_run_ids = itertools.count(1)


class LoopGone(Exception):
    """The script's loop ended (or raised) while a probe was replaying through it."""


class ProbeRuntime:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.replaying = False
        self.active: ProbeContext | None = None
        self.snapshot: Snapshot | None = None
        self.cancel = threading.Event()
        self.source: int | None = None
        self.pending_restore: Snapshot | None = None
        self._started = False
        self._replay_batch: Any = None
        self._held_batch: Any = None
        self._losses: list[float] = []
        self._adjust = Adjust()
        self._iteration = Iteration()
        self._saved_rates: list[Any] = []
        self._mode: Any = None
        self._done = threading.Event()
        self._loop_gone = False

    # --- training thread ---------------------------------------------------------------------

    def start(self, name: str, params: dict[str, Any], live_loop: bool) -> None:
        """Begin probe ``name`` (on the training thread, inside a hold)."""
        if self.active is not None:
            self.agent.event("error", f"probe {self.active.probe} is still running")
            return
        probe = PROBES.get(name)
        if probe is None:
            self.agent.event("error", f"unknown probe {name!r}")
            return
        self.cancel.clear()
        self.snapshot = self.agent.take_snapshot()
        self.pending_restore = self.snapshot  # an iteration in flight runs on before the first hand-off
        ctx = ProbeContext(probe=name, run_id=next(_run_ids), agent=self.agent, runtime=self, params=params)
        ctx.trainer_factory = lambda: self._trainer(live_loop and not self._loop_gone)
        self.active = ctx
        threading.Thread(target=self._run, args=(probe, ctx), name=f"tuidebug-probe-{name}", daemon=True).start()

    def wants_replay(self, source: int) -> bool:
        return self.replaying and source == self.source

    def begin(self, real_batch: Any) -> Any:
        """The loop asks for a batch and the probe's first iteration is due: keep the real batch for
        later, put the state back to the probe's start (an iteration in flight may have run on),
        and hand the loop the probe's batch."""
        self._held_batch, self._started = real_batch, True
        return self._hand_over()

    def next_batch(self, fetch: Any) -> Any:
        """The DataLoader hook while replaying: the next batch the user's loop gets."""
        if not self._started:
            return self.begin(fetch())
        self._end_mode()
        self._done.set()  # the iteration on the probe's batch is complete: its losses are in
        self.agent.control.hold(f"probe {self.active.probe} running", "batch", state="probing")
        if self.replaying:
            return self._hand_over()
        self.agent.control.hold("probe finished", "batch")
        if self.replaying:  # another probe, started during that pause, wants its first iteration
            self._started = True
            return self._hand_over()
        held, self._held_batch = self._held_batch, None
        return held

    def _hand_over(self) -> Any:
        """The probe's batch goes to the loop, from the state the probe asked for, with its mode
        active for the forward and the loss."""
        if self.pending_restore is not None:
            snapshot, self.pending_restore = self.pending_restore, None
            snapshot.restore()
        if self._adjust.mode is not None:
            self._mode = self._adjust.mode()
            self._mode.__enter__()
        return self._replay_batch

    def _end_mode(self) -> None:
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)

    def before_replay_step(self, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer is about to apply a replayed step: the probe's clipping and rates apply."""
        self._end_mode()
        self._saved_rates = adjusted_step(optimizer, self._adjust, self._iteration)

    def after_replay_step(self, optimizer: torch.optim.Optimizer) -> None:
        restore_rates(optimizer, self._saved_rates)

    def request_iteration(self) -> None:
        """Control command from the probe thread: run the user's loop once more on its batch."""
        self.replaying = True
        self.agent.control.leave()

    def finish(self) -> None:
        """Control command from the probe thread: it ended; restore everything and report."""
        ctx, self.active = self.active, None
        self.replaying, self._started, self.pending_restore = False, False, None
        if self.snapshot is not None:
            self.snapshot.restore()
            self.snapshot = None
        if self.agent.control.holding == "probing":
            self.agent.control.leave()
        if ctx is not None and ctx.result is not None:
            self.agent.send(ctx.result)

    def loop_ended(self) -> None:
        """The script ended: a probe waiting on the loop gives up (and is finished in post-mortem)."""
        self._end_mode()
        self._loop_gone = True
        self._done.set()

    def record_loss(self, loss: torch.Tensor) -> None:
        self._losses.append(float(loss.detach().float().mean()))

    # --- probe thread --------------------------------------------------------------------------

    def replay_iteration(self, batch: Any, adjust: Adjust) -> Iteration:
        """One iteration of the user's loop on ``batch`` (called by ReplayTrainer)."""
        if self._loop_gone:
            raise LoopGone
        self._replay_batch, self._losses, self._adjust, self._iteration = batch, [], adjust, Iteration()
        self._done.clear()
        self.agent.client.post_local(Command(name="_replay_iteration"))
        self._done.wait()
        if self._loop_gone:
            raise LoopGone
        if self._losses:
            self._iteration.loss = sum(self._losses) / len(self._losses)
        return self._iteration

    def progress(self, ctx: ProbeContext, fraction: float, text: str) -> None:
        now = time.monotonic()
        if now - ctx.last_progress >= 0.1 or fraction >= 1.0:
            ctx.last_progress = now
            self.agent.send(ProbeProgress(run_id=ctx.run_id, probe=ctx.probe, fraction=fraction, text=text))

    def _trainer(self, live_loop: bool) -> Any:
        """Replay through the loop when it is live, on the failing batch if there was a failure."""
        failure = self.agent.failure
        recent = failure.recent if failure and failure.recent else list(self.agent.batches)
        if live_loop and recent:
            self.source = recent[-1].source
            return ReplayTrainer(self, recent[-1], [c.batch for c in recent if c.source == self.source])
        return CopyTrainer(self.agent)

    def _run(self, probe: Any, ctx: ProbeContext) -> None:
        try:
            outcome = probe(ctx)
        except NoPipeline as exc:
            outcome = ProbeOutcome("inconclusive", str(exc))
        except LoopGone:
            outcome = ProbeOutcome("inconclusive", "the script's loop ended before the probe finished")
        except Exception as exc:  # a probe's bug must not take the user's run down
            outcome = ProbeOutcome("error", f"probe failed: {type(exc).__name__}: {exc}",
                                   evidence=traceback.format_exc().splitlines()[-6:])
        note = ctx.used_trainer.note() if ctx.used_trainer is not None else None
        if note:
            outcome.evidence.append(note)
        ctx.result = ProbeResult(
            run_id=ctx.run_id, probe=ctx.probe, status="cancelled" if self.cancel.is_set() else outcome.status,
            summary=outcome.summary, evidence=outcome.evidence, fix=outcome.fix,
            method=ctx.method, curve=outcome.curve, data=outcome.data,
        )
        ctx.close()
        self.agent.client.post_local(Command(name="_probe_done"))
