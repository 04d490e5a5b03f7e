"""The torch hooks that let the agent watch an unmodified script.

All of them live in this importable module (Dynamo looks hook globals up in their module, and the
script's ``__main__`` is not ours) and are installed once, before the script runs. Every hook
body is a few attribute reads: it returns at once inside forked DataLoader workers, on other
threads, and while Dynamo traces. No global backward hooks: they rewrite the autograd graph.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.modules.module as module_hooks
import torch.optim.optimizer as optimizer_hooks
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

from tuidebug.agent.core import Agent

_is_compiling = torch.compiler.is_compiling
_graph_task = torch._C._current_graph_task_id  # -1 outside a backward pass


def install(agent: Agent) -> list[Callable[[], None]]:
    """Install every hook; returns the callables that remove them again."""
    return [
        _install_module_hooks(agent),
        _install_dataloader_hooks(agent),
        _install_backward_hook(agent),
        _install_optimizer_hooks(agent),
        _install_grad_scaler_hooks(agent),
        _install_state_hooks(agent),
        _install_warning_hook(agent),
    ]


def _install_module_hooks(agent: Agent) -> Callable[[], None]:
    """The outermost module call with parameters is the model; one without, after it, the loss.

    Calls made inside a backward pass (checkpointing re-running a block's forward) are not top-level.
    ``torch.compile(module)`` warns about any global module hook; ours do nothing while Dynamo traces,
    so that warning, which the script would not show without tuidebug, is silenced.
    """
    depth = [0]
    handles = []
    warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks",
                            category=UserWarning)

    def before_forward(module: torch.nn.Module, args: Any) -> None:
        if _is_compiling():
            return
        if depth[0] == 0 and agent.active() and _graph_task() == -1:
            agent.on_top_level_call(module, args)
        depth[0] += 1

    def after_forward(module: torch.nn.Module, args: Any, output: Any) -> None:
        if not _is_compiling():
            depth[0] -= 1

    def model_inputs(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if not _is_compiling() and agent.active():
            agent.on_model_inputs(args, kwargs)

    def model_output(module: torch.nn.Module, args: tuple, output: Any) -> None:
        if not _is_compiling() and agent.active():
            agent.on_model_output(output)

    def watch_model(module: torch.nn.Module) -> None:
        # Global pre-hooks never see kwargs (model(input_ids=...)): the model gets its own hooks.
        handles.append(module.register_forward_pre_hook(model_inputs, with_kwargs=True))
        handles.append(module.register_forward_hook(model_output))

    agent.on_new_model = watch_model
    handles.append(module_hooks.register_module_forward_pre_hook(before_forward))
    handles.append(module_hooks.register_module_forward_hook(after_forward, always_call=True))
    return lambda: [handle.remove() for handle in handles]


def _install_dataloader_hooks(agent: Agent) -> Callable[[], None]:
    """Every batch a DataLoader yields, single- or multi-process, and the epoch it belongs to."""
    original_next = _BaseDataLoaderIter.__next__
    original_iter = DataLoader.__iter__
    epochs: dict[int, int] = {}

    @functools.wraps(original_iter)
    def loader_iter(self: DataLoader) -> Any:
        iterator = original_iter(self)
        epochs[id(self)] = epochs.get(id(self), 0) + 1
        iterator._tuidebug_epoch = epochs[id(self)]
        iterator._tuidebug_loader = id(self)
        if agent.active():
            agent.on_loader(self)
        return iterator

    @functools.wraps(original_next)
    def next_batch(self: _BaseDataLoaderIter) -> Any:
        if not agent.active():
            return original_next(self)
        source = getattr(self, "_tuidebug_loader", id(self))
        return agent.on_batch(lambda: original_next(self), getattr(self, "_tuidebug_epoch", None), source)

    DataLoader.__iter__ = loader_iter
    _BaseDataLoaderIter.__next__ = next_batch

    def remove() -> None:
        DataLoader.__iter__ = original_iter
        _BaseDataLoaderIter.__next__ = original_next

    return remove


def _install_backward_hook(agent: Agent) -> Callable[[], None]:
    """``Tensor.backward`` looks ``torch.autograd.backward`` up at call time: one wrapper sees both."""
    original = torch.autograd.backward
    depth = [0]

    @functools.wraps(original)
    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if depth[0] == 0 and isinstance(tensors, torch.Tensor) and tensors.numel() == 1 and agent.active():
            agent.on_backward(tensors)
        depth[0] += 1  # reentrant checkpointing calls backward inside backward
        try:
            return original(tensors, *args, **kwargs)
        finally:
            depth[0] -= 1

    torch.autograd.backward = backward

    def remove() -> None:
        torch.autograd.backward = original

    return remove


def _install_optimizer_hooks(agent: Agent) -> Callable[[], None]:
    """The last moment before weights change (final gradients), and the step boundary."""

    def before(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if agent.active():
            agent.before_step(optimizer)

    def after(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if agent.active():
            agent.after_step(optimizer)

    pre = optimizer_hooks.register_optimizer_step_pre_hook(before)
    post = optimizer_hooks.register_optimizer_step_post_hook(after)
    return lambda: (pre.remove(), post.remove())


def _install_grad_scaler_hooks(agent: Agent) -> Callable[[], None]:
    """The raw loss behind ``scaler.scale(loss)``, and steps the scaler skips on inf/NaN."""
    scaler_class = torch.amp.GradScaler
    original_scale = scaler_class.scale
    original_step = scaler_class.step

    @functools.wraps(original_scale)
    def scale(self: Any, outputs: Any) -> Any:
        scaled = original_scale(self, outputs)
        if isinstance(outputs, torch.Tensor) and outputs.numel() == 1 and agent.active():
            agent.on_scaled_loss(self, outputs, scaled)
        return scaled

    @functools.wraps(original_step)
    def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        if not agent.active():
            return original_step(self, optimizer, *args, **kwargs)
        agent.optimizer_stepped_since()
        result = original_step(self, optimizer, *args, **kwargs)
        if self.is_enabled() and not agent.optimizer_stepped_since():
            agent.on_scaler_skipped(_current_scale(self))
        return result

    scaler_class.scale = scale
    scaler_class.step = step

    def remove() -> None:
        scaler_class.scale = original_scale
        scaler_class.step = original_step

    return remove


def _current_scale(scaler: Any) -> float | None:
    scale = getattr(scaler, "_scale", None)
    return float(scale) if scale is not None else None


def _install_state_hooks(agent: Agent) -> Callable[[], None]:
    """LR schedulers (probes restore them), and no checkpoint writes while a probe borrows the loop."""
    scheduler_class = torch.optim.lr_scheduler.LRScheduler
    original_init = scheduler_class.__init__
    original_save = torch.save

    @functools.wraps(original_init)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if agent.active():
            agent.on_stateful(self)

    @functools.wraps(original_save)
    def save(*args: Any, **kwargs: Any) -> Any:
        if agent.probes.replaying and agent.active():
            return None
        return original_save(*args, **kwargs)

    scheduler_class.__init__ = init
    torch.save = save

    def remove() -> None:
        scheduler_class.__init__ = original_init
        torch.save = original_save

    return remove


def _install_warning_hook(agent: Agent) -> Callable[[], None]:
    """Warnings the script shows still go to its stderr; the agent logs them too."""
    original = warnings.showwarning

    @functools.wraps(original)
    def showwarning(message: Any, category: type, filename: str, lineno: int, *args: Any, **kwargs: Any) -> None:
        if agent.active():
            agent.on_warning(f"{category.__name__}: {message} ({filename}:{lineno})")
        original(message, category, filename, lineno, *args, **kwargs)

    warnings.showwarning = showwarning

    def remove() -> None:
        warnings.showwarning = original

    return remove
