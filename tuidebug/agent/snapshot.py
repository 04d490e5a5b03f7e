"""Save and restore everything a probe could disturb, in host memory.

Parameters and buffers, gradients, every submodule's train/eval flag, optimizer state, LR
schedulers, AMP grad scalers, and the torch / CUDA / numpy / python RNG states. Copies go to host
memory so that a probe never adds GPU pressure (the OOM being diagnosed could be the next one).
Restores are in place (``load_state_dict``), so the script's references stay valid.
"""

from __future__ import annotations

import copy
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tuidebug.probe_api import optimizer_params


def to_host(value: Any) -> Any:
    """A deep copy of ``value`` with every tensor copied to the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: to_host(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_host(v) for v in value)
    return copy.deepcopy(value)


@dataclass
class Snapshot:
    modules: list[tuple[torch.nn.Module, dict[str, torch.Tensor], list[bool]]] = field(default_factory=list)
    loose_params: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    grads: list[tuple[torch.Tensor, torch.Tensor | None]] = field(default_factory=list)
    optimizers: list[tuple[Any, dict]] = field(default_factory=list)
    stateful: list[tuple[Any, dict]] = field(default_factory=list)  # schedulers and grad scalers
    rng: dict[str, Any] = field(default_factory=dict)
    after_restore: list[Callable[[], None]] = field(default_factory=list)
    versions: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # id(model) -> its tensors' (id, _version)

    @classmethod
    def take(cls, models: list[torch.nn.Module], optimizers: list[torch.optim.Optimizer],
             stateful: list[Any]) -> Snapshot:
        snap = cls()
        covered: set[int] = set()
        for model in models:
            flags = [m.training for m in model.modules()]
            snap.modules.append((model, to_host(model.state_dict()), flags))
            snap.versions[id(model)] = _versions(model)
            covered.update(id(p) for p in model.parameters())
        params = _unique(optimizer_params(*optimizers)
                         + [p for model in models for p in model.parameters()])
        snap.loose_params = [(p, to_host(p)) for p in params if id(p) not in covered]
        snap.grads = [(p, None if p.grad is None else to_host(p.grad)) for p in params]
        snap.optimizers = [(opt, to_host(opt.state_dict())) for opt in optimizers]
        snap.stateful = [(obj, to_host(obj.state_dict())) for obj in stateful]
        snap.rng = rng_state()
        return snap

    def restore(self) -> None:
        with torch.no_grad():
            for model, state, flags in self.modules:
                # Untouched since the snapshot (a probe that trained a copy): loading would bump the
                # version counters and break the backward of a step paused before it (the break at a NaN).
                if _versions(model) != self.versions.get(id(model)):
                    model.load_state_dict(state)
                for module, training in zip(model.modules(), flags):
                    module.training = training
            for param, value in self.loose_params:
                param.copy_(value)
            for param, grad in self.grads:
                param.grad = None if grad is None else grad.to(param.device)
        for opt, state in self.optimizers:
            opt.load_state_dict(copy.deepcopy(state))
        for obj, state in self.stateful:
            obj.load_state_dict(copy.deepcopy(state))
        set_rng_state(self.rng)
        for action in self.after_restore:
            action()


    def restore_into(self, original: torch.nn.Module, model: torch.nn.Module,
                     original_optimizer: Any, optimizer: Any) -> None:
        """Load the state saved for ``original`` (or for a module inside it) and its optimizer into copies."""
        paths = {id(m): name for name, m in original.named_modules()}
        for saved_model, state, _ in self.modules:
            if id(saved_model) in paths:
                target = model.get_submodule(paths[id(saved_model)]) if paths[id(saved_model)] else model
                target.load_state_dict(state)
        for saved_optimizer, state in self.optimizers:
            if saved_optimizer is original_optimizer:
                optimizer.load_state_dict(copy.deepcopy(state))
        set_rng_state(self.rng)

    def restore_schedulers(self, originals: list[Any], copies: list[Any]) -> None:
        """Load the states saved for ``originals`` (LR schedulers) into their copies."""
        saved = {id(obj): state for obj, state in self.stateful}
        for original, copied in zip(originals, copies):
            if id(original) in saved:
                copied.load_state_dict(copy.deepcopy(saved[id(original)]))


def _versions(model: torch.nn.Module) -> list[tuple[int, int]]:
    """Each parameter's and buffer's identity and in-place version counter: what changes when it is written."""
    return [(id(t), t._version) for t in model.state_dict(keep_vars=True).values() if isinstance(t, torch.Tensor)]


def _unique(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}
    for t in tensors:
        seen.setdefault(id(t), t)
    return list(seen.values())


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        sys.modules["numpy"].random.set_state(state["numpy"])
