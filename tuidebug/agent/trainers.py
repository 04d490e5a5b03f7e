"""The two ways a probe runs the user's pipeline on a batch (``tuidebug.probe_api.Trainer``).

``ReplayTrainer`` hands the batch to the user's own loop: their forward, their loss code, their
backward and step (see ``probing.ProbeRuntime``). ``CopyTrainer`` trains a deep copy of the model
and optimizer with what the hooks observed (the model's inputs and an ``nn.Module`` loss, a
LightningModule's ``training_step``) or the loss function given to ``tuidebug.watch``; it is what
works when the loop is gone (post-mortem).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tuidebug.agent.snapshot import Snapshot
from tuidebug.batches import cut_whole, map_tensors, slice_batch, tensor_at, tensors_in
from tuidebug.probe_api import Adjust, Iteration, NoPipeline, optimizer_params
from tuidebug.sites import on_behalf_of

if TYPE_CHECKING:
    from tuidebug.agent.core import Agent
    from tuidebug.agent.probing import ProbeRuntime

MODEL_CALL = -1  # the hand-off source of loops without a DataLoader: the model's own call


def update_ratio(params: list[torch.Tensor], before: list[torch.Tensor]) -> float:
    """How far the weights moved from ``before``, relative to their size (one norm over all of them)."""
    with torch.no_grad():
        moved = torch.stack([torch.linalg.vector_norm((p.detach() - b).float()) for p, b in zip(params, before)])
        size = torch.stack([torch.linalg.vector_norm(b.float()) for b in before])
        return float(torch.linalg.vector_norm(moved) / torch.linalg.vector_norm(size).clamp_min(1e-30))


class StepAdjuster:
    """Applies a trial's changes around one optimizer step and measures it: the gradient norm before
    clipping, and the size of the update relative to the weights."""

    def __init__(self, optimizer: torch.optim.Optimizer, adjust: Adjust, result: Iteration) -> None:
        self.optimizer, self.adjust, self.result = optimizer, adjust, result
        self._rates: list[Any] = []
        self._before: list[torch.Tensor] = []

    def before(self) -> None:
        params = [p for p in optimizer_params(self.optimizer) if p.grad is not None]
        if params:
            clip = self.adjust.clip if self.adjust.clip else float("inf")
            norm = torch.nn.utils.clip_grad_norm_(params, clip)
            self.result.grad_norm = float(norm)
            self.result.grads_finite = bool(torch.isfinite(norm))
        self._rates = [group["lr"] for group in self.optimizer.param_groups]
        if self.adjust.from_base_rates:  # only the groups a scheduler drives: the others' rates are not annealed
            for group in self.optimizer.param_groups:
                if "initial_lr" in group:
                    group["lr"] = group["initial_lr"] * self.adjust.lr_scale
        elif self.adjust.lr_scale != 1.0:
            for group in self.optimizer.param_groups:
                group["lr"] = group["lr"] * self.adjust.lr_scale
        self._params = params
        if self.adjust.measure_update:
            self._before = [p.detach().clone() for p in params]

    def after(self) -> None:
        for group, lr in zip(self.optimizer.param_groups, self._rates):
            group["lr"] = lr
        if self._params:
            with torch.no_grad():
                norms = torch._foreach_norm([p.detach() for p in self._params])
                self.result.weights_finite = bool(torch.isfinite(torch.stack(norms)).all())
        if self._before:
            self.result.update_ratio = update_ratio(self._params, self._before)
        self._before = []


class HandUpdateAdjuster:
    """The trial's rate for a loop that updates its weights by hand (no optimizer to rescale): the
    iteration's own update, weights after minus weights before, is scaled by ``lr_scale`` once it is
    done; it is also measured against the weights."""

    def __init__(self, params: list[torch.Tensor], adjust: Adjust, result: Iteration) -> None:
        self.params, self.adjust, self.result = params, adjust, result
        self._before = [p.detach().clone() for p in params]

    def after(self) -> None:
        self.result.update_ratio = update_ratio(self.params, self._before)
        if self.adjust.lr_scale != 1.0:
            with torch.no_grad():
                for p, b in zip(self.params, self._before):
                    p.copy_(b + self.adjust.lr_scale * (p - b))


class ReplayTrainer:
    method = "replay through the script's own loop"

    def __init__(self, runtime: ProbeRuntime, captured: Any, recent: list[Any]) -> None:
        self.runtime = runtime
        self.batch = captured.batch
        self.size = captured.size
        self.iterations = 0
        self._recent = recent  # oldest first, ending with ``captured``

    def prepare(self, examples: int | None = None) -> Any:
        """The captured inputs, or their first ``examples``. The script's own code gets them, and an error
        there would end its run: inputs captured at the model's call (no DataLoader; a full-batch model, a
        sequence) and batches that hold more than rows (index pairs into the batch) are never cut."""
        if examples is None or self.runtime.source == MODEL_CALL or not cut_whole(self.batch, self.size):
            return self.batch
        return slice_batch(self.batch, examples, self.size)

    def recent_batches(self) -> list[Any]:
        return list(self._recent)

    def reset(self, state: Snapshot) -> None:
        """Start the next iteration from ``state``: restored on the training thread at hand-off."""
        self.runtime.pending_restore = state

    def step(self, batch: Any, adjust: Adjust | None = None) -> Iteration:
        self.iterations += 1
        return self.runtime.replay_iteration(batch, adjust or Adjust())

    def note(self) -> str | None:
        if not self.iterations:
            return None
        return (f"borrowed {self.iterations} iteration(s) of the script's loop: its own counters and logs saw "
                "them; model, optimizer, schedulers, scaler and RNG were restored afterwards")

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        model = self.runtime.agent.model
        return list(model.named_parameters()) if model is not None else []

    def close(self) -> None:
        """Nothing to free: the runtime restores the snapshot."""


def _copy(model: torch.nn.Module, optimizer: Any, schedulers: list[Any] = ()) -> tuple[torch.nn.Module, Any, list[Any]]:
    """A deep copy of (model, optimizer), the links between them kept. A LightningModule's copy shares
    its Trainer (which holds the whole run, and which training_step may ask for): its log calls are
    dropped (``_quiet``), and the snapshot restores the schedulers it may step. Tensors with
    a graph that modules keep in their attributes (outputs collected for the epoch's end) cannot be
    deep-copied: the copy shares them, detached."""
    trainer = model.__dict__.get("_trainer")
    copied, copied_optimizer, copied_schedulers = copy.deepcopy((model, optimizer, list(schedulers)),
                                                                _graph_tensors_detached(model))
    if trainer is not None:  # LightningModule.__getstate__ drops it
        for module in copied.modules():
            if "_trainer" in module.__dict__:
                module.__dict__["_trainer"] = trainer
        copied.log = copied.log_dict = _quiet  # on the copy's instance only
    if hasattr(optimizer, "_params") and not hasattr(copied_optimizer, "_params"):
        copied_optimizer._params = copied_optimizer.param_groups[0]["params"]  # LBFGS: set by __init__ only
    return copied, copied_optimizer, copied_schedulers


def _step_schedulers(model: torch.nn.Module, optimizer: Any) -> list[Any]:
    """The LR schedulers Lightning steps after every optimizer step (interval "step") of ``optimizer``:
    a warm-up must go on in the copy as it does in the run."""
    trainer = model.__dict__.get("_trainer")
    configs = getattr(trainer, "lr_scheduler_configs", None) or []
    return [c.scheduler for c in configs if getattr(c, "interval", "epoch") == "step"
            and getattr(c.scheduler, "optimizer", None) is optimizer]


def needs_closure(optimizer: Any) -> bool:
    """The optimizer's step() takes a closure it must be given (LBFGS)."""
    try:
        closure = inspect.signature(type(optimizer).step).parameters.get("closure")
    except (TypeError, ValueError):
        return False
    return closure is not None and closure.default is inspect.Parameter.empty


def _graph_tensors_detached(model: torch.nn.Module) -> dict[int, Any]:
    memo: dict[int, Any] = {}
    for module in model.modules():
        for name, value in vars(module).items():
            if not name.startswith("_"):
                for _, tensor in tensors_in(value):
                    if not tensor.is_leaf:
                        memo[id(tensor)] = tensor.detach()
    return memo


def _batch_loss(paths: Any, target_path: str, observed: Any) -> Any:
    """The loss of a raw batch: the model called with the batch's tensors at the paths the loop used,
    and the observed loss (a module, or a functional loss) against the tensor at the target's path."""
    positional, named = paths
    criterion, function, key = observed.criterion, observed.loss_function, observed.output_key

    def loss(model: torch.nn.Module, batch: Any) -> torch.Tensor:
        device = next(model.parameters()).device
        args = [tensor_at(batch, p).to(device) for p in positional]
        kwargs = {k: tensor_at(batch, p).to(device) for k, p in named.items()}
        target = tensor_at(batch, target_path).to(device)
        output = _item(model(*args, **kwargs), key)
        with on_behalf_of(observed.loss_site):
            if criterion is not None:
                return criterion(output, target)
            call, _, extra = function
            return call(output, target, **extra)

    return loss


def _item(output: Any, key: Any) -> Any:
    """The item of a model's tuple/dict output that the loss takes (the whole output for ``None``)."""
    return output if key is None else output[key]


def _observed_steps(agent: Agent, target: Any, as_targets: Any) -> list[Any]:
    """The recent steps of a loop without a DataLoader (up to a failure) as batches of the observed
    form ``((args, kwargs), targets)``: those whose first loss target is like ``target``."""
    failure = agent.failure
    steps = [s for s in failure.inputs if s.step <= failure.step] if failure and failure.inputs else \
        list(agent.step_inputs)

    def like(value: Any) -> bool:
        return isinstance(value, torch.Tensor) and isinstance(target, torch.Tensor) and \
            value.dtype == target.dtype and value.dim() == target.dim()

    return [((s.args, s.kwargs), as_targets(s.targets[0])) for s in steps if s.targets and like(s.targets[0])]


def _as_data(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach() if tensor.grad_fn is not None else tensor


def _quiet(*args: Any, **kwargs: Any) -> None:
    """The copy's ``self.log()``: dropped. Outside the Trainer's fit loop (after it ended, or between its
    hooks) Lightning refuses a log call, and the probes' steps have no place in the run's logs anyway."""


def _training_step(precision: Any) -> Callable[[torch.nn.Module, Any], torch.Tensor]:
    """The loss of a LightningModule's training_step, called as Lightning's own loop calls it: the batch
    through the trainer's precision plugin (``precision="16-true"`` casts it to float16) and the step
    in the plugin's context (autocast for ``"16-mixed"``)."""
    def loss(model: torch.nn.Module, batch: Any) -> torch.Tensor:
        if precision is None:
            return _training_step_loss(model, batch)
        with precision.train_step_context():
            return _training_step_loss(model, precision.convert_input(batch))
    return loss


def _training_step_loss(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        takes_index = len(inspect.signature(model.training_step).parameters) >= 2  # batch_idx is optional
        output = model.training_step(batch, 0) if takes_index else model.training_step(batch)
    loss = output.get("loss") if isinstance(output, dict) else output
    if not isinstance(loss, torch.Tensor):
        raise NoPipeline("training_step returned no loss (manual optimization): the probes cannot train a copy")
    return loss


def _no_pipeline(agent: Agent, model: torch.nn.Module | None) -> str:
    """Why no copy can be trained: nothing seen yet, or a run that steps weights kept as plain tensors."""
    plain = agent.hand_updated_parameters() if model is None and agent.step else []
    if plain:
        return (f"the script trains no nn.Module: its {len(plain)} weight tensor(s) are plain tensors updated by hand "
                f"({agent.step} steps so far), and the probes replay a model and its optimizer; hold the weights in "
                "an nn.Module (nn.Parameter) and step them with a torch.optim optimizer to have them checked")
    return "no model and optimizer seen yet: let the script run at least one step"


class CopyTrainer:
    """Trains a deep copy of (model, optimizer): the real ones are never touched."""

    def __init__(self, agent: Agent, rates_of_last_step: bool = False) -> None:
        """``rates_of_last_step``: train at the rates of the run's last step, not the optimizer's
        current ones (after the script's end a schedule may have stepped its rate to 0)."""
        observed = agent.observed
        model = observed.model
        optimizer = agent.optimizer_of(model) if model is not None else None
        if model is None or optimizer is None:
            raise NoPipeline(_no_pipeline(agent, model))
        self._rates = agent.rates_of_last_step(optimizer) if rates_of_last_step else None
        lightning = agent.lightning_module()
        self.observed_inputs = False  # inputs caught at the model's call, not a DataLoader batch: never sliced
        self._rebuilt = True  # the loss rebuilt from observations, not the script's own code (training_step, watch)
        if lightning is not None and agent.batches:
            self.method = "copy of the LightningModule and its optimizer, trained with its own training_step"
            self._loss = _training_step(getattr(getattr(lightning, "_trainer", None), "precision_plugin", None))
            self._rebuilt = False
            self.inputs, self.size = agent.batches[-1].batch, agent.batches[-1].size
            self._recent = [c.batch for c in agent.recent_batches()]
            model = lightning
        elif observed.watch_loss is not None and agent.batches:
            self.method = "copy of model and optimizer with the loss given to tuidebug.watch"
            self._loss = observed.watch_loss
            self._rebuilt = False
            self.inputs, self.size = agent.batches[-1].batch, agent.batches[-1].size
        elif agent.batches and agent.facts.input_paths and agent.facts.target_path and \
                (observed.criterion is not None or observed.loss_function is not None):
            self.method = "copy of model and optimizer fed the captured batches the way the loop feeds them"
            self._loss = _batch_loss(agent.facts.input_paths, agent.facts.target_path, observed)
            recent = agent.recent_batches()
            self.inputs, self.size = recent[-1].batch, recent[-1].size
            self._recent = [c.batch for c in recent]
        elif observed.trained_inputs is not None and observed.criterion is not None:
            self.method = "copy of model and optimizer with the observed inputs and loss module"
            self.observed_inputs = True
            self._loss = self._observed_loss
            self.inputs, self.size = (observed.trained_inputs, observed.trained_targets), observed.trained_size
            if len(observed.trained_targets) == 1:
                self._recent = _observed_steps(agent, observed.trained_targets[0], lambda t: (t,))
        elif observed.trained_inputs is not None and observed.trained_loss_function is not None:
            call, target, kwargs = observed.trained_loss_function
            key = observed.output_key
            self.method = f"copy of model and optimizer with the observed inputs and {call.__name__}"
            self.observed_inputs = True
            self._loss = lambda model, batch: call(_item(model(*batch[0][0], **batch[0][1]), key), batch[1], **kwargs)
            self.inputs, self.size = (observed.trained_inputs, target), observed.trained_size
            self._recent = _observed_steps(agent, target, lambda t: t)
        elif observed.trained_inputs is not None and observed.loss_key is not None:
            key = observed.loss_key
            self.method = "copy of model and optimizer with the observed inputs and the loss the model returns"
            self.observed_inputs = True
            self._loss = lambda model, batch: model(*batch[0], **batch[1])[key]
            self.inputs, self.size = observed.trained_inputs, observed.trained_size
        else:
            raise NoPipeline(
                "the loss was computed by code tuidebug cannot replay here (the script's loop is gone, and "
                "no nn.Module loss was seen): add `tuidebug.watch(model, optimizer, loss_fn=lambda model, batch: ...)`")
        # Inputs caught at the model's call may carry the graph of earlier calls (an RNN's hidden state
        # carried over characters): the replay treats them as data, or its second backward would fail.
        self.carried = {path for path, tensor in tensors_in(self.inputs) if tensor.grad_fn is not None}
        self.inputs = map_tensors(self.inputs, _as_data)
        if getattr(self, "_recent", None):
            self._recent = [map_tensors(batch, _as_data) for batch in self._recent]
        self.criterion = observed.criterion
        self.loss_site = observed.loss_site
        self.output_key = observed.output_key
        self.iterations = 0
        self._originals = (model, optimizer)
        self._schedulers = _step_schedulers(model, optimizer) if lightning is not None else []
        self.model, self.optimizer, self.schedulers = _copy(model, optimizer, self._schedulers)
        self._set_rates()

    def prepare(self, examples: int | None = None) -> Any:
        """The captured batch, or its first ``examples``; inputs observed at the model's call (no DataLoader
        batch) are never cut: a sequence-first tensor or a full-batch model does not slice by rows."""
        if examples is None or self.observed_inputs:
            return self.inputs
        return slice_batch(self.inputs, examples, self.size)

    def recent_batches(self) -> list[Any]:
        return list(getattr(self, "_recent", None) or [self.inputs])

    def reset(self, state: Snapshot) -> None:
        """Fresh copies of the real model and optimizer, loaded with ``state``."""
        model, optimizer = self._originals
        self.model, self.optimizer, self.schedulers = _copy(model, optimizer, self._schedulers)
        state.restore_into(model, self.model, optimizer, self.optimizer)
        state.restore_schedulers(self._schedulers, self.schedulers)
        self._set_rates()

    def _set_rates(self) -> None:
        if self._rates is not None:
            for group, rate in zip(self.optimizer.param_groups, self._rates):
                group["lr"] = rate

    def step(self, batch: Any, adjust: Adjust | None = None) -> Iteration:
        adjust = adjust or Adjust()
        self.iterations += 1
        result = Iteration()
        self.optimizer.zero_grad(set_to_none=True)
        if adjust.train_mode:
            self.model.train()
        if adjust.before_forward is not None:
            adjust.before_forward(self.model)
        with adjust.mode() if adjust.mode else contextlib.nullcontext():
            loss = self._replayed_loss(batch)
        result.loss = float(loss.detach())
        if adjust.before_backward is not None:
            adjust.before_backward(loss)
        loss.backward()
        adjuster = StepAdjuster(self.optimizer, adjust, result)
        adjuster.before()
        if needs_closure(self.optimizer):  # LBFGS re-evaluates the loss itself, many times a step
            self.optimizer.step(lambda: self._closure(batch, adjust))
        else:
            self.optimizer.step()
        adjuster.after()
        if not adjust.freeze_schedule:
            for scheduler in self.schedulers:
                scheduler.step()
        return result

    def _replayed_loss(self, batch: Any) -> torch.Tensor:
        """The loss of ``batch`` on the copy. A loss rebuilt from what was observed (the model's inputs, the
        loss function and its target's place in the batch) that fails on the first iteration was rebuilt
        wrongly (the script reshapes the target, or combines several losses): the probes cannot train a copy."""
        try:
            return self._scalar(self._loss(self.model, batch))
        except (RuntimeError, ValueError, TypeError, IndexError, KeyError) as exc:
            if self._rebuilt and self.iterations == 1:
                raise NoPipeline(f"the loss rebuilt from what was observed does not fit the captured batch "
                                 f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]}): give the probes the loss "
                                 "with `tuidebug.watch(model, optimizer, loss_fn=lambda model, batch: ...)`") from exc
            raise

    @staticmethod
    def _scalar(loss: torch.Tensor) -> torch.Tensor:
        """A loss of reduction="none" that the script reduced itself: the mean, as most scripts take."""
        return loss.mean() if isinstance(loss, torch.Tensor) and loss.dim() > 0 else loss

    def _closure(self, batch: Any, adjust: Adjust) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        with adjust.mode() if adjust.mode else contextlib.nullcontext():
            loss = self._replayed_loss(batch)
        loss.backward()
        return loss

    def _observed_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        (args, kwargs), targets = batch
        output = _item(model(*args, **kwargs), self.output_key)
        with on_behalf_of(self.loss_site):
            return self.criterion(output, *targets)

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        return list(self.model.named_parameters())

    def note(self) -> str:
        rates = ""
        if self._rates is not None:
            now = [group["lr"] for group in self._originals[1].param_groups]
            if now != self._rates:
                rates = (f"; at the rate of the run's last step ({', '.join(f'{r:.3g}' for r in self._rates)}), "
                         f"not the optimizer's after the script ended ({', '.join(f'{r:.3g}' for r in now)})")
        return "trained a copy: the real model and optimizer were not touched" + rates

    def close(self) -> None:
        self.model = self.optimizer = None
