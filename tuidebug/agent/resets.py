"""Whether each optimizer's gradients are reset between its steps, when a loop has several (a GAN).

With one optimizer, gradients already non-zero at a step's first backward mean nothing reset them
(``Agent._check_stale_grads``). With two that test cannot tell: in a correct GAN the generator's
backward also fills the discriminator's gradients, which its own ``zero_grad`` clears later. So each
optimizer is followed on its own, exactly: at one of its (sampled) steps one of its parameters keeps
its gradient, and a hook sums the gradients that arrive for it until that optimizer's next step. There
the gradient is either what arrived (reset between), or the kept one plus what arrived (never reset),
or neither (reset partway, clipped, unscaled by a GradScaler): only the second counts as carried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tuidebug.agent.host_reads import HostReads
from tuidebug.probe_api import optimizer_params

# The gradient is "the kept one plus what arrived" within this share of the kept one's norm. Carried
# over exactly, the difference is rounding (float32 accumulation: about 1e-7 relative); any reset makes it
# the kept gradient's whole norm, or a partial sum's. 1e-2 leaves room for half precision.
CARRY_TOLERANCE = 1e-2
# The parameter followed: the smallest weight matrix (a bias may get no gradient at all, before a norm
# layer); its gradient is copied once per sampled step.
MAX_KEPT_ELEMENTS = 1 << 20


@dataclass
class _Followed:
    param: torch.Tensor
    kept: torch.Tensor
    arrived: torch.Tensor
    handle: Any = None
    spoiled: bool = False  # a probe's replay ran backward through it


@dataclass
class OptimizerResets:
    """Per optimizer (by its label): (step, whether its gradient carried the previous step's)."""

    reads: HostReads
    replaying: Callable[[], bool]
    checks: dict[str, list[tuple[int, bool]]] = field(default_factory=dict)
    followed_names: dict[str, str] = field(default_factory=dict)  # label -> the parameter followed
    _followed: dict[int, _Followed] = field(default_factory=dict)

    def at_step(self, optimizer: torch.optim.Optimizer, label: str, step: int, follow: bool,
                name_of: Callable[[torch.Tensor], str]) -> None:
        """Before ``optimizer`` applies its gradients: judge what was followed since its last step, and
        follow one of its parameters to its next step when ``follow``."""
        followed = self._followed.pop(id(optimizer), None)
        if followed is not None:
            followed.handle.remove()
            self._judge(followed, label, step)
        if follow:
            self._follow(optimizer, label, name_of)

    def _follow(self, optimizer: torch.optim.Optimizer, label: str,
                name_of: Callable[[torch.Tensor], str]) -> None:
        param = _followed_param(optimizer)
        if param is None:
            return
        with torch.no_grad():
            followed = _Followed(param, param.grad.detach().clone(), torch.zeros_like(param.grad))

        def arrive(grad: torch.Tensor) -> None:
            if self.replaying():
                followed.spoiled = True
            elif not grad.is_sparse:
                with torch.no_grad():
                    followed.arrived.add_(grad.detach())

        followed.handle = param.register_hook(arrive)
        self._followed[id(optimizer)] = followed
        self.followed_names[label] = name_of(param)

    def _judge(self, followed: _Followed, label: str, step: int) -> None:
        grad = followed.param.grad
        if followed.spoiled or grad is None or grad.is_sparse or grad.shape != followed.kept.shape:
            return
        with torch.no_grad():
            carried = (grad - followed.kept - followed.arrived).norm()
            fresh = (grad - followed.arrived).norm()
            kept = followed.kept.norm()
        checks = self.checks.setdefault(label, [])

        def note(numbers: list[float]) -> None:
            carried_value, fresh_value, kept_value = numbers
            if kept_value > 0:
                checks.append((step, carried_value <= CARRY_TOLERANCE * kept_value
                               and fresh_value >= kept_value / 2))
                del checks[:-20]

        self.reads.later([torch.stack([carried, fresh, kept]).float()], note)

    def carried(self, last: int) -> tuple[str, list[int]] | None:
        """The first optimizer whose ``last`` checks all found its gradient carried over, with their steps."""
        for label, checks in self.checks.items():
            recent = checks[-last:]
            if len(recent) == last and all(stale for _, stale in recent):
                return label, [step for step, _ in recent]
        return None


def _followed_param(optimizer: torch.optim.Optimizer) -> torch.Tensor | None:
    params = [p for p in optimizer_params(optimizer)
              if p.requires_grad and p.grad is not None and not p.grad.is_sparse and p.numel() <= MAX_KEPT_ELEMENTS]
    if not params:
        return None
    return min(params, key=lambda p: (p.dim() < 2, p.numel()))
