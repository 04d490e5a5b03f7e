"""Running a probe while the training thread is paused, and putting everything back afterwards.

A probe (``tuidebug.probe_api``) runs on its own thread while the training thread waits in
``Control.hold``. When it trains through the user's loop (``ReplayTrainer``), each iteration is a
hand-off: the probe asks for one, the training thread leaves the hold, and at the loop's next
hand-off point the probe's inputs replace the real ones. The hand-off point is the DataLoader's
``__next__`` when the loop uses one, else the model's own call (loops that slice tensors or call a
``get_batch``): there the model's arguments, and the targets of the loss functions tuidebug sees,
are replaced by the ones captured at the step being replayed. At the loop's next hand-off the
training thread reports the losses and waits again. When the probe ends, the snapshot taken before
it is restored and the real inputs that were due are delivered: the run goes on as if nothing had
happened, except that the script's own Python counters saw the borrowed iterations.
"""

from __future__ import annotations

import gc
import itertools
import math
import os
import threading
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

import tuidebug.probes  # noqa: F401  (the probe families register themselves on import)
from tuidebug.agent.crash import is_out_of_memory
from tuidebug.agent.output import probe_output
from tuidebug.agent.snapshot import Snapshot
from tuidebug.batches import tensors_of
from tuidebug.agent.trainers import MODEL_CALL, CopyTrainer, HandUpdateAdjuster, ReplayTrainer, StepAdjuster
from tuidebug.probe_api import (
    ON_TRAINING_THREAD, PREFERS_COPY, PROBES, Adjust, Iteration, LoopGone, NeedsLoop, NoPipeline, ProbeContext, ProbeOutcome)
from tuidebug.protocol import Command, ProbeProgress, ProbeResult

if TYPE_CHECKING:
    from tuidebug.agent.core import Agent

_run_ids = itertools.count(1)


@dataclass
class StepInputs:
    """What fed one step of a loop without a DataLoader: the model's arguments and the targets given
    to the loss functions, in call order."""

    step: int
    args: tuple
    kwargs: dict
    targets: list[Any]
    size: int | None


