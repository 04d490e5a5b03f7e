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
    epochs: dict[int, int] = {}

    def wrap_iter(original: Callable) -> Callable:
        def loader_iter(self: DataLoader) -> Any:
            iterator = original(self)
            epochs[id(self)] = epochs.get(id(self), 0) + 1
            iterator._tuidebug_epoch = epochs[id(self)]
            iterator._tuidebug_loader = id(self)
            if agent.active():
                agent.on_loader(self)
            return iterator
        return loader_iter

    def wrap_next(original: Callable) -> Callable:
        def next_batch(self: _BaseDataLoaderIter) -> Any:
            if not agent.active():
                return original(self)
            source = getattr(self, "_tuidebug_loader", id(self))
            return agent.on_batch(lambda: original(self), getattr(self, "_tuidebug_epoch", None), source)
        return next_batch

    return _undo_all(_replace(DataLoader, "__iter__", wrap_iter), _replace(_BaseDataLoaderIter, "__next__", wrap_next))


def _install_backward_hook(agent: Agent) -> Callable[[], None]:
    """``Tensor.backward`` looks ``torch.autograd.backward`` up at call time: one wrapper sees both."""
    depth = [0]

    def wrap(original: Callable) -> Callable:
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0 and isinstance(tensors, torch.Tensor) and tensors.numel() == 1 and agent.active():
                agent.on_backward(tensors)
            depth[0] += 1  # reentrant checkpointing calls backward inside backward
            try:
                return original(tensors, *args, **kwargs)
            finally:
                depth[0] -= 1
        return backward

    return _replace(torch.autograd, "backward", wrap)


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

    def wrap_scale(original: Callable) -> Callable:
        def scale(self: Any, outputs: Any) -> Any:
            scaled = original(self, outputs)
            if isinstance(outputs, torch.Tensor) and outputs.numel() == 1 and agent.active():
                agent.on_scaled_loss(self, outputs, scaled)
            return scaled
        return scale

    def wrap_step(original: Callable) -> Callable:
        def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            if not agent.active():
                return original(self, optimizer, *args, **kwargs)
            agent.optimizer_stepped_since()
            result = original(self, optimizer, *args, **kwargs)
            if self.is_enabled() and not agent.optimizer_stepped_since():
                agent.on_scaler_skipped(_current_scale(self))
            return result
        return step

    scaler = torch.amp.GradScaler
    return _undo_all(_replace(scaler, "scale", wrap_scale), _replace(scaler, "step", wrap_step))


def _current_scale(scaler: Any) -> float | None:
    scale = getattr(scaler, "_scale", None)
    return float(scale) if scale is not None else None


def _install_state_hooks(agent: Agent) -> Callable[[], None]:
    """LR schedulers (probes restore them), and no checkpoint writes while a probe borrows the loop."""

    def wrap_init(original: Callable) -> Callable:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if agent.active():
                agent.on_stateful(self)
        return init

    def wrap_save(original: Callable) -> Callable:
        def save(*args: Any, **kwargs: Any) -> Any:
            if agent.probes.replaying and agent.active():
                return None
            return original(*args, **kwargs)
        return save

    return _undo_all(_replace(torch.optim.lr_scheduler.LRScheduler, "__init__", wrap_init),
                     _replace(torch, "save", wrap_save))


def _install_warning_hook(agent: Agent) -> Callable[[], None]:
    """Warnings the script shows still go to its stderr; the agent logs them too."""

    def wrap(original: Callable) -> Callable:
        def showwarning(message: Any, category: type, filename: str, lineno: int, *args: Any, **kwargs: Any) -> None:
            if agent.active():
                agent.on_warning(f"{category.__name__}: {message} ({filename}:{lineno})")
            original(message, category, filename, lineno, *args, **kwargs)
        return showwarning

    return _replace(warnings, "showwarning", wrap)


def _replace(owner: Any, name: str, wrap: Callable[[Callable], Callable]) -> Callable[[], None]:
    """Put ``wrap(original)`` in place of ``owner.name`` (with the original's name and docstring);
    returns what puts the original back."""
    original = getattr(owner, name)
    setattr(owner, name, functools.wraps(original)(wrap(original)))
    return lambda: setattr(owner, name, original)


def _undo_all(*undos: Callable[[], None]) -> Callable[[], None]:
    return lambda: [undo() for undo in undos]
