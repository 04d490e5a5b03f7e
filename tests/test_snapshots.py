"""Snapshot tests (pytest-textual-snapshot) of the main screens at 80x24 and 120x40.

The screens draw a Session; here the session is fed the messages a recorded run's agent sent (a
fixed pid, device and clock), so that every frame is the same from run to run. The app, its
screens and Textual's compositor are the real ones. After a deliberate change to a screen,
``pytest tests/test_snapshots.py --snapshot-update`` rewrites the SVGs under __snapshots__/, which
a reviewer reads as pictures.
"""

from __future__ import annotations

import math

import pytest

from tuidebug.app import TuidebugApp
from tuidebug.launcher import Target
from tuidebug.protocol import Device, Event, Hello, Memory, State, Step
from tuidebug.session import Session

SIZES = [(80, 24), (120, 40)]
MIB = 1024**2


class RecordedRun:
    """What the app needs of a run whose messages were recorded: its session, its target, and commands
    that reach no process (the screens are read, not driven, in a snapshot)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.target = Target("train.py", ["--epochs", "3", "--lr", "3e-4"])
        self.process = "recorded"  # the app starts no child
        self.running = False

    def command(self, name: str, **args: object) -> bool:
        return False

    def start(self) -> None:
        raise AssertionError("a recorded run is never started")

    def close(self) -> None:
        pass


def recorded_session(steps: int = 150, nan_at: int | None = None) -> Session:
    """A CNN's first epochs: the loss falling from 2.3 with noise, the gradient norm settling, RSS
    growing then flat; with ``nan_at``, the loss and gradient go non-finite there and the run pauses."""
    session = Session("train.py", ["--epochs", "3", "--lr", "3e-4"])
    session.ingest(Hello(version=1, token="", pid=4242, argv=["train.py"], python="3.12", torch_version="2.13.0"))
    session.ingest(Device(kind="cpu", name="CPU (x86_64, 2 cores)", total_bytes=8 * 1024 * MIB))
    session.ingest(State(state="running", step=0))
    last = nan_at or steps
    for step in range(1, last + 1):
        loss = 2.3 * math.exp(-step / 60) + 0.15 + 0.05 * math.sin(step * 1.7)
        grad = 1.5 + 0.6 * math.cos(step * 0.9) + 4.0 * math.exp(-step / 15)
        if step == nan_at:
            loss, grad = float("nan"), float("inf")
        session.ingest(Step(step=step, time=1000.0 + step * 0.05, loss=loss, grad_norm=grad, lrs=[3e-4],
                            step_seconds=0.05, batch_size=64, epoch=1 + (step - 1) // 60,
                            epoch_batch=1 + (step - 1) % 60, epoch_batches=60, backward_calls=1))
        if step % 10 == 0:
            session.ingest(Memory(time=1000.0 + step * 0.05, rss=(400 + min(step, 60)) * MIB, cpu_percent=97.0))
            session.add_output(f"epoch {1 + (step - 1) // 60} step {step}: loss {loss:.4f}")
    session.ingest(Event(kind="settled", message="epoch_end: the first pass over the training data ended",
                         time=1003.0, step=60))
    if nan_at is not None:
        session.ingest(State(state="paused", step=nan_at - 1,
                             reason=f"non-finite loss at step {nan_at}, before the optimizer step"))
    session.started = 0.0
    session.ended_at = 75.0  # the clock reads 1:15 in every frame
    return session


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_dashboard_of_a_training_run(snap_compare, size):
    assert snap_compare(TuidebugApp(RecordedRun(recorded_session())), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_nan_break_opens_the_tree(snap_compare, size):
    assert snap_compare(TuidebugApp(RecordedRun(recorded_session(nan_at=121))), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_help_overlay(snap_compare, size):
    assert snap_compare(TuidebugApp(RecordedRun(recorded_session())), terminal_size=size, press=["question_mark"])