class ProbeRuntime:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.replaying = False
        self.inline = False  # a probe runs on the training thread itself
        self.active: ProbeContext | None = None
        self.snapshot: Snapshot | None = None
        self.cancel = threading.Event()
        self.source: int | None = None
        self.pending_restore: Snapshot | None = None
        self.resume_state: Snapshot | None = None  # where the loop goes on after the probes, when not the pause
        self.result: ProbeResult | None = None
        self._started = False
        self._replay_input: Any = None
        self._held: Any = None
        self._losses: list[float] = []
        self._adjust = Adjust()
        self._iteration = Iteration()
        self._adjuster: StepAdjuster | None = None
        self._by_hand: HandUpdateAdjuster | None = None  # a trial's rate in a loop that updates by hand
        self._target_index = 0
        self._own_inputs = False  # this replayed iteration runs on the loop's own inputs (see ``keeps_own_inputs``)
        self._stepped = False
        self._mode: Any = None
        self._done = threading.Event()
        self._loop_gone = False
        self._handed_at = 0.0  # when the loop got the probe's inputs: the borrowed iteration's time is not the run's

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
        if multi_process():
            self.agent.send(ProbeResult(run_id=next(_run_ids), probe=name, status="inconclusive", summary=(
                "not run in a multi-process job: a replay on one rank would wait forever in DDP's collectives "
                "for the others; re-run the failing case as one process (without torchrun) to check it"),
                method="none: multi-process job"))
            return
        self.cancel.clear()
        try:
            self.snapshot = self._snapshot(live_loop and not self._loop_gone)
        except Exception as exc:
            self.agent.send(ProbeResult(run_id=next(_run_ids), probe=name, status="error", summary=(
                f"not run: no memory left to save the run's state before it ({type(exc).__name__}), and the run goes "
                "on: a check must leave it as it was")))
            return
        self.pending_restore = self.snapshot  # an iteration in flight runs on before the first hand-off
        run_id = next(_run_ids)
        inline = name in ON_TRAINING_THREAD  # its trials cannot borrow the loop it holds up: a copy trains
        ctx = ProbeContext(
            probe=name, run_id=run_id, run=self.agent, break_state=self.snapshot, params=params,
            trainer_factory=lambda: self._trainer(live_loop and not self._loop_gone and not inline,
                                                  inline or name in PREFERS_COPY and params.get("replay") != "loop"),
            report_progress=lambda fraction, text: self._progress(name, run_id, fraction, text),
            is_cancelled=self.cancel.is_set,
            deadline=time.monotonic() + float(params.get("seconds", math.inf)))
        self.active = ctx
        if name not in ON_TRAINING_THREAD:
            try:
                threading.Thread(target=self._run, args=(probe, ctx), name=f"tuidebug-probe-{name}", daemon=True).start()
                return
            except RuntimeError:  # no room for a thread's stack (the script used the address space up)
                if live_loop and not self._loop_gone:
                    raise  # a replay through the live loop cannot run on the loop's own thread
        self.inline = True  # on the training thread: its _probe_done is handled by the hold this runs in
        try:
            self._run(probe, ctx)
        finally:
            self.inline = False

    def _snapshot(self, live: bool) -> Snapshot | None:
        """The state to restore after the probe. After an out-of-memory error a full host copy may find no room:
        once more after a collection, then, where the script's loop is gone (nothing runs on from that state),
        none: a probe that only reads (what holds the memory) runs all the same."""
        for attempt in range(2):
            try:
                return self.agent.take_snapshot()
            except Exception as exc:
                if not is_out_of_memory(exc) or (attempt and live):
                    raise
                gc.collect()
        self.agent.event("error", "no memory left to save the state before a check: it runs without a snapshot "
                                  "(the script's loop has ended)")
        return None

    def wants_replay(self, source: int) -> bool:
        return self.replaying and source == self.source

    def at_iteration_boundary(self) -> bool:
        """A model call that starts a replayed iteration: the first, or one after the previous replayed
        iteration stepped, with gradients on (an evaluation call in between passes untouched). A loop
        that updates by hand has no optimizer step to wait for: its iteration ends with its backward
        (the update follows it, before the next forward)."""
        stepped = self._stepped or (self.agent.manual_updates and bool(self._losses))
        return torch.is_grad_enabled() and (not self._started or stepped)

    def begin(self, real: Any) -> Any:
        """The loop reached its hand-off point and the probe's first iteration is due: keep the real
        inputs for later, put the state back to the probe's start (an iteration in flight may have
        run on), and hand the loop the probe's inputs."""
        self._held, self._started = real, True
        return self._hand_over()

    def next_input(self, fetch: Any) -> Any:
        """At the hand-off point while replaying: the inputs the user's loop gets next."""
        if not self._started:
            # The iteration in flight at the pause has run on to here (its update included): the loop goes on
            # from this state once the probes are done (they all start from the pause's), or that update
            # would be lost.
            real = fetch()
            self.resume_state = self.agent.take_snapshot()
            return self.begin(real)
        self.agent.control.held_seconds += time.perf_counter() - self._handed_at  # a borrowed iteration
        probe_output(inside=False)
        self._end_mode()
        if self._by_hand is not None:
            by_hand, self._by_hand = self._by_hand, None
            by_hand.after()
        self._done.set()  # the iteration on the probe's inputs is complete: its losses are in
        self.agent.control.hold(f"probe {self.active.probe} running", "batch", state="probing")
        if self.replaying:
            return self._hand_over()
        self.agent.control.hold("probe finished", "batch")
        if self.replaying:  # another probe, started during that pause, wants its first iteration
            self._started = True
            return self._hand_over()
        held, self._held = self._held, None
        if self.resume_state is not None:
            self.resume_state.restore()
            self.resume_state = None
        return held

    def _hand_over(self) -> Any:
        """The probe's inputs go to the loop, from the state the probe asked for, with the trial's
        changes in place for the forward and the loss."""
        if self.pending_restore is not None:
            snapshot, self.pending_restore = self.pending_restore, None
            snapshot.restore()
        model = self.agent.model
        if self._adjust.zero_grad and model is not None:
            for param in model.parameters():
                param.grad = None
        if self._adjust.train_mode and model is not None:
            model.train()
        if self._adjust.before_forward is not None and model is not None:
            self._adjust.before_forward(model)
        if self._adjust.mode is not None:
            self._mode = self._adjust.mode()
            self._mode.__enter__()
        self._target_index = 0
        self._own_inputs = False
        self._stepped = False
        params = self.agent.hand_updated_parameters()
        if params and (self._adjust.lr_scale != 1.0 or self._adjust.measure_update):
            self._by_hand = HandUpdateAdjuster(params, self._adjust, self._iteration)
        self._handed_at = time.perf_counter()
        probe_output(inside=True)
        return self._replay_input

    def keeps_own_inputs(self, handed: StepInputs, args: tuple, kwargs: dict) -> bool:
        """Whether the model call that starts a replayed iteration keeps the loop's own inputs instead of the
        captured ones handed to it, and the iteration's losses their own targets: where the call takes a leaf
        that requires grad (a PINN's collocation points, an input the loop differentiates against: the loop's
        autograd.grad needs its own), or where the captured call is shaped otherwise (the loop calls the model
        on several inputs an iteration, and the one kept for replays is not this one's: a PINN's initial,
        boundary and interior points). The trial then replays the loop's iteration as the loop makes it."""
        if not isinstance(handed, StepInputs):
            return False
        real = tensors_of((args, kwargs))
        keep = any(t.requires_grad and t.is_leaf for t in real) or \
            [t.shape for t in real] != [t.shape for t in tensors_of((handed.args, handed.kwargs))]
        self._own_inputs = keep
        return keep

    def schedule_frozen(self) -> bool:
        """While a replayed iteration asks for it, the script's scheduler.step() does nothing."""
        return self.replaying and self._adjust.freeze_schedule

    def replay_target(self, target: Any) -> Any:
        """A loss function's target during a replay through a model call: the captured one."""
        if self.source != MODEL_CALL or not isinstance(self._replay_input, StepInputs) or self._own_inputs:
            return target
        captured = self._replay_input.targets
        index, self._target_index = self._target_index, self._target_index + 1
        return captured[index] if index < len(captured) else target

    def _end_mode(self) -> None:
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)

    def before_replay_step(self, optimizer: torch.optim.Optimizer) -> None:
        """The optimizer is about to apply a replayed step: the trial's clipping and rates apply."""
        self._end_mode()
        self._adjuster = StepAdjuster(optimizer, self._adjust, self._iteration)
        self._adjuster.before()

    def after_replay_step(self, optimizer: torch.optim.Optimizer) -> None:
        self._stepped = True
        if self._adjuster is not None:
            adjuster, self._adjuster = self._adjuster, None
            adjuster.after()

    def request_iteration(self) -> None:
        """Control command from the probe thread: run the user's loop once more on its inputs."""
        self.replaying = True
        self.agent.control.leave()

    def finish(self) -> None:
        """Control command from the probe thread: it ended; restore everything and report."""
        self.active = None
        probe_output(inside=False)
        self.replaying, self._started, self.pending_restore = False, False, None
        if self.snapshot is not None:
            snapshot, self.snapshot = self.snapshot, None
            self._restore(snapshot)
        if self.agent.control.holding == "probing":
            self.agent.control.leave()
        if self.result is not None:
            result, self.result = self.result, None
            self.agent.send(result)

    def _restore(self, snapshot: Snapshot) -> None:
        """Put the run's state back; where that fails (no memory left after an out-of-memory error), say so,
        and the probe's result is reported all the same: a check that found the cause must not lose it."""
        try:
            snapshot.restore()
        except Exception as exc:  # an allocation the process no longer has room for, mostly
            gone = self._loop_gone or not self.agent.script_running
            self.agent.event("error", f"the state before the check could not be put back ({type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0][:160]})" + (
                                          "; the script's loop has ended, so nothing runs on from it" if gone else
                                          "; the run goes on from the state the check left"))

    def loop_ended(self) -> None:
        """The script ended: a probe waiting on the loop gives up (and is finished in post-mortem)."""
        probe_output(inside=False)
        self._end_mode()
        self.resume_state = None
        self._loop_gone = True
        self._done.set()

    def record_loss(self, loss: torch.Tensor, tensor: torch.Tensor) -> None:
        """A replayed iteration's loss is about to go backward (``tensor`` is what goes)."""
        self._losses.append(float(loss.detach().float().mean()))
        if self._adjust.before_backward is not None:
            self._adjust.before_backward(tensor)

    # --- probe thread --------------------------------------------------------------------------

    def replay_iteration(self, inputs: Any, adjust: Adjust) -> Iteration:
        """One iteration of the user's loop on ``inputs`` (called by ReplayTrainer)."""
        if self._loop_gone:
            raise LoopGone
        self._replay_input, self._losses, self._adjust, self._iteration = inputs, [], adjust, Iteration()
        self._done.clear()
        self.agent.client.post_local(Command(name="_replay_iteration"))
        self._done.wait()
        if self._loop_gone:
            raise LoopGone
        if self._losses:
            self._iteration.loss = sum(self._losses) / len(self._losses)
        return self._iteration

    def _progress(self, probe: str, run_id: int, fraction: float, text: str) -> None:
        ctx = self.active
        now = time.monotonic()
        if ctx is not None and (now - getattr(ctx, "_last_progress", 0.0) >= 0.1 or fraction >= 1.0):
            ctx._last_progress = now
            self.agent.send(ProbeProgress(run_id=run_id, probe=probe, fraction=fraction, text=text))

    def _trainer(self, live_loop: bool, prefer_copy: bool = False) -> Any:
        """Replay through the loop when it is live and fed by a DataLoader, on the failing inputs if
        there was a failure. Without one, a copy is trained where the loss can be rebuilt; only when it
        cannot is the loop replayed through its model call (each borrowed iteration advances the loop)."""
        failure = self.agent.failure
        after_end = not live_loop
        if self.agent.lightning_module() is not None:  # Lightning's loop reads ahead and counts its batches
            return CopyTrainer(self.agent, rates_of_last_step=after_end)
        if prefer_copy:
            try:
                return CopyTrainer(self.agent, rates_of_last_step=after_end)
            except NoPipeline:
                pass
        if not live_loop and not self.agent.config.copy_post_mortem:
            raise NeedsLoop
        if live_loop:
            recent = self.agent.recent_batches()
            if recent and self.agent.loop_uses_loader():
                self.source = recent[-1].source
                return ReplayTrainer(self, recent[-1], [c.batch for c in recent if c.source == self.source])
        inputs = failure.inputs if failure and failure.inputs else list(self.agent.step_inputs)
        try:
            return CopyTrainer(self.agent, rates_of_last_step=after_end)
        except NoPipeline:
            if live_loop and inputs:
                self.source = MODEL_CALL
                return ReplayTrainer(self, _as_captured(inputs[-1]), inputs)
            raise

    def _run(self, probe: Any, ctx: ProbeContext) -> None:
        try:
            outcome = probe(ctx)
        except NoPipeline as exc:
            outcome = ProbeOutcome("inconclusive", str(exc))
        except NeedsLoop:
            outcome = ProbeOutcome("inconclusive", "the script's loop has ended: this check needs it live",
                                   data={"needs_loop": True})
        except LoopGone:
            outcome = ProbeOutcome("inconclusive", "the script's loop ended before the probe finished" + (
                " (it has no DataLoader, so each replayed iteration used up one of its own): give the probes the "
                "loss with `tuidebug.watch(model, optimizer, loss_fn=lambda model, batch: ...)`"
                if self.source == MODEL_CALL else ""), data={"needs_loop": True})
        except Exception as exc:  # a probe's bug must not take the user's run down
            outcome = ProbeOutcome("error", f"probe failed: {type(exc).__name__}: {exc}",
                                   evidence=traceback.format_exc().splitlines()[-6:])
        trainer = ctx.used_trainer
        note = trainer.note() if trainer is not None else None
        if note:
            outcome.evidence.append(note)
        self.result = ProbeResult(
            run_id=ctx.run_id, probe=ctx.probe, status="cancelled" if self.cancel.is_set() else outcome.status,
            summary=outcome.summary, evidence=outcome.evidence, fix=outcome.fix,
            method=ctx.method, curve=outcome.curve, data=outcome.data,
        )
        if trainer is not None and hasattr(trainer, "close"):
            trainer.close()
        self.agent.client.post_local(Command(name="_probe_done"))


def multi_process() -> bool:
    """A worker of a torchrun job with other ranks (torchrun sets WORLD_SIZE before the worker starts)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


@dataclass
class _CapturedInputs:
    batch: StepInputs
    size: int | None


def _as_captured(inputs: StepInputs) -> _CapturedInputs:
    return _CapturedInputs(inputs, inputs.size)
