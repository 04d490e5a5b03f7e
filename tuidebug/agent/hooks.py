"""The torch hooks that let the agent watch an unmodified script.

All of them live in this importable module (Dynamo looks hook globals up in their module, and the
script's ``__main__`` is not ours) and are installed once, before the script runs. Every hook
body is a few attribute reads: it returns at once inside forked DataLoader workers, on other
threads, and while Dynamo traces. No global backward hooks: they rewrite the autograd graph.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch
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
        _install_loss_hooks(agent),
        _install_clip_hook(agent),
    ]


def _install_module_hooks(agent: Agent) -> Callable[[], None]:
    """The outermost module call with parameters is the model; one without, after it, the loss.

    One wrapper around ``Module.__call__``, not global module hooks: any global hook sends every module
    call of the process down torch's slower call path, about 3 us a call more (15 ms a step for a model
    of 5,000 layers, measured), where this wrapper costs under 1 us. Calls made inside a backward pass
    (checkpointing re-running a block's forward) are not top-level; while Dynamo traces, the wrapper
    only passes the call on.
    """
    depth = [0]
    handles = []

    def wrap_call(original: Callable) -> Callable:
        def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if _is_compiling():
                return original(module, *args, **kwargs)
            if depth[0] == 0 and agent.active() and _graph_task() == -1:
                agent.on_top_level_call(module, args)
            depth[0] += 1
            try:
                output = original(module, *args, **kwargs)
            except BaseException:
                if agent.active():
                    agent.on_module_error(module, args)
                raise
            finally:
                depth[0] -= 1
            if agent.tracing_outputs and agent.active():
                agent.on_module_output(module, output)
            return output
        return call

    def model_inputs(module: torch.nn.Module, args: tuple, kwargs: dict) -> Any:
        if not _is_compiling() and agent.active():
            return agent.on_model_call(args, kwargs)
        return None

    def model_output(module: torch.nn.Module, args: tuple, output: Any) -> None:
        if not _is_compiling() and agent.active():
            agent.on_model_output(output)

    def watch_model(module: torch.nn.Module) -> None:
        # Global pre-hooks never see kwargs (model(input_ids=...)): the model gets its own hooks.
        handles.append(module.register_forward_pre_hook(model_inputs, with_kwargs=True))
        handles.append(module.register_forward_hook(model_output))

    ours = {model_inputs, model_output}

    def wrap_getstate(original: Callable) -> Callable:
        # torch.save(model) and deepcopy pickle the module's hook dicts: leave ours out, so that the
        # script saves what it would save without tuidebug (a closure cannot be pickled at all).
        def getstate(self: torch.nn.Module) -> dict:
            state = original(self)
            for key in ("_forward_pre_hooks", "_forward_hooks"):
                hooks = state.get(key)
                if hooks and any(hook in ours for hook in hooks.values()):
                    state[key] = type(hooks)((k, h) for k, h in hooks.items() if h not in ours)
            return state
        return getstate

    def wrap_init(original: Callable) -> Callable:
        # A module built while a module's forward runs (a layer made inside forward): costs nothing else,
        # as modules are built once, before training, in a loop without that bug.
        def init(module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
            original(module, *args, **kwargs)
            if depth[0] > 0 and not _is_compiling() and agent.active():
                agent.on_module_made_in_forward(module)
        return init

    agent.on_new_model = watch_model
    undo_call = _replace(torch.nn.Module, "__call__", wrap_call)
    undo_getstate = _replace(torch.nn.Module, "__getstate__", wrap_getstate)
    undo_init = _replace(torch.nn.Module, "__init__", wrap_init)
    return lambda: ([handle.remove() for handle in handles], undo_call(), undo_getstate(), undo_init())


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

    def wrap_init(original: Callable) -> Callable:
        def loader_init(self: DataLoader, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if agent.active():
                agent.on_loader_created(self)
        return loader_init

    def wrap_next(original: Callable) -> Callable:
        def next_batch(self: _BaseDataLoaderIter) -> Any:
            if not agent.active():
                return original(self)
            source = getattr(self, "_tuidebug_loader", id(self))
            return agent.on_batch(lambda: original(self), getattr(self, "_tuidebug_epoch", None), source,
                                  lambda: _indices(self), lambda: getattr(self, "_num_yielded", None))
        return next_batch

    def wrap_next_index(original: Callable) -> Callable:
        def next_index(self: _BaseDataLoaderIter) -> Any:
            index = original(self)
            self._tuidebug_index = index
            return index
        return next_index

    return _undo_all(_replace(DataLoader, "__iter__", wrap_iter), _replace(_BaseDataLoaderIter, "__next__", wrap_next),
                     _replace(DataLoader, "__init__", wrap_init),
                     _replace(_BaseDataLoaderIter, "_next_index", wrap_next_index))


def _install_backward_hook(agent: Agent) -> Callable[[], None]:
    """``Tensor.backward`` looks ``torch.autograd.backward`` up at call time: one wrapper sees both."""
    depth = [0]

    def wrap(original: Callable) -> Callable:
        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            outermost = depth[0] == 0 and isinstance(tensors, torch.Tensor) and tensors.numel() == 1 and agent.active()
            if outermost:
                agent.on_backward(tensors)
            depth[0] += 1  # reentrant checkpointing calls backward inside backward
            try:
                result = original(tensors, *args, **kwargs)
            finally:
                depth[0] -= 1
            if outermost:
                agent.after_backward()
            return result
        return backward

    return _replace(torch.autograd, "backward", wrap)


def _install_optimizer_hooks(agent: Agent) -> Callable[[], None]:
    """The last moment before weights change (final gradients), and the step boundary."""

    def before(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        if agent.active():
            return agent.before_step(optimizer, args, kwargs)
        return None

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
                agent.on_scaler_skipped(optimizer, _current_scale(self))
            return result
        return step

    scaler = torch.amp.GradScaler
    return _undo_all(_replace(scaler, "scale", wrap_scale), _replace(scaler, "step", wrap_step))


def _indices(iterator: _BaseDataLoaderIter) -> list[int] | None:
    """The dataset indices of the batch just fetched: with worker processes, indices are sent out ahead of
    the batches that come back, so only single-process loading (and a map-style dataset) says them."""
    index = getattr(iterator, "_tuidebug_index", None)
    if getattr(iterator, "_num_workers", 1) != 0 or not isinstance(index, list) or not index:
        return None
    return index if isinstance(index[0], int) else None  # a sampler yields one kind of key: the first says which


def _to_float16(args: tuple, kwargs: dict) -> bool:
    """``module.to(...)``'s arguments convert it to float16 (``.to(torch.float16)``, ``.to(device, dtype)``)."""
    try:
        return torch._C._nn._parse_to(*args, **kwargs)[1] == torch.float16
    except (TypeError, RuntimeError):
        return False


def _current_scale(scaler: Any) -> float | None:
    scale = getattr(scaler, "_scale", None)
    return float(scale) if scale is not None else None


def _install_state_hooks(agent: Agent) -> Callable[[], None]:
    """LR schedulers (probes restore them, the learning checks count their steps), zero_grad calls
    (one between backward and step wipes the gradients), and no checkpoint writes while a probe
    borrows the loop."""

    def wrap_init(original: Callable) -> Callable:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if agent.active():
                agent.on_stateful(self)
                agent.on_scheduler_created(self)
        return init

    def wrap_half(original: Callable) -> Callable:
        def half(self: torch.nn.Module) -> torch.nn.Module:
            if agent.active():
                agent.on_half(self)
            return original(self)
        return half

    def wrap_to(original: Callable) -> Callable:
        def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
            if agent.active() and _to_float16(args, kwargs):
                agent.on_half(self)
            return original(self, *args, **kwargs)
        return to

    def wrap_step(original: Callable) -> Callable:
        def step(self: Any, *args: Any, **kwargs: Any) -> Any:
            if agent.active():
                if agent.probes.schedule_frozen():
                    return None
                if not agent.probes.replaying:
                    agent.on_scheduler_step(self)
            return original(self, *args, **kwargs)
        return step

    def wrap_optimizer_init(original: Callable) -> Callable:
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if agent.active():
                agent.on_optimizer_created(self)
        return init

    def wrap_zero_grad(original: Callable) -> Callable:
        def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
            if agent.active() and not agent.probes.replaying:
                agent.on_zero_grad()
            return original(self, *args, **kwargs)
        return zero_grad

    def wrap_train(original: Callable) -> Callable:
        def train(self: torch.nn.Module, mode: bool = True) -> Any:
            if not mode and agent.active():
                agent.on_eval_called(self, sys._getframe(1))
            elif mode and agent.active():
                agent.on_train_called(self, sys._getframe(1))
            return original(self, mode)
        return train

    def wrap_save(original: Callable) -> Callable:
        def save(*args: Any, **kwargs: Any) -> Any:
            if agent.probes.replaying and agent.active():
                return None
            return original(*args, **kwargs)
        return save

    scheduler, plateau = torch.optim.lr_scheduler.LRScheduler, torch.optim.lr_scheduler.ReduceLROnPlateau
    # ReduceLROnPlateau overrides both (its __init__ does not call LRScheduler's): what it overrides is wrapped too.
    plateau_hooks = [_replace(plateau, name, wrap) for name, wrap in (("__init__", wrap_init), ("step", wrap_step))
                     if name in vars(plateau)]
    return _undo_all(*plateau_hooks, _replace(scheduler, "__init__", wrap_init), _replace(scheduler, "step", wrap_step),
                     _replace(torch.optim.Optimizer, "__init__", wrap_optimizer_init),
                     _replace(torch.optim.Optimizer, "zero_grad", wrap_zero_grad),
                     _replace(torch.nn.Module, "zero_grad", wrap_zero_grad),
                     _replace(torch.nn.Module, "train", wrap_train), _replace(torch.nn.Module, "half", wrap_half),
                     _replace(torch.nn.Module, "to", wrap_to),
                     _replace(torch, "save", wrap_save))


def _install_warning_hook(agent: Agent) -> Callable[[], None]:
    """Warnings the script shows still go to its stderr; the agent logs them too."""

    def wrap(original: Callable) -> Callable:
        def showwarning(message: Any, category: type, filename: str, lineno: int, *args: Any, **kwargs: Any) -> None:
            if agent.active():
                agent.on_warning(category, str(message), filename, lineno)
            original(message, category, filename, lineno, *args, **kwargs)
        return showwarning

    return _replace(warnings, "showwarning", wrap)


# The functional losses (the nn.Module losses call them too): (input, target) as their first two arguments.
LOSS_FUNCTIONS = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
                  "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
                  "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss")


