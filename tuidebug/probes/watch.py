"""Watching the ops of a replayed iteration: a TorchFunctionMode that sees every torch call made by
the user's own code (calls from torch internals and from tuidebug pass unseen), with its line.

Probes subclass ``OpWatch`` and look at each call in ``visit``; the mode is active while the
iteration's forward and loss run (``Adjust(mode=...)``).
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from tuidebug.sites import Site, behalf_site, is_user_file

MAX_CALLS = 20_000  # a watch stops looking after this many calls: a replayed step is bounded
# An in-place op's first argument is kept as it was before the op (``OpWatch.overwritten``) up to this
# many elements: a Dataset's image or a step's activations, not a whole data set held on the device.
MAX_KEPT_ELEMENTS = 1 << 24


def in_place(name: str) -> bool:
    """``div_``, ``clamp_``, ``__itruediv__``: ops that overwrite their first argument."""
    if name.startswith("__"):
        return name.startswith("__i") and name.endswith("__") and name not in ("__init__", "__index__", "__invert__")
    return name.endswith("_") and not name.endswith("__")


def op_name(func: Any) -> str:
    """``log``, ``__truediv__``; a property read as ``.data``."""
    name = getattr(func, "__name__", str(func))
    if name == "__get__":
        owner = getattr(func, "__self__", None)
        return f".{getattr(owner, '__name__', 'attribute')}"
    return name


def caller_site() -> Site | None:
    """The user's frame that made the current torch call: the first frame outside torch, if it is the
    user's; when tuidebug replays the user's loss, the line it stands for; else None (another library)."""
    frame = caller_frame(sys._getframe(2))
    return _site_of(frame) if frame is not None else behalf_site()


def _site_of(frame: FrameType) -> Site:
    return Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def caller_frame(frame: FrameType | None) -> FrameType | None:
    """The first frame from ``frame`` outwards that is not torch's, if it is the user's."""
    while frame is not None and frame.f_code.co_filename.startswith(_TRANSPARENT):
        frame = frame.f_back
    return frame if frame is not None and is_user_file(frame.f_code.co_filename) else None


# torch's own frames, and the agent's thin wrappers around torch functions, stand between a call and its caller
_TRANSPARENT = (os.path.dirname(torch.__file__) + os.sep, os.path.join(os.path.dirname(os.path.dirname(__file__)), "agent", "hooks.py"))


def op_tensors(values: Any) -> list[torch.Tensor]:
    """The tensors among an op's arguments (or results): each value a tensor, or a list or tuple of them
    (torch.cat's). One level only, unlike ``batches.tensors_of``, which walks a whole batch."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found


class OpWatch(TorchFunctionMode):
    """Calls ``visit(name, args, kwargs, result, site)`` for every torch call of the user's code."""

    keeps_overwritten = False  # a watch that reads ``overwritten`` (the others need no copy of in-place operands)

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.frame: FrameType | None = None  # the user's frame of the call being visited, during ``visit``
        self.failed: str | None = None  # a visit that raised: the watch stops, the user's call goes on
        # during ``visit`` of an in-place op: its first argument as it was before the op overwrote it
        self.overwritten: torch.Tensor | None = None

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        watching = self.calls < MAX_CALLS and self.failed is None and not self.done()
        before = _kept_before(func, args) if watching and self.keeps_overwritten else None
        result = func(*args, **kwargs)
        self.calls += 1
        if watching:
            self.frame = caller_frame(sys._getframe(1))
            site = _site_of(self.frame) if self.frame is not None else behalf_site()
            if site is not None:
                self.overwritten = before
                try:
                    with torch._C.DisableTorchFunction():
                        self.visit(op_name(func), args, kwargs, result, site)
                except Exception as exc:  # a watch's own bug must not take the user's call down
                    self.failed = f"{type(exc).__name__}: {exc}"
                finally:
                    self.frame, self.overwritten = None, None
        return result

    def inputs_before(self, args: tuple) -> tuple:
        """``args`` with an in-place op's first argument as it was before the op: what its result was made from."""
        return (self.overwritten, *args[1:]) if self.overwritten is not None and args else args

    def visit(self, name: str, args: tuple, kwargs: dict, result: Any, site: Site) -> None:
        """One call of the user's code; override."""

    def done(self) -> bool:
        """True once the watch has seen what it looks for (the rest of the step runs unwatched)."""
        return False


def _kept_before(func: Any, args: tuple) -> torch.Tensor | None:
    """A copy of the tensor an in-place op is about to overwrite (a small floating one), else None."""
    if not args or not isinstance(args[0], torch.Tensor) or not in_place(op_name(func)):
        return None
    target = args[0]
    if not target.is_floating_point() or target.numel() > MAX_KEPT_ELEMENTS:
        return None
    with torch._C.DisableTorchFunction(), torch.no_grad():
        return target.detach().clone()
