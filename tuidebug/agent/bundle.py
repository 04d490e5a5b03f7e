"""Reproduction bundles: the failing case on disk, and the state to replay it from.

A bundle is a folder: ``bundle.json`` (what failed, how to tell, the script; ``not_kept`` says when
older batches were let go for their byte budget, agent/kept_batches.py), ``state.pt`` (the
model's state and the optimizer's per-parameter state at the replay's start, plain tensors),
``batches.pt`` (the batches to replay, in dicts, lists and tuples of tensors) and ``replay.py``, a
small script that re-runs the case. Both ``.pt`` files load with ``torch.load(weights_only=True)``:
nothing in a bundle can run code.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tuidebug.agent.snapshot import Snapshot

if TYPE_CHECKING:
    from tuidebug.agent.core import Agent

FORMAT = 1


class BundleError(Exception):
    """The bundle cannot be written or read: the message says why."""


def plain(value: Any, depth: int = 0) -> Any:
    """The batch as dicts, lists and tuples of CPU tensors (what weights_only loading accepts)."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if depth > 6:
        raise BundleError("the batch is nested too deeply to save")
    if isinstance(value, dict):
        return {k: plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [plain(v, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    raise BundleError(f"a {type(value).__name__} in the batch cannot be saved safely")


def save_bundle(agent: Agent, folder: str, meta: dict[str, Any]) -> str:
    """Write the bundle for the agent's current failure (or its latest batch) into ``folder``. The files
    are written into a private scratch folder inside it and moved into place, ``bundle.json`` last: a
    full or read-only disk leaves no half-written bundle, only a BundleError that says why."""
    optimizer = _optimizer_to_save(agent)
    if agent.model is None or optimizer is None:
        raise BundleError("no model and optimizer seen: nothing to reproduce")
    start, steps, batches = _start(agent)
    model_state = next((state for model, state, _ in start.modules if model is agent.model), None)
    optimizer_state = next((state for opt, state in start.optimizers if opt is optimizer), None)
    saved = [plain(b) for b in batches]
    positions = [state["last_epoch"] for _, state in start.stateful if "last_epoch" in state]
    meta = {**meta, "format": FORMAT, "steps": steps, "batches": len(batches), "scheduler_steps": positions,
            "not_kept": agent.failure.not_kept if agent.failure else "",
            "script": os.path.abspath(sys.argv[0]), "args": sys.argv[1:], "torch": torch.__version__}
    path = Path(folder)
    created = not path.exists()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)  # weights and data: the user's alone
        with tempfile.TemporaryDirectory(dir=path, prefix=".partial-") as scratch:
            written = Path(scratch)
            torch.save({"model": model_state, "optimizer": optimizer_state}, written / "state.pt")
            torch.save(saved, written / "batches.pt")
            (written / "replay.py").write_text(_replay_script(path), encoding="utf-8")
            (written / "bundle.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
            for name in ("state.pt", "batches.pt", "replay.py", "bundle.json"):
                os.replace(written / name, path / name)
    except (OSError, RuntimeError) as exc:  # torch.save reports a failed write as a RuntimeError
        if created:
            shutil.rmtree(path, ignore_errors=True)
        raise BundleError(f"cannot write the bundle into {folder}: {exc}") from None
    return str(path)


def _optimizer_to_save(agent: Agent) -> torch.optim.Optimizer | None:
    """The model's optimizer: the one that steps it, else, for a non-finite value before its first step
    (float16 overflow or NaN inputs at step 0), one the script made over the model's parameters. The
    replay starts from the state before that step, with the optimizer's state still empty."""
    model = agent.model
    return agent.optimizer_of(model, unstepped=agent.failure is not None) if model is not None else None


def _start(agent: Agent) -> tuple[Snapshot, int, list[Any]]:
    """Where the replay starts: the rolling checkpoint before a failure, else the current state."""
    failure = agent.failure
    recent = [c.batch for c in (failure.recent if failure else list(agent.batches))]
    if not recent:
        raise BundleError("no batch captured: the script has not used a DataLoader")
    checkpoint = agent.checkpoint_before_failure() if failure is not None else None
    if checkpoint is not None:
        _, snapshot, steps_before = checkpoint
        return snapshot, steps_before, recent
    snapshot = agent.probes.snapshot or agent.take_snapshot()
    return snapshot, 1, recent[-1:]


def _replay_script(path: Path) -> str:
    return (
        '"""Re-run the failing case of this bundle against your edited script: exit 1 if it still fails."""\n'
        "import sys\n\nfrom tuidebug.cli import main\n\n"
        f"sys.exit(main(['replay', {str(path)!r}, *sys.argv[1:]]))\n"
    )


def load_bundle(folder: str) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """The bundle's metadata, state and batches, loaded without running any code."""
    path = Path(folder)
    try:
        meta = json.loads((path / "bundle.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleError(f"cannot read the bundle {folder}: {exc}") from None
    state, batches = (_load_tensors(path / name) for name in ("state.pt", "batches.pt"))
    if meta.get("format") != FORMAT:
        raise BundleError(f"bundle format {meta.get('format')} is not {FORMAT}")
    return meta, state, batches


def _load_tensors(path: Path) -> Any:
    """A ``.pt`` file of plain tensors; anything else (a crafted pickle, a truncated file) is refused."""
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        refused = next((line.strip() for line in str(exc).splitlines() if "GLOBAL" in line), "not plain tensors")
        raise BundleError(f"refused {path}: it holds more than tensors, and loading it could run code ({refused})") \
            from None
    except Exception as exc:  # torch raises RuntimeError, EOFError, zipfile errors... for a damaged file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BundleError(f"cannot read {path}: truncated or damaged ({first})") from None


def bundle_snapshot(agent: Agent, state: dict[str, Any], scheduler_steps: list[int]) -> Snapshot:
    """A Snapshot that puts the bundle's state into the live model and optimizer. The optimizer
    keeps the script's own hyperparameters and schedule (the learning rate may be the fix being
    validated); its schedulers are moved to the step the bundle starts at."""
    snap = agent.take_snapshot()
    model = agent.model
    _check_same_model(model, state["model"])
    optimizer = agent.optimizer_of(model)
    snap.modules = [(m, state["model"] if m is model else s, f) for m, s, f in snap.modules]
    saved = copy.deepcopy(state["optimizer"])
    saved["param_groups"] = optimizer.state_dict()["param_groups"]
    snap.optimizers = [(o, saved if o is optimizer else s) for o, s in snap.optimizers]
    snap.grads = [(p, None) for p, _ in snap.grads]
    schedulers = [obj for obj, s in snap.stateful if "last_epoch" in s]
    snap.after_restore.append(lambda: _move_schedulers(schedulers, scheduler_steps))
    return snap


def _check_same_model(model: torch.nn.Module, saved: dict[str, Any]) -> None:
    """A bundle replayed against another model would fail deep inside the restore: say so plainly."""
    live = {name: tuple(value.shape) for name, value in model.state_dict().items()}
    kept = {name: tuple(value.shape) for name, value in saved.items() if isinstance(value, torch.Tensor)}
    missing, extra = sorted(kept.keys() - live.keys()), sorted(live.keys() - kept.keys())
    reshaped = sorted(name for name in kept.keys() & live.keys() if kept[name] != live[name])
    if missing or extra or reshaped:
        first = (f"{reshaped[0]} is {list(kept[reshaped[0]])} in the bundle, {list(live[reshaped[0]])} here" if reshaped
                 else f"the bundle has {missing[0]}" if missing else f"the bundle has no {extra[0]}")
        raise BundleError(f"the bundle was saved from another model ({first}; {len(missing) + len(extra) + len(reshaped)} "
                          f"difference(s) in all): replay it against the script it came from")


def _move_schedulers(schedulers: list[Any], steps: list[int]) -> None:
    """Put each LR scheduler at ``step`` and its optimizer's rates where the schedule has them there."""
    for scheduler, step in zip(schedulers, steps):
        scheduler.last_epoch = step
        closed_form = getattr(scheduler, "_get_closed_form_lr", None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # get_lr() outside step() warns; here it is what we want
            rates = closed_form() if closed_form is not None else scheduler.get_lr()
        for group, lr in zip(scheduler.optimizer.param_groups, rates):
            group["lr"] = lr