def _install_loss_hooks(agent: Agent) -> Callable[[], None]:
    """Every call of a loss function: its input and target are observed (shapes, ranges, what made
    the input), and replays of loops without a DataLoader put the captured target back. One-hot
    encodings made without ``num_classes`` are noted: their width follows the batch's largest label."""
    import torch.nn.functional as F

    depth = [0]

    def wrap_loss(original: Callable) -> Callable:
        name = original.__name__

        def loss(input: Any, target: Any = None, *args: Any, **kwargs: Any) -> Any:
            watched = depth[0] == 0 and agent.active() and not _is_compiling()
            if watched:
                if target is None and "target" in kwargs:
                    kwargs["target"] = agent.on_loss_call(name, input, kwargs["target"], original, kwargs)
                else:
                    target = agent.on_loss_call(name, input, target, original, kwargs)
            depth[0] += 1
            try:
                value = original(input, *args, **kwargs) if target is None else \
                    original(input, target, *args, **kwargs)
                if watched and agent.step == 0:
                    agent.on_stepless_loss(value)
                return value
            except Exception:
                if depth[0] == 1 and agent.active():
                    agent.on_loss_error(name, input, target if target is not None else kwargs.get("target"))
                raise
            finally:
                depth[0] -= 1
        return loss

    def wrap_one_hot(original: Callable) -> Callable:
        def one_hot(tensor: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
            result = original(tensor, num_classes)
            if agent.active() and not _is_compiling():
                agent.on_one_hot(num_classes, int(result.shape[-1]))
            return result
        return one_hot

    undos = [_replace(F, name, wrap_loss) for name in LOSS_FUNCTIONS if hasattr(F, name)]
    return _undo_all(*undos, _replace(F, "one_hot", wrap_one_hot))


def _install_clip_hook(agent: Agent) -> Callable[[], None]:
    """``clip_grad_norm_`` returns the gradient norm before it clipped: the figure a user watches (the
    optimizer's hook only ever sees the clipped one, at most the threshold). Lightning and accelerate
    clip through it too."""

    def wrap(original: Callable) -> Callable:
        def clip_grad_norm_(parameters: Any, max_norm: Any, *args: Any, **kwargs: Any) -> Any:
            total = original(parameters, max_norm, *args, **kwargs)
            if agent.active():
                agent.on_clip(total, max_norm)
            return total
        return clip_grad_norm_

    def wrap_with_norm(original: Callable) -> Callable:
        def clip_grads_with_norm_(parameters: Any, max_norm: Any, total_norm: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(parameters, max_norm, total_norm, *args, **kwargs)
            if agent.active():
                agent.on_clip(total_norm, max_norm)
            return result
        return clip_grads_with_norm_

    # accelerate (1.x) clips with get_total_norm and the public clip_grads_with_norm_ (torch >= 2.6),
    # never through clip_grad_norm_; torch's own clip_grad_norm_ calls the private one, so no clip counts twice.
    with_norm = [_replace(torch.nn.utils, "clip_grads_with_norm_", wrap_with_norm)] \
        if hasattr(torch.nn.utils, "clip_grads_with_norm_") else []
    return _undo_all(_replace(torch.nn.utils, "clip_grad_norm_", wrap),
                     _replace(torch.nn.utils.clip_grad, "clip_grad_norm_", wrap), *with_norm)


def _replace(owner: Any, name: str, wrap: Callable[[Callable], Callable]) -> Callable[[], None]:
    """Put ``wrap(original)`` in place of ``owner.name`` (with the original's name and docstring);
    returns what puts the original back."""
    original = getattr(owner, name)
    setattr(owner, name, functools.wraps(original)(wrap(original)))
    return lambda: setattr(owner, name, original)


def _undo_all(*undos: Callable[[], None]) -> Callable[[], None]:
    return lambda: [undo() for undo in undos]
