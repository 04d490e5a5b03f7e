"""The agent's view of the training run, fed by the hooks on the training thread.

Everything here runs inside the user's process on their training thread, so every method does
the least it can: it keeps references to tensors and leaves reading their values to the writer
thread (``resolve``). A step ends at the first optimizer's step post-hook (or a step the
GradScaler skipped); loops that update their parameters by hand, with no optimizer, count a step
per backward pass once the parameters are seen to change between two of them.
"""

from __future__ import annotations

import collections
import functools
import gc
import inspect
import math
import os
import statistics
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tuidebug.agent.bundle import bundle_snapshot, load_bundle
from tuidebug.agent.check_schedule import CheckSchedule
from tuidebug.agent.client import AgentClient
from tuidebug.agent.crash import FailedLoss, FailedModule, LoaderShape
from tuidebug.agent.control import Control
from tuidebug.agent.facts import (CLASS_LOSSES, IDLE_STEPS, MADE_IN_FORWARD_SEEN, Facts, IdleOptimizer, LoaderSeen,
                                  SchedulerCalls, TrainModeEvaluation, own_parameters, watch_head)
from tuidebug.agent.gradients import (COST_SMOOTHING, NormSampler, ParameterLists, blocks_host, stacked_norms,
                                     total_of, values_of, with_dense_grad)
from tuidebug.agent.kept_batches import KeptBatches
from tuidebug.agent.memory import process_memory
from tuidebug.agent.probing import MODEL_CALL, ProbeRuntime, StepInputs
from tuidebug.agent.resets import OptimizerResets
from tuidebug.agent.snapshot import Snapshot
from tuidebug.agent.stepless import SteplessLosses
from tuidebug.agent.watched_step import WatchedStep
from tuidebug.batches import first_dim, map_tensors, tensors_in, tensors_of
from tuidebug.probes import holders, source
from tuidebug.probes.trials import CALM_REPLAY_STEPS, DIVERGENCE
from tuidebug.protocol import Event, Step
from tuidebug.probe_api import HeldFrame, optimizer_params
from tuidebug.sites import Site, frame_locals, is_user_file, user_callers, user_frame, user_site, user_site_text

MAX_LOSSES_PER_STEP = 256
HISTORY_STEPS = 2048
MIN_REPLAY_STEPS = 5  # a checkpoint closer to the failure than this may miss the climb to it
LOADER_RECENT = 2  # a loop fed its latest batch from a DataLoader this few steps ago: it uses one
# The model's calls with gradients off kept in a loop without a DataLoader: the failing step's (a DQN's acting call
# and its target's call are two a step) is what the NaN inputs check reads; they are never replayed.
UNTRAINED_KEPT = 4
MANUAL_PROBES = 32  # backward passes watched for parameters changing without an optimizer
# The graphs the script's own objects hold are tagged at the ends of this many sampled steps, from step 2
# (steps 2-5: the early steps are all sampled). A graph extended at every step keeps every tag, and the
# graphs check needs LEAKED_STEPS (3) earlier steps alive: four leave one to spare. Each search walks the
# frames' variables and the models' attributes (about 1 ms with 177k live objects), so a run does only
# these few and none on the steps that follow.
HELD_SEARCHES = 4
# A memory reading (/proc/self/statm) costs about 1 us in a loop of readings but 20-25 us between training
# steps (the bench's MLP, 2.5 ms steps: the step's allocations leave the kernel's counters cold). It is taken
# every ``memory_every`` steps, and at every step once its measured cost is at most MEMORY_SHARE of the step
# (about 12 ms steps here): a slow run that runs out of memory after a few dozen steps then still has the
# readings the growth check needs (facts.GROWTH_SAMPLES over the second half).
MEMORY_SHARE = 0.002
MEMORY_READ_SECONDS = 25e-6  # the cost assumed until the first reading is timed
# The optimizer that defines the step hands over to another once that one has stepped this many times
# in a row with no step of its own: a later stage's (a fine-tune after pre-training, the old optimizer
# still referenced). A GAN's optimizers take turns, and a WGAN's critic steps 5 times (100 in the
# original's first iterations, after which the critic keeps the count) per step of the generator.
HANDOVER_STEPS = 20
# The user's frames kept of the first training backward's stack: where an evaluation's backward parts from it
BACKWARD_STACK = 32
# Weights still over steps are a finding only at a rate of at least this share of its peak. Float32 keeps an
# update down to ~6e-8 of a weight: at 1% of a usual rate (1e-3 -> 1e-5) every update still shows, while the
# corpus's schedules stepped every batch fall by 10x or more a step, far below it within the 25 steps compared.
STILL_RATE_SHARE = 0.01

# The agent of this process, for ``tuidebug.watch``; None when not running under tuidebug.
CURRENT: Agent | None = None


@dataclass
class AgentConfig:
    break_on_nan: bool = True
    break_at: int | None = None
    post_mortem: bool = True
    stop_on_disconnect: bool = False
    attachable: bool = False  # under the screen: when it goes away, a later ``tuidebug attach`` takes the run
    norm_stride: int = 10
    # The recent batches (and model inputs) kept by reference for replays: enough to replay every
    # step since the rolling checkpoint, which is taken every ``checkpoint_every`` steps when cheap.
    keep_batches: int = 16
    batch_bytes: int | None = None  # their byte budget; None: a share of the memory they live in (kept_batches)
    checkpoint_every: int = 8
    # The share of the training time the rolling checkpoints may take: their interval stretches to keep
    # to it, within [every, 8 * every] steps. 0.5% under the screen. diagnose asks for 2%: its verdicts
    # replay the steps since a checkpoint with the batches kept for them (keep_batches), and a checkpoint
    # further back than those replays through the script's loop on other batches, and may not reproduce
    # the run (at 0.5% a model whose copy takes 2 ms every 16 ms step is copied every 25 steps, and the
    # verdict then changed from run to run with the step the checkpoint fell on).
    checkpoint_budget: float = 0.005
    checkpoint_max_params: int = 50_000_000
    memory_every: int = 5  # steps between memory readings at the step boundary (for the leak check)
    copy_post_mortem: bool = True  # after the script ended, probes train a copy (diagnose re-runs instead)
    replay: str | None = None  # a reproduction bundle to re-run once the model and optimizer are seen
    scratch_writes: str | None = None  # a diagnostic re-run: the script's file writes go to this folder (agent/sandbox.py)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AgentConfig:
        known = {k: v for k, v in values.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass
class Captured:
    """A batch the DataLoader yielded, the step it fed, its size, and which loader it came from."""

    step: int
    batch: Any
    size: int | None
    source: int
    indices: list[int] | None = None  # the dataset indices of its rows (single-process loading only)


@dataclass
class Observed:
    """What the hooks saw of the pipeline, for probes that run it on a copy."""

    models: list[torch.nn.Module] = field(default_factory=list)
    model: torch.nn.Module | None = None
    model_inputs: tuple[tuple, dict] | None = None  # of the latest call (where a crash happened)
    input_size: int | None = None
    # The latest model call whose loss went backward, and that loss's targets: an evaluation or a feature
    # extraction after it (grad on or not) must not pair its inputs with a training step's targets.
    trained_inputs: tuple[tuple, dict] | None = None
    trained_size: int | None = None
    trained_targets: tuple = ()
    trained_loss_function: tuple[Callable, Any, dict] | None = None
    output: weakref.ref | None = None
    criterion: torch.nn.Module | None = None
    criterion_targets: tuple = ()
    loss_function: tuple[Callable, Any, dict] | None = None  # a functional loss of the model's output
    output_paths: dict[int, Any] = field(default_factory=dict)  # id of each tensor in the output -> its key
    output_items: list[tuple[Any, weakref.ref]] = field(default_factory=list)  # (key, tensor) of a tuple/dict output
    output_key: Any = None  # the item of a tuple/dict output that the replayable loss takes (``(logits, hidden)``)
    loss_key: Any = None  # the key of the model's output that went backward (a model returning its loss)
    loss_site: Site | None = None  # where the script computes the replayable loss (criterion or function)
    watch_loss: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None
    stateful: list[weakref.ref] = field(default_factory=list)  # LR schedulers, grad scalers, in creation order
    module_names: dict[int, str] = field(default_factory=dict)  # id(module) -> its path in the model

    def key_in_output(self, tensor: Any) -> tuple[bool, Any]:
        """Whether ``tensor`` is the model's latest output or one item of it, and that item's key."""
        if self.output is not None and self.output() is tensor:
            return True, None
        return next(((True, key) for key, ref in self.output_items if ref() is tensor), (False, None))

    def stateful_objects(self) -> list[Any]:
        return [obj for ref in self.stateful if (obj := ref()) is not None]


@dataclass
class Failure:
    """The first non-finite value: the step it happened in, and the inputs that led to it."""

    step: int
    reason: str
    recent: list[Captured]
    inputs: list[StepInputs] = field(default_factory=list)
    trials: dict[tuple, Any] = field(default_factory=dict)  # replays already run and their start, shared by the probes
    not_kept: str = ""  # why older batches were not kept (their byte budget), for the bundle
    loss: torch.Tensor | None = None  # the non-finite loss (detached), when it was caught before backward
    held_frame: HeldFrame | None = None  # then: the user's frame that called backward, with its values
    untrained_inputs: list[StepInputs] = field(default_factory=list)  # the model's calls with gradients off


@dataclass
class PendingStep:
    """A step whose tensor values are read on the writer thread, after the device caught up."""

    step: int
    time: float
    losses: list[torch.Tensor]
    norms: list[torch.Tensor | float]  # every parameter's gradient norm, of every optimizer that stepped
    lrs: list[Any]
    step_seconds: float | None
    batch_size: int | None
    epoch: int | None
    cuda_allocated: int | None
    skipped: bool
    layer_names: list[str] | None = None
    layer_norms: list[torch.Tensor | float] | None = None
    backward_calls: int = 0
    clipped: list[torch.Tensor] = field(default_factory=list)  # what clip_grad_norm_ returned this step
    clip_at: float | None = None
    epoch_batch: int | None = None
    epoch_batches: int | None = None
    planned_steps: int | None = None
    compute_seconds: float | None = None
    norm_every: int = 1
    check_every: int | None = None
    ready: Any = None  # a CUDA event when any tensor lives on a GPU


class Agent:
    def __init__(self, config: AgentConfig, client: AgentClient | None) -> None:
        self.config = config
        self.client = client
        self.thread_id = threading.get_ident()
        self._forked = False  # a forked child keeps the parent thread's ident: say it is not the agent
        os.register_at_fork(after_in_child=self._mark_forked)
        self.control = Control(self)
        self.probes = ProbeRuntime(self)
        self.script_running = True
        self.step = 0
        self.observed = Observed()
        self.facts = Facts()
        self.facts.resets = OptimizerResets(self.facts.reads, lambda: self.probes.replaying)
        self.crash: Any = None  # the analysed exception of the script (``crash.Crash``), set post-mortem
        self.optimizers: list[torch.optim.Optimizer] = []  # those that stepped, the primary first
        self.created_optimizers: weakref.WeakSet = weakref.WeakSet()  # every one the script made
        self.batches: KeptBatches[Captured] = KeptBatches(config.keep_batches, config.batch_bytes)
        self.step_inputs: KeptBatches[StepInputs] = KeptBatches(config.keep_batches, config.batch_bytes)
        # The model's calls with gradients off in such a loop (acting in an environment, building a target from
        # the model's own prediction): kept apart, so that they do not push the training calls out of the kept
        # ones, which the replays feed back; a check reads those of the failing step.
        self.untrained_inputs: KeptBatches[StepInputs] = KeptBatches(UNTRAINED_KEPT, config.batch_bytes)
        self.history: collections.deque[Step] = collections.deque(maxlen=HISTORY_STEPS)
        self.loaders: dict[int, weakref.ref] = {}
        self.failure: Failure | None = None
        self.checkpoints: collections.deque[tuple[int, Snapshot]] = collections.deque(maxlen=2)
        # The latest checkpoints taken at a step whose loss was at the run's usual level: the rolling ones in a
        # calm run, and, once the loss climbs, the two before the climb (until calm checkpoints replace them)
        self.calm_checkpoints: collections.deque[tuple[int, Snapshot]] = collections.deque(maxlen=2)
        # While armed, the losses break-on-NaN reads anyway (no read of its own): (step, mean loss)
        self.read_losses: collections.deque[tuple[int, float]] = collections.deque(maxlen=HISTORY_STEPS)
        self._step_loss_values: list[float] = []
        self.manual_updates = False  # parameters updated by hand, no optimizer: a step per backward
        self.stepless = SteplessLosses()  # the loss values of a loop that never calls backward() nor steps
        self.watched_step = WatchedStep()
        self.tracing_outputs = True  # remember which module made each output (sampled steps only)
        self._outputs: dict[int, tuple[str, weakref.ref]] = {}  # id(output) -> its module's label, the output
        self._last_weighted: str | None = None
        self._checkpoint_numel: int | None = None
        self._next_checkpoint = 1
        self._primary: weakref.ref | None = None
        self._primary_since = 1  # the first step the current primary optimizer counted
        self._steps_in_a_row: dict[int, int] = {}  # id(optimizer) -> its steps since the primary's last one
        self._losses: list[torch.Tensor] = []
        self._loss_targets: list[Any] = []
        self._loss_calls = 0
        self._backward_calls = 0
        self._backward_since_step = 0
        self._zeroed: tuple[int, str] | None = None  # (backward passes so far, site) of the latest zero_grad after a backward
        self._backward_at_step: dict[int, int] = {}  # id(optimizer) -> backward passes so far at its latest step
        self._norms: list[torch.Tensor | float] = []
        self._layer: tuple[list[str], list[torch.Tensor | float]] | None = None
        self._layers_owed = False  # a per-layer step came while the norms were not due: the next due step takes them
        self._unchecked_losses: list[torch.Tensor] = []  # on a GPU: checked with the gradients, one device sync a step
        self.parameter_lists = ParameterLists()
        self.norm_sampler = NormSampler()
        self.checks = CheckSchedule()  # which steps run the sampled checks
        self._made_in_forward: list[tuple[torch.nn.Module, Site | None]] = []  # until the model's output
        self._made_seen = 0
        self._evaluating: tuple | None = None  # a no_grad call of the model in training mode, until its loss
        self._batch_norm_models: dict[int, bool] = {}  # id(model) -> whether it has batch norm that tracks statistics
        self._clipped: list[torch.Tensor] = []
        self._clip_at: float | None = None
        self._stepped = False
        self._last_step_end: float | None = None  # the first step has no duration of its own
        self._memory_read_seconds = MEMORY_READ_SECONDS  # running cost of one memory reading (see MEMORY_SHARE)
        self._batch_size: int | None = None
        self._epoch: int | None = None
        self._position: tuple[int | None, int | None] = (None, None)  # batch of the pass, batches in the pass
        self._pass_lengths: dict[int, int | None] = {}  # id(DataLoader) -> its batches a pass, read as the pass starts
        self._planned: int | None = None  # the run's length in steps, where the script states it
        self._compute_seconds: float | None = None  # from the last step's end to this step's first backward
        self._param_names: dict[int, str] = {}
        self._held_key: tuple = ()  # see _held_by_optimizers
        self._held_ids: set[int] = set()
        self._model_trained_at = -1  # the count of backward passes at the model's latest call with gradients on
        self._scaled: tuple[weakref.ref, torch.Tensor] | None = None
        self._skips_reported = 0
        self._fingerprint: torch.Tensor | None = None
        self._weights_seen: tuple[int, torch.Tensor] | None = None  # a sampled step and its weights' norms
        self._idle_seen: dict[int, tuple[int, torch.Tensor, torch.Tensor]] = {}  # optimizers never stepped: their
        # parameters' (sampled step, weights' norms, gradients' norms)
        self._peak_rate = 0.0  # the highest learning rate at the sampled steps
        self._watched_backwards = 0
        self._held_searches = 0
        self._leaves: list[torch.Tensor] = []  # without a model: the tensors the loss's graph accumulates into
        self._lightning: weakref.ref | None = None
        self._owner: torch.nn.Module | None = None  # see trained_module(); kept, as the models are
        self._datasets: dict[int, Any] = {}  # id(loader) -> its dataset, kept after the loader is gone
        self.failed_module: FailedModule | None = None  # the innermost module whose forward raised
        self.failed_loss: FailedLoss | None = None  # the loss call that raised

    def active(self) -> bool:
        """Hooks do nothing outside the training process's main thread (forked workers, DataParallel), nor
        while a probe runs on that thread itself (its forwards are not the script's), nor inside a
        torch.func transform (vmap, grad: per-sample calls on wrapper tensors that have no storage)."""
        return threading.get_ident() == self.thread_id and not self._forked and not self.probes.inline \
            and not _in_func_transform()

    def _mark_forked(self) -> None:
        self._forked = True

    def send(self, message: Any) -> None:
        if self.client is not None:
            self.client.send(message)

    def event(self, kind: str, message: str, details: list[str] | None = None) -> None:
        self.send(Event(kind=kind, message=message, time=time.time(), step=self.step, details=details or []))

    # --- what probes read (``tuidebug.probe_api.RunView``) -----------------------------------

    @property
    def model(self) -> torch.nn.Module | None:
        return self.observed.model

    def recent_batches(self) -> list[Captured]:
        """The batches of the steps up to the failure (or the latest), oldest first. A loop that reads a
        batch ahead (Lightning, accelerate) has already fetched the next one: it is left out."""
        failure = self.failure
        if failure is None:
            return list(self.batches)
        return [c for c in failure.recent if c.step <= failure.step] or list(failure.recent)

    def loop_uses_loader(self) -> bool:
        """Whether the loop's latest steps were fed by a DataLoader (its batches can be replayed)."""
        return bool(self.batches) and self.batches[-1].step >= self.step + 1 - LOADER_RECENT

    def dataset(self) -> Any:
        source = self.batches[-1].source if self.batches else None
        loader_ref = self.loaders.get(source)
        loader = loader_ref() if loader_ref is not None else None
        return getattr(loader, "dataset", None) if loader is not None else self._datasets.get(source)

    def lightning_module(self) -> torch.nn.Module | None:
        """The LightningModule that trains the current model, if the loop is Lightning's: the model
        itself, or the module that holds it (``self.net``)."""
        model = self.observed.model
        if model is None or "lightning" not in sys.modules and "pytorch_lightning" not in sys.modules:
            return None
        cached = self._lightning() if self._lightning is not None else None
        if cached is not None and any(m is model for m in cached.modules()):
            return cached
        found = model if _is_lightning(model) else next(
            (o for o in gc.get_objects() if isinstance(o, torch.nn.Module) and _is_lightning(o)
             and any(m is model for m in o.modules())), None)
        self._lightning = weakref.ref(found) if found is not None else None
        return found

    def optimizer_of(self, model: torch.nn.Module, unstepped: bool = False) -> torch.optim.Optimizer | None:
        """The optimizer that trains ``model`` (holds its parameters), the latest seen first; with ``unstepped``,
        else one the script made over them that has not stepped."""
        params = {id(p) for p in model.parameters()}
        candidates = [*reversed(self.optimizers), *(self.unstepped_optimizers() if unstepped else [])]
        return next((opt for opt in candidates if any(id(p) in params for p in optimizer_params(opt))), None)

    def unstepped_optimizers(self) -> list[torch.optim.Optimizer]:
        """The optimizers the script made that are not among those stepping (none yet, or an ended stage)."""
        return [o for o in list(self.created_optimizers) if not any(o is s for s in self.optimizers)]

    def rates_of_last_step(self, optimizer: torch.optim.Optimizer) -> list[float] | None:
        """The rates ``optimizer``'s param groups had at the run's last step that trained at all (a linear
        decay reaches 0 at the very last step); None if they are not all known."""
        if not self.history or optimizer not in self.optimizers:
            return None
        groups = sum(len(opt.param_groups) for opt in self.optimizers)
        offset = sum(len(opt.param_groups) for opt in self.optimizers[:self.optimizers.index(optimizer)])
        known = [list(step.lrs[offset:offset + len(optimizer.param_groups)]) for step in self.history
                 if len(step.lrs) == groups]
        if not known:
            return None
        return next((rates for rates in reversed(known) if all(rate > 0 for rate in rates)), known[-1])

    def model_inputs(self) -> tuple[tuple, dict] | None:
        return self.observed.model_inputs

    def known_models(self) -> list[torch.nn.Module]:
        return list(self.observed.models)

    def trained_module(self) -> torch.nn.Module | None:
        return self._owner if self._owner is not None else self.model

    def _find_owner(self, optimizer: torch.optim.Optimizer) -> None:
        """At an optimizer's first step, while the loop's frames exist: when the model seen does not hold
        all the optimizer's parameters (its parts are called from a method of its own), the smallest
        module the user's frames name that does."""
        held = {id(p) for p in optimizer_params(optimizer)}
        model = self.model
        if model is None or held <= {id(p) for p in model.parameters()}:
            return
        scopes = [frame_locals(frame) for frame in self.user_frames()]
        owners = [m for scope in scopes for m in list(scope.values()) if isinstance(m, torch.nn.Module)
                  and any(c is model for c in m.modules()) and held <= {id(p) for p in m.parameters()}]
        if owners:
            self._owner = min(owners, key=lambda m: sum(1 for _ in m.parameters()))

    def can_replay(self) -> bool:
        live = self.script_running and self.control.holding != "ended"
        return live or self.config.copy_post_mortem or self.lightning_module() is not None

    def user_frames(self) -> list[Any]:
        frame = sys._current_frames().get(self.thread_id)
        frames = []
        while frame is not None:
            if is_user_file(frame.f_code.co_filename):
                frames.append(frame)
            frame = frame.f_back
        return frames

    def uses_grad_scaler(self) -> bool:
        return any(isinstance(obj, torch.amp.GradScaler) for obj in self.observed.stateful_objects())

    def load_case(self, path: str) -> tuple[dict[str, Any], Snapshot, list[Any]]:
        """A reproduction bundle: its metadata, the state to replay from (in the script's own model
        and optimizer) and its batches."""
        meta, state, batches = load_bundle(path)
        return meta, bundle_snapshot(self, state, meta.get("scheduler_steps", [])), batches

    def module_of(self, tensor: Any) -> str | None:
        """The path of the innermost module whose output ``tensor`` is (seen on sampled steps): a model that
        returns its head's output unchanged names the head."""
        made = self._outputs.get(id(tensor))
        return made[0] if made is not None and made[1]() is tensor else None

    # --- observations from the hooks -------------------------------------------------------

    def on_top_level_call(self, module: torch.nn.Module, args: tuple) -> None:
        """An outermost module call: the model if it has parameters, else maybe the loss module."""
        # torch.compile's wrapper holds the model as its submodule _orig_mod (read from _modules: a missing
        # attribute costs nn.Module.__getattr__ an exception, a microsecond a call on every step)
        wrapped = module._modules.get("_orig_mod")
        if wrapped is not None or getattr(module, "_compiled_call_impl", None) is not None:
            self.watched_step.done = True  # a mode around a compiled call would make dynamo compile it again
        module = wrapped if wrapped is not None else module
        seen = self.observed
        if module is seen.model:
            if torch.is_grad_enabled():
                self._model_trained_at = self.facts.backward_total
            return
        if module is not seen.criterion and next(module.parameters(), None) is not None:
            if seen.model is not None and not torch.is_grad_enabled():
                return  # evaluated, not trained (a checkpoint loaded for the test set): the trained model stays
            if seen.model is not None and module not in seen.models and \
                    not any(p.requires_grad for p in module.parameters()):
                return  # a frozen network beside the model (a perceptual metric's, a teacher): the model stays
            if seen.model is not None and self._beside_trained_model(module, seen.model):
                return  # trainable, but no optimizer holds it while one trains the model (a learned metric, the model's
                # own layers called one by one from a method called directly): the model stays
            self._new_model(module)  # its own hooks (with kwargs) see this call already
            self._model_trained_at = self.facts.backward_total
        elif isinstance(module, torch.nn.modules.loss._Loss) and args and not torch.is_inference_mode_enabled():
            found, key = seen.key_in_output(args[0])
            if found:  # the loss of the model's own output: replayable on a copy
                if module is not seen.criterion or seen.loss_site is None:  # its line, once (a stack walk)
                    seen.loss_site = user_site()
                seen.criterion, seen.criterion_targets, seen.output_key = module, tuple(args[1:]), key

    def _beside_trained_model(self, module: torch.nn.Module, model: torch.nn.Module) -> bool:
        """The model has been through a backward and has run this step's forward, an optimizer the script made holds
        some of its parameters, and none made holds any of the module's. A model called only before the first backward
        (a test call of a model the script then builds again) or not since the last one (a stage that ended, its
        optimizer built over the wrong model) is none of those: the module called instead is the model."""
        if not self._model_trained_at == self.facts.backward_total > 0:
            return False
        held = self._held_by_optimizers()
        return any(id(p) in held for p in model.parameters()) and not any(id(p) in held for p in module.parameters())

    def _held_by_optimizers(self) -> set[int]:
        """The ids of the parameters every optimizer made holds, rebuilt when one is made or its groups change."""
        made = [*self.optimizers, *self.created_optimizers]
        key = tuple((id(o), len(o.param_groups)) for o in made)
        if key != self._held_key:
            self._held_key, self._held_ids = key, {id(p) for p in optimizer_params(*made)}
        return self._held_ids

    def on_model_call(self, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """The model is called (its own pre-hook, with kwargs): remember the inputs; while a probe
        replays a loop without a DataLoader, this is the hand-off point and the inputs are replaced."""
        if self.probes.wants_replay(MODEL_CALL) and self.probes.at_iteration_boundary():
            inputs = self.probes.next_input(lambda: StepInputs(self.step + 1, args, kwargs, [], None))
            if inputs.args is args and inputs.kwargs is kwargs or self.probes.keeps_own_inputs(inputs, args, kwargs):
                return None
            return inputs.args, inputs.kwargs
        if torch.is_inference_mode_enabled():
            return None  # an evaluation's inputs are inference tensors: no replay can train on them
        grad_on = torch.is_grad_enabled()
        if not grad_on:
            self._evaluating = (args, kwargs) if self._in_training_mode_with_batch_norm() else None
        self.observed.model_inputs = (args, kwargs)
        tensors = tensors_of((args, kwargs))
        self.facts.calls_since_backward += 1
        carries_graph = any(t.grad_fn is not None for t in tensors)
        self.facts.carried_input = carries_graph and grad_on
        self.observed.input_size = first_dim(tensors)
        self.facts.observe_call_size(tensors, user_site)
        if self.facts.model_site is None:
            self.facts.model_site = user_site()
            if self.facts.model_site is not None:  # the loop's file: read by the checks that scan the source
                self.facts.source_files.add(self.facts.model_site.path)
            self.facts.observe_first_inputs(tensors, self.facts.model_site)
        if self.batches and self.checks.sampled(self.step + 1):
            self.facts.input_paths = input_paths(args, kwargs, self.batches[-1].batch)
        if not self.loop_uses_loader():
            if carries_graph:
                # A GAN's D(G(z)): the inputs kept for replays must not keep the generator's graph alive.
                args, kwargs = map_tensors((args, kwargs), torch.Tensor.detach)
            if grad_on:  # the targets of the losses that follow belong to this call
                self._loss_targets = []
                self.step_inputs.append(StepInputs(self.step + 1, args, kwargs, self._loss_targets,
                                                   self.observed.input_size), tensors)
            else:  # a DQN's target call between its training call and the loss takes none of them
                self.untrained_inputs.append(StepInputs(self.step + 1, args, kwargs, [], self.observed.input_size),
                                             tensors)
        return None

    def _in_training_mode_with_batch_norm(self) -> bool:
        model = self.observed.model
        if model is None or not model.training:
            return False
        known = self._batch_norm_models.get(id(model))
        if known is None:
            known = self._batch_norm_models[id(model)] = any(
                isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats for m in model.modules())
        return known

    def _observe_evaluation(self, input: Any, target: Any, call: Callable, kwargs: dict) -> None:
        """The loss of a no_grad call of the model in training mode (an evaluation that forgot model.eval())."""
        evaluating, self._evaluating = self._evaluating, None
        found, key = self.observed.key_in_output(input)
        model = self.observed.model
        if not found or model is None:
            return
        inputs = map_tensors(evaluating, torch.Tensor.detach)
        target = target.detach() if isinstance(target, torch.Tensor) else target
        first = self.facts.train_mode_evaluation
        self.facts.observe_train_mode_evaluation(TrainModeEvaluation(
            self.step, inputs, key, (call, target, kwargs), first.loss_site if first else user_site(),
            self.facts.train_sites.get(id(model))))

    def on_train_called(self, module: torch.nn.Module, caller: Any) -> None:
        """``module.train()`` called from the user's own code: where, for an evaluation left in training mode."""
        if caller is not None and is_user_file(caller.f_code.co_filename):
            self.facts.train_sites[id(module)] = Site(caller.f_code.co_filename, caller.f_lineno, caller.f_code.co_name)

    def on_module_made_in_forward(self, module: torch.nn.Module) -> None:
        """A module built while a forward runs: held until the model's output, when its weights exist."""
        if self._made_seen < MADE_IN_FORWARD_SEEN:
            self._made_seen += 1
            self._made_in_forward.append((module, user_site()))

    def _check_made_in_forward(self) -> None:
        """The modules built during the forward that has just ended: those with trainable weights that are
        no part of the model get new weights at every call, which no optimizer holds."""
        made, self._made_in_forward = self._made_in_forward, []
        model = self.observed.model
        parts = {id(m) for m in model.modules()} if model is not None else set()
        own = {id(p) for p in model.parameters()} if model is not None else set()
        for module, site in made:
            # a container over the model's own layers (``self.layers[:-1]`` makes a new ModuleList) has no new weights
            if id(module) not in parts and any(p.requires_grad and id(p) not in own for p in module.parameters()):
                self.facts.observe_made_in_forward(module, site, self.step + 1)

    def on_model_output(self, output: Any) -> None:
        if self._made_in_forward:
            self._check_made_in_forward()
        if torch.is_inference_mode_enabled():
            return  # an evaluation's output: the training call's stays the one the loss is matched to
        seen = self.observed
        seen.output = weakref.ref(output) if isinstance(output, torch.Tensor) else None
        if isinstance(output, torch.Tensor):
            if output.grad_fn is not None and not self.probes.replaying:
                model = self.observed.model
                self.facts.tag_graph(output, self.step + 1, "model output", model is not None and not model.training,
                                     chained=self.facts.carried_input)
                if self.facts.graphs_piling_up(self.step + 1):
                    self._report_findings()
        elif isinstance(output, (tuple, list, dict)):
            items = output.items() if isinstance(output, dict) else enumerate(output)
            tensors = [(key, value) for key, value in items if isinstance(value, torch.Tensor)]
            seen.output_paths = {id(value): key for key, value in tensors}
            seen.output_items = [(key, weakref.ref(value)) for key, value in tensors]

    def on_module_output(self, module: torch.nn.Module, output: Any) -> None:
        """Any module's output on a sampled step: which module made it (for loss-input checks), and a
        tag in its graph (a tensor derived from a layer's output and kept keeps that graph alive)."""
        if isinstance(output, torch.Tensor):
            name = self.observed.module_names.get(id(module))
            if name is not None:
                label, made = f"{name} ({type(module).__name__})", self._outputs.get(id(output))
                if made is None or made[1]() is not output:  # the enclosing modules pass the same tensor on
                    self._outputs[id(output)] = (label, weakref.ref(output))
                if output.grad_fn is not None and module._parameters and not self.probes.replaying:
                    self._last_weighted = label  # the training forward's latest layer with weights
                if output.grad_fn is not None and not self.probes.replaying:
                    self.facts.tag_graph(output, self.step + 1, f"output of {name}")

    def on_loss_call(self, function: str, input: Any, target: Any, call: Callable, kwargs: dict) -> Any:
        """A loss function is called with (input, target): observe it on sampled steps, keep the
        target for replays of loops without a DataLoader; returns the target to use."""
        if self.probes.replaying:
            return self.probes.replay_target(target)
        grad_on = torch.is_grad_enabled()
        if not grad_on and function in CLASS_LOSSES:
            self._observe_evaluation_classes(input, target)
        if torch.is_inference_mode_enabled():
            return target  # an evaluation's: nothing a replay could train on
        if self._evaluating is not None and not grad_on:
            self._observe_evaluation(input, target, call, kwargs)
        seen = self.observed
        if seen.criterion is None:
            found, key = seen.key_in_output(input)
            if found:
                seen.loss_function, seen.output_key = (call, target, kwargs), key
                seen.loss_site = seen.loss_site or user_site()
        if self.step == 0 and not self.facts.backward_total:
            self._loss_without_backward(input)
        index = self._loss_calls
        self._loss_calls += 1
        if grad_on:  # an evaluation's loss under no_grad is nothing a replay trains on
            self._loss_targets.append(target)
        if self.checks.sampled(self.step + 1) or index not in self.facts.loss_calls:
            self.facts.observe_loss(index, function, input, target, self.module_of)
            if index == 0 and self.batches:
                self.facts.target_path = batch_path_of(target, self.batches[-1].batch)
            ignored = kwargs.get("ignore_index")
            if function in ("cross_entropy", "nll_loss") and isinstance(ignored, int) and ignored >= 0:
                self._observe_ignored(function, target, ignored)
        return target

    def on_stepless_loss(self, value: Any) -> None:
        """A loss function's value before any backward or step (see ``stepless``): kept per line, read every
        READ_EVERY calls. An evaluation's (a model in eval mode, inference mode) says nothing of training; a tensor
        wrapped by torch.func (inside vmap or grad) has no value of its own here."""
        model = self.observed.model
        if self.facts.backward_total or self.probes.replaying or not isinstance(value, torch.Tensor) or \
                value.numel() != 1 or torch.is_inference_mode_enabled() or (model is not None and not model.training) \
                or torch._C._functorch.is_functorch_wrapped_tensor(value):
            return
        site = user_site()
        if site is not None and self.stepless.observe(site.short, value.detach()):
            self._report_stepless()

    def _report_stepless(self) -> None:
        """The values waiting read: a loss gone non-finite in a loop that has run READ_EVERY loss calls (or to its
        end) without a backward is a NaN; a clear fall, the loop training without one (said once)."""
        stepless = self.stepless
        stepless.read()
        if stepless.broken:
            if not stepless.broken_said:
                stepless.broken_said = True
                self.event("nonfinite_loss", stepless.broken)
            return
        fallen = None if stepless.reported else stepless.fallen()
        if fallen:
            stepless.reported = True
            self.event("stepless_training", fallen)

    def _observe_evaluation_classes(self, scores: Any, target: Any) -> None:
        """An evaluation's class scores and labels, counted per class (see ``evaluation_classes``)."""
        if isinstance(scores, torch.Tensor) and isinstance(target, torch.Tensor) and scores.dim() == 2 \
                and scores.is_floating_point() and target.dim() == 1 and not target.is_floating_point():
            try:
                self.facts.evaluation_classes.observe(self.step, scores, target, user_site)
            except Exception as exc:  # a check's bug must not take the script's evaluation down with it
                self.event("error", f"could not count the evaluation's classes: {type(exc).__name__}: {exc}")

    def _observe_ignored(self, function: str, target: Any, index: int) -> None:
        """A class loss that ignores a target index of 0 or more, beside the model's input tokens: does the
        index also mark real tokens (those that are not the embedding's padding_idx)?"""
        model, inputs = self.observed.model, self.observed.model_inputs
        if model is None or inputs is None or not isinstance(target, torch.Tensor) or target.is_floating_point():
            return
        padding = next((m.padding_idx for m in model.modules()
                        if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None), None)
        tokens = [t.detach() for _, t in tensors_in(inputs) if not t.is_floating_point() and not t.is_complex()
                  and t.dim() >= 2 and t.numel() == target.numel()]
        if padding is None or not tokens:
            return
        self.facts.observe_ignored(user_site_text(), function, target.detach(), index, tokens, padding)

    def _loss_without_backward(self, input: Any) -> None:
        """Before any backward and step: a training loss with a graph, counted (a loop that never
        updates computes them and drops them)."""
        model = self.observed.model
        if not isinstance(input, torch.Tensor) or input.grad_fn is None or model is None or not model.training:
            return
        facts = self.facts
        facts.losses_without_backward += 1
        if not facts.unused_loss_sites:
            facts.unused_loss_sites = [str(site) for site in user_callers(2)]
        if facts.losses_without_backward % 5 == 0:
            self._report_findings()

    def on_module_error(self, module: torch.nn.Module, args: tuple) -> None:
        """A module's forward raised; the first one to say so is the innermost."""
        if self.failed_module is None or self.failed_module.step != self.step:
            name = self.observed.module_names.get(id(module), type(module).__name__)
            self.failed_module = FailedModule(module, name, list(args), self.step)

    def on_loss_error(self, function: str, input: Any, target: Any) -> None:
        self.failed_loss = FailedLoss(function, input, target, self.step)

    def on_scheduler_created(self, scheduler: Any) -> None:
        sites = user_callers(2)
        if sites:
            self.facts.scheduler_sites.append((type(scheduler).__name__, made_at(sites)))
            del self.facts.scheduler_sites[:-8]

    def on_half(self, module: torch.nn.Module) -> None:
        """``module.half()`` or ``.to(torch.float16)``: where the model was put in float16 (the precision
        check names the line)."""
        site = user_site()
        if site is not None and self.facts.half_site is None:
            self.facts.half_site = str(site)

    def on_optimizer_created(self, optimizer: torch.optim.Optimizer) -> None:
        self.created_optimizers.add(optimizer)
        sites = user_callers(2)
        if sites:
            self.facts.source_files.add(sites[0].path)
        self.facts.optimizer_sites.append((type(optimizer).__name__, made_at(sites) if sites else "?"))
        del self.facts.optimizer_sites[:-8]
        self.facts.made_sites[id(optimizer)] = self.facts.optimizer_sites[-1]

    def on_eval_called(self, module: torch.nn.Module, caller: Any) -> None:
        """``module.eval()`` (or ``train(False)``) called from the user's own code: where, for the mode check."""
        frame = caller.f_back if caller is not None and caller.f_code.co_name == "eval" else caller
        if frame is not None and is_user_file(frame.f_code.co_filename):
            sites = user_callers(2, frame)
            # Called from a method of the user's own (an attack's __call__, an evaluate()): the line that
            # called it is the one in the loop.
            caller = sites[1] if len(sites) > 1 and sites[1].function != sites[0].function else None
            self.facts.eval_sites[id(module)] = (sites[0], caller)

    def on_zero_grad(self) -> None:
        """``optimizer.zero_grad()`` / ``model.zero_grad()``: which steps reset (the stale-gradient check), and
        where, when a backward ran since the last step (the step check names a zero_grad that wipes the
        gradients between backward and step)."""
        steps = self.facts.zero_grad_steps
        if not steps or steps[-1] != self.step + 1:
            steps.append(self.step + 1)
        if self._backward_since_step:
            self._zeroed = (self.facts.backward_total, user_site_text())

    def on_one_hot(self, num_classes: int, width: int) -> None:
        if num_classes == -1:
            self.facts.one_hot.setdefault(user_site_text(), set()).add(width)

    def on_scheduler_step(self, scheduler: Any) -> None:
        """``scheduler.step()``: the script's own calls counted, with the line of the first ones. The call a
        scheduler's constructor makes (torch's initial step, at ``_step_count`` 0) registers it uncounted:
        a scheduler the script never steps has 0 calls."""
        calls = self.facts.schedulers.get(id(scheduler))
        if calls is None:
            calls = SchedulerCalls(type(scheduler).__name__, "?", 0, self.step, weakref.ref(scheduler))
            self.facts.schedulers[id(scheduler)] = calls
        if getattr(scheduler, "_step_count", None) == 0:
            return
        if calls.calls <= 1:
            calls.site = user_site_text()
        calls.calls += 1

    def _new_model(self, module: torch.nn.Module) -> None:
        """A model seen for the first time is announced and named; several models (a GAN) take turns
        as the current one at no cost."""
        seen = self.observed
        if module not in seen.models:
            seen.models.append(module)
            self._checkpoint_numel = None
            count = sum(p.numel() for p in module.parameters())
            self.event("model", f"{type(module).__name__} with {count:,} parameters")
            self._param_names.update({id(p): name for name, p in module.named_parameters()})
            self.facts.address_space = process_memory()[1]  # before its first forward: what the OOM check builds on
            if len(seen.models) == 1:  # the first pass's start, for the containers' count (as at each loader's start)
                self.facts.observe_containers(holders.container_sizes(seen.models))
            seen.module_names.update({id(m): name or type(m).__name__ for name, m in module.named_modules()})
            self.on_new_model(module)
        seen.model = module

    def on_new_model(self, module: torch.nn.Module) -> None:
        """Set by the hooks: watch the model's own calls (with kwargs) from now on."""

    def watch(self, model: torch.nn.Module, optimizer: Any, loss_fn: Any) -> None:
        """``tuidebug.watch``: the user names the model, optimizer and loss explicitly."""
        self._new_model(model)
        if optimizer is not None and optimizer not in self.optimizers:
            self.optimizers.insert(0, optimizer)
        self.observed.watch_loss = loss_fn
        self.event("watch", "tuidebug.watch: model, optimizer and loss given by the script")

    def on_stateful(self, obj: Any) -> None:
        """An LR scheduler or grad scaler: probes save and restore its state."""
        if all(ref() is not obj for ref in self.observed.stateful):
            self.observed.stateful.append(weakref.ref(obj))
            self._planned = self.planned_steps()

    def on_batch(self, fetch: Callable[[], Any], epoch: int | None, source: int,
                 indices: Callable[[], list[int] | None] = lambda: None,
                 yielded: Callable[[], int | None] = lambda: None) -> Any:
        """The batch the loop gets next: normally ``fetch()``'s, the DataLoader's own; ``indices()`` says
        which dataset samples it holds, once fetched, and ``yielded()`` how many batches its pass gave."""
        if self.probes.wants_replay(source):
            return self.probes.next_input(lambda: self._capture(fetch(), epoch, source, indices))
        batch = self._capture(fetch(), epoch, source, indices)
        self._position = (yielded(), self._pass_lengths.get(source))
        self.control.safe_point("batch")
        if self.config.replay and self.model is not None and self.optimizers:
            bundle, self.config.replay = self.config.replay, None
            self.probes.start("replay", {"bundle": bundle}, live_loop=True)
            self.control.hold("re-running the saved failing case", "batch")
        if self.probes.wants_replay(source):  # a probe asked for its first iteration while paused here
            return self.probes.begin(batch)
        return batch

    def _capture(self, batch: Any, epoch: int | None, source: int,
                 indices: Callable[[], list[int] | None] = lambda: None) -> Any:
        tensors = tensors_of(batch)
        self._batch_size = first_dim(tensors)
        self._epoch = epoch
        if not torch.is_inference_mode_enabled():  # batches made in inference mode cannot be trained on
            self.batches.append(Captured(self.step + 1, batch, self._batch_size, source, indices()), tensors)
        return batch

    def resolve(self, record: PendingStep) -> Step:
        """On the writer thread: the Step message, also kept in the recent history probes read."""
        step = to_step(record)
        self.history.append(step)
        return step

    def loader_batch_size(self) -> int | None:
        """The batch_size of the DataLoader the loop trains from, if it trains from one (and it sets one)."""
        if not self.loop_uses_loader():
            return None
        loader = self.feeding_loader()
        return loader.batch_size if loader is not None else None

    def feeding_loader(self) -> LoaderShape | None:
        """The DataLoader that gave the latest batch: what sizes its batches, where it was made."""
        if not len(self.batches):
            return None
        source = self.batches[-1].source
        ref = self.loaders.get(source)
        loader = ref() if ref is not None else None
        if loader is None:
            return None
        try:
            length = len(loader.dataset)
        except TypeError:  # an iterable dataset
            length = None
        seen = self.facts.loaders.get(source)
        return LoaderShape(length, loader.batch_size, bool(loader.drop_last), seen.created if seen else None)

    def planned_steps(self) -> int | None:
        """The run's length in optimizer steps where the script states it: Lightning's estimate from
        max_epochs/max_steps, else a schedule built for a number of steps (OneCycleLR's total_steps)."""
        lightning = self.lightning_module()
        trainer = getattr(lightning, "_trainer", None) if lightning is not None else None
        if trainer is not None:  # its attributes only: estimated_stepping_batches may set up the loaders itself
            max_steps, epochs = getattr(trainer, "max_steps", -1), getattr(trainer, "max_epochs", None)
            batches, every = getattr(trainer, "num_training_batches", None), getattr(trainer, "accumulate_grad_batches", 1)
            if isinstance(max_steps, int) and max_steps > 0:
                return max_steps
            if isinstance(epochs, int) and epochs > 0 and isinstance(batches, (int, float)) and math.isfinite(batches) \
                    and batches > 0:
                return int(epochs * batches // max(every, 1))
        for ref in self.observed.stateful:
            total = getattr(ref(), "total_steps", None)
            if isinstance(total, int) and total > 0:
                return total
        return None

    def on_loader_created(self, loader: Any) -> None:
        site = user_site()
        self.facts.loaders[id(loader)] = LoaderSeen(str(site) if site else None, None, _shuffles(loader))

    def on_loader(self, loader: Any) -> None:
        self.loaders[id(loader)] = weakref.ref(loader)
        seen = self.facts.loaders.setdefault(id(loader), LoaderSeen(None, None, _shuffles(loader)))
        if seen.iterated is None:
            seen.iterated = user_site_text()
        seen.passes, seen.pass_started = seen.passes + 1, self.step
        self._planned = self.planned_steps()
        if seen.trained and seen.passes == 2:
            self.event("settled", "epoch_end: the first pass over the training data ended")
        if self.observed.models:
            self.facts.observe_containers(holders.container_sizes(self.observed.models))
            self._report_findings()
        if self._datasets.get(id(loader)) is None:  # the dataset outlives its loader (post-mortem checks read it)
            self._datasets[id(loader)] = getattr(loader, "dataset", None)
        try:
            self.facts.epoch_length = self._pass_lengths[id(loader)] = len(loader)
        except TypeError:  # an iterable dataset has no length
            self._pass_lengths[id(loader)] = None

    def checkpoint_before_failure(self) -> tuple[int, Snapshot, int] | None:
        """(step, snapshot, steps from it to the failure) of the latest checkpoint at least
        MIN_REPLAY_STEPS before the failure, or the oldest one before it."""
        failing_step = self.failure.step if self.failure else self.step + 1
        before = [(step, snap) for step, snap in self.checkpoints if step < failing_step]
        if not before:
            return None
        far_enough = [c for c in before if failing_step - c[0] >= MIN_REPLAY_STEPS]
        step, snapshot = far_enough[-1] if far_enough else before[0]
        return step, snapshot, failing_step - step

    def calm_checkpoint_before_failure(self) -> tuple[int, Snapshot, int] | None:
        """(step, snapshot, steps from it to the failure) of the latest calm checkpoint older than the one
        ``checkpoint_before_failure`` gives, at most CALM_REPLAY_STEPS before the failure, whose weights gave
        the next step a loss at the run's usual level (a checkpoint's own step may be calm and its update not)."""
        rolling = self.checkpoint_before_failure()
        if rolling is None:
            return None
        failing_step = rolling[0] + rolling[2]
        losses = {s.step: s.loss for s in list(self.history) if s.loss is not None and math.isfinite(s.loss)}
        usual = statistics.median(losses.values()) if losses else None
        for step, snapshot in reversed(list(self.calm_checkpoints)):
            first = losses.get(step + 1)
            if step < rolling[0] and failing_step - step <= CALM_REPLAY_STEPS and first is not None \
                    and usual is not None and (usual <= 0 or first <= DIVERGENCE * usual):
                return step, snapshot, failing_step - step
        return None

    def _loss_calm(self) -> bool:
        """The latest step's loss (as break-on-NaN read it) is within DIVERGENCE times the median of those read
        so far (a loss with no positive median has no such ratio: calm)."""
        if not self.read_losses:
            return False
        step, latest = self.read_losses[-1]
        if step != self.step or not math.isfinite(latest):
            return False
        usual = statistics.median(value for _, value in self.read_losses if math.isfinite(value))
        return usual <= 0 or latest <= DIVERGENCE * usual

    def _read_loss(self, value: float) -> None:
        """A loss value break-on-NaN read, for the step's mean; a loop that never steps folds them (bounded)."""
        if len(self._step_loss_values) >= MAX_LOSSES_PER_STEP:
            self._step_loss_values = [sum(self._step_loss_values) / len(self._step_loss_values)]
        self._step_loss_values.append(value)

    def remember_failure(self, reason: str) -> None:
        if self.failure is None:
            self.failure = Failure(self.step + 1, reason, list(self.batches), list(self.step_inputs),
                                   not_kept=self.batches.not_kept, untrained_inputs=list(self.untrained_inputs))

    def take_snapshot(self) -> Snapshot:
        """The state to restore after a probe, or to replay from. Every optimizer the script made is in it,
        not only those that stepped: a probe that replays the loop before its first step (a NaN at step 0)
        steps one, and what that step leaves (Adam's moments, its step count) must go too."""
        return Snapshot.take(self.observed.models, [*self.optimizers, *self.unstepped_optimizers()],
                             self.observed.stateful_objects())

    def on_scaled_loss(self, scaler: Any, raw: torch.Tensor, scaled: torch.Tensor) -> None:
        self.on_stateful(scaler)
        self._scaled = (weakref.ref(scaled), raw.detach())

    def on_backward(self, tensor: torch.Tensor) -> None:
        if self._scaled is not None and self._scaled[0]() is tensor:
            loss = self._scaled[1]
        else:
            loss = tensor.detach()
        self._scaled = None
        if self.probes.replaying:
            self.probes.record_loss(loss, tensor)
            return
        if self.observed.output_paths and id(tensor) in self.observed.output_paths:
            self.observed.loss_key = self.observed.output_paths[id(tensor)]
        seen = self.observed
        seen.trained_inputs, seen.trained_size = seen.model_inputs, seen.input_size
        seen.trained_targets, seen.trained_loss_function = seen.criterion_targets, seen.loss_function
        if self.facts.backward_site is None:
            site = user_site()
            self.facts.backward_site = str(site) if site else "?"
            if site is not None:  # the loop's file, also where no model is called (weights as plain tensors)
                self.facts.source_files.add(site.path)
        self.facts.graphless_backward_grad_off = not tensor.requires_grad and not torch.is_grad_enabled()
        if not tensor.requires_grad and self.facts.backward_without_graph is None:
            self.facts.backward_without_graph = user_site_text()
        if tensor.requires_grad and self.facts.training_backward_stack is None:  # once: a stack walk
            self.facts.training_backward_stack = [(site.path, site.line) for site in reversed(user_callers(BACKWARD_STACK))]
        if self._backward_since_step == 0:
            self._check_stale_grads()
            if self._last_step_end is not None:
                self._compute_seconds = time.perf_counter() - self.control.held_seconds - self._last_step_end
        if self._primary is None and not self.manual_updates:
            self._watch_manual_updates(tensor)
        self._backward_since_step += 1
        self.facts.backward_total += 1
        self.facts.calls_per_backward = max(self.facts.calls_per_backward, self.facts.calls_since_backward)
        self.facts.calls_since_backward = 0
        if self.manual_updates and self._losses:
            self._finish_step(skipped=False)  # the previous iteration updated by hand: it was a step
        if len(self._losses) >= MAX_LOSSES_PER_STEP:  # fold long accumulations into one sum
            self._losses = [torch.stack([t.reshape(()) for t in self._losses]).sum()]
        self._losses.append(loss)
        self._backward_calls += 1
        self.facts.tag_graph(tensor, self.step + 1, "loss")
        if self._primary is None and not self.manual_updates and self.facts.backward_total % 5 == 0:
            self._report_findings()
        value = 0.0
        if self.config.break_on_nan and blocks_host(loss):
            self._unchecked_losses.append(loss)  # read with the step's gradients: one device sync a step
        elif self.config.break_on_nan:
            value = loss.item()  # a CPU scalar: no device to wait for
            self._read_loss(value)
        if not math.isfinite(value):
            self._break_on_loss(loss, value, "before backward", "backward")
        else:
            self.control.safe_point("backward")

    def _break_on_loss(self, loss: torch.Tensor, value: float, when: str, where: str) -> None:
        self.event("nonfinite_loss", f"non-finite loss ({value:g}) {when}")
        self.remember_failure(f"non-finite loss {when}")
        frame = user_frame()
        if self.failure.step == self.step + 1 and self.failure.loss is None and frame is not None:
            self.failure.loss, self.failure.held_frame = loss, HeldFrame.of(frame)
        self.control.break_on_nonfinite(f"non-finite loss {when}", where)

    def _check_stale_grads(self) -> None:
        """At the first backward since the last step, on sampled steps: were the gradients reset? (By an
        optimizer's zero_grad, or, in a loop that updates its weights by hand, by ``w.grad.zero_()``.)"""
        model = self.model
        by_hand = self.hand_updated_parameters()
        if (model is None and not by_hand) or (self._primary is None and not by_hand) or \
                not self.checks.sampled(self.step + 1):
            return
        param = by_hand[0] if by_hand else next((p for p in model.parameters() if p.requires_grad), None)
        if param is None:
            return
        step, stale_grads = self.step + 1, self.facts.stale_grads
        if param.grad is None:
            stale_grads.append((step, False))
        else:  # read with the step's other values
            self.facts.reads.later([param.grad.detach().any()], lambda numbers: stale_grads.append((step, numbers[0] != 0)))
        del stale_grads[:-50]

    def _watch_manual_updates(self, loss: torch.Tensor) -> None:
        """While no optimizer has been seen: did the parameters change since the last backward? (One
        fused norm over all of them: an update by hand may touch only some rows.) Without an nn.Module
        (plain tensors, makemore-style), the parameters are the leaves the loss's graph accumulates into."""
        if self._watched_backwards >= MANUAL_PROBES:
            return
        model = self.model
        if model is not None:
            params = [p.detach() for p in model.parameters() if p.requires_grad]
        else:
            self._leaves = self._leaves or graph_leaves(loss)
            params = [p.detach() for p in self._leaves]
        if not params:
            return
        self._watched_backwards += 1
        with torch.no_grad():
            now = torch.stack(torch._foreach_norm(params))
        if self._fingerprint is not None and not torch.equal(now, self._fingerprint):
            self.manual_updates = True
            self.facts.manual_updates += 1
            self.event("manual_updates", "parameters change between backward passes without an optimizer: "
                       "a step is counted per backward pass")
        self._fingerprint = now

    def hand_updated_parameters(self) -> list[torch.Tensor]:
        """The weights a loop without an optimizer updates by hand (none where an optimizer steps)."""
        if not self.manual_updates or self._primary is not None:
            return []
        if self.model is not None:
            return [p for p in self.model.parameters() if p.requires_grad]
        return list(self._leaves)

    def after_backward(self) -> None:
        """After the outermost backward, in loops that update by hand: the step's gradient norms."""
        if not self.manual_updates or self.probes.replaying or (self.model is None and not self._leaves):
            return
        tensors = self.model.parameters() if self.model is not None else self._leaves
        self._norms = []
        self._take_norms(lambda: with_dense_grad(tensors), primary=True)

    def _report_findings(self, frames: list[Any] | None = None) -> None:
        """The findings not reported yet; ``frames``: the loop's frames where they are not on the stack now
        (a traceback's, after an out-of-memory error)."""
        self.facts.reads.flush()  # the values the checks queued, when the step read nothing else
        self._find_detached_return()
        for code, text, details in self.facts.new_findings(self.step, lambda: [step.loss for step in list(self.history)]):
            if code == "check_failed":
                self.event("error", text)
                continue
            if code in ("graphs_kept", "memory_growth", "container_growth"):
                details = self._find_leak_holders(code == "graphs_kept", frames)
            self.event("finding", f"{code}: {text}", details)
        for code, text in self.facts.new_suspicions():
            self.event("suspect", f"{code}: {text}")

    def _find_detached_return(self) -> None:
        """Parameters that never get a gradient while the others do: does a module that holds them return its
        output cut from the graph (``return out.data``)? Its innermost such module, in the user's code."""
        missing, model = self.facts.partly_reached(), self.model
        if not missing or model is None or self.facts.detached_return is not None:
            return
        owners = sorted({name.rsplit(".", 1)[0] for name in missing if "." in name}, key=len, reverse=True)
        for owner in owners:
            parts = owner.split(".")
            for depth in range(len(parts), 0, -1):
                module = model.get_submodule(".".join(parts[:depth]))
                path = inspect.getsourcefile(type(module)) if is_user_file(inspect.getfile(type(module))) else None
                found = source.detached_returns(path, type(module).__name__) if path else []
                if found:
                    self.facts.detached_return = (".".join(parts[:depth]), found[0])
                    return

    def _tag_held_graphs(self) -> None:
        """Tag the graphs the script's objects hold now (``holders.tag_held``), at the first HELD_SEARCHES
        sampled steps from step 2: the graphs check then sees one that the script extends step after step
        without a loss in it (an EMA updated with autograd on)."""
        if self._held_searches >= HELD_SEARCHES or self.step < 2 or self.probes.replaying:
            return
        self._held_searches += 1
        step = self.step
        try:
            holders.tag_held(self.user_frames(), self.known_models(), step, lambda t: self.facts.tag_held(t, step))
        except Exception as exc:  # evidence only: it must not disturb the run
            self.event("error", f"the search for held graphs failed: {type(exc).__name__}: {exc}")

    def _find_leak_holders(self, any_graph: bool, frames: list[Any] | None = None) -> list[str]:
        """Memory is kept across steps: name what holds it now, while the loop's frames exist. Graphs of
        earlier steps first; with ``any_graph`` (graphs are known to pile up), graphs of this step held
        in containers; else the containers that grow."""
        try:
            frames, models = frames or self.user_frames(), self.known_models()
            every = holders.find(frames, models, self.step + 1)
            found = [h for h in every if h.oldest is not None]
            if not found and any_graph:
                found = holders.find(frames, models, self.step + 1, any_graph=True)
            found = found or every
            if not found and not any_graph:
                # Spread over many small objects (a cache on each token): the census, now, while there is room
                # for it; after an out-of-memory error there may be none.
                self.facts.leak_spread = next(iter(holders.spread_holders()), None)
        except Exception as exc:  # the search is evidence; it must not disturb the run
            return [f"could not search for what holds them: {type(exc).__name__}: {exc}"]
        if found or not self.facts.leak_holders:  # a later search that finds nothing keeps what an earlier one named
            self.facts.leak_holders, self.facts.leak_step = found, self.step
        spread = [self.facts.leak_spread.text()] if self.facts.leak_spread is not None else []
        return [h.text() for h in found[:3]] + spread

    def on_out_of_memory(self, frames: list[Any]) -> None:
        """The script ran out of memory; its frames still exist: tensors in them that gather the model
        outputs of several forward passes with their graphs, and containers that hold tensors (an evaluation
        loop's list of every batch's outputs): the leak check names them."""
        try:
            self.facts.gathered = holders.piled(frames, self.step + 1, max(1, self.facts.outputs_per_step))
            self.facts.held_at_oom = holders.find(_outside_forward(frames), self.observed.models, self.step + 1)
            self.facts.unrolled_weights = holders.weights_with_graph(frames, self.model)
            self._report_findings(frames)  # graphs kept since the last sampled step, with their holders while they exist
        except Exception as exc:  # evidence only: the script's own exception is what matters
            self.event("error", f"could not search the failing frames: {type(exc).__name__}: {exc}")

    def current_losses(self) -> list[torch.Tensor]:
        """The losses of the step in progress (at a break, the failing one)."""
        return list(self._losses)

    def before_step(self, optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """The optimizer's step pre-hook. With a closure (Lightning, LBFGS) the gradients exist only
        once the closure has run: it is wrapped, and the gradients are read when it returns."""
        if self.probes.replaying:
            self.probes.before_replay_step(optimizer)
            return None
        if optimizer not in self.optimizers:
            self.optimizers.append(optimizer)
            self.facts.optimizers = len(self.optimizers)
            self._find_owner(optimizer)
            groups = len(optimizer.param_groups)
            self.event("optimizer", f"{type(optimizer).__name__} with {groups} param group(s)")
            self.facts.step_sites[id(optimizer)] = (type(optimizer).__name__, user_site_text())
        self._follow_primary(optimizer)
        self._stepped = True
        self.facts.last_stepped[id(optimizer)] = self.step + 1
        # args[0] is the optimizer itself; a step of its own signature (step(forward, backward)) takes no closure
        closure = kwargs.get("closure", args[1] if len(args) > 1 and _takes_closure_second(type(optimizer)) else None)
        if not callable(closure):
            self.gradients_ready(optimizer)
            return None
        ran = [False]

        def measured_closure(*closure_args: Any, **closure_kwargs: Any) -> Any:
            result = closure(*closure_args, **closure_kwargs)
            if not ran[0]:
                ran[0] = True
                self.gradients_ready(optimizer)
            return result

        if "closure" in kwargs:
            return args, {**kwargs, "closure": measured_closure}
        return (args[0], measured_closure, *args[2:]), kwargs

    def _follow_primary(self, optimizer: torch.optim.Optimizer) -> None:
        """The first optimizer to step defines the step, until another steps HANDOVER_STEPS times in a row
        without it (or it is gone): the new stage's losses were not counted meanwhile, only its last one stays."""
        primary = self._primary() if self._primary is not None else None
        if optimizer is primary:
            self._steps_in_a_row.clear()
            return
        in_a_row = self._steps_in_a_row[id(optimizer)] = self._steps_in_a_row.get(id(optimizer), 0) + 1
        if primary is not None and in_a_row < HANDOVER_STEPS:
            return
        if primary is not None:
            self.event("optimizer", f"{type(optimizer).__name__} now defines the step: it made {in_a_row} steps "
                                    f"with none of {type(primary).__name__}'s (a new stage)")
            self._losses, self._norms, self._unchecked_losses = self._losses[-1:], [], self._unchecked_losses[-1:]
            self._backward_calls = min(self._backward_calls, 1)
            # The stage that ended is no optimizer of the run any more (its rate is not the step's rate, and
            # it is not a second optimizer); it is counted again if it steps again.
            self.optimizers[:] = [optimizer, *(o for o in self.optimizers if o is not primary and o is not optimizer)]
            self.facts.optimizers = len(self.optimizers)
        self._primary, self._primary_since = weakref.ref(optimizer), self.step + 1
        self._steps_in_a_row.clear()

    def gradients_ready(self, optimizer: torch.optim.Optimizer) -> None:
        """The gradients the optimizer is about to apply: their norms, and a break if not finite."""
        step = self.step + 1
        self._check_wiped(optimizer)
        if len(self.optimizers) > 1:
            label = f"optimizer {self.optimizers.index(optimizer) + 1} ({type(optimizer).__name__})"
            self.facts.resets.at_step(optimizer, label, step, self.checks.sampled(step),
                                      lambda p: self._param_name(p, 0))
        if step == 1 and not self.checkpoints and self.config.break_on_nan:
            self.checkpoints.append((0, self.take_snapshot()))  # the state before the first update
        if optimizer is self._primary() and self.model is not None:
            if self.checks.sampled(step):
                self.facts.check_gradients(step, self.model)
                self.facts.record_mode(step, self.model)
            # At a stage's first steps, sampled or not (a new stage begins at any step): every optimizer made, as
            # at step 1 an actor's may not have stepped yet
            if step <= self._primary_since + 1:
                made = [*self.optimizers, *self.created_optimizers]
                self.facts.check_parameters(self.model, made)
                self.facts.check_outside_parts(self.observed.models, self.model, made, step)
                self._watch_head(step)
        self._take_norms(lambda: self.parameter_lists.with_grad(optimizer), primary=optimizer is self._primary())

    def _take_norms(self, parameters: Callable[[], list[torch.Tensor]], primary: bool) -> None:
        """The step's gradient norms. While break-on-NaN is armed, at every step: read at once (with the
        losses not yet checked) and a break if they are not finite, before the optimizer applies them. Else
        on the steps the sampler says they are due."""
        started = time.perf_counter()
        self._layers_owed = self._layers_owed or (primary and self._wants_layers())
        due = self.config.break_on_nan or self.norm_sampler.due(self.step + 1)  # armed: the check needs them
        params = parameters() if due else []
        norms = stacked_norms(params)
        if self.config.break_on_nan and (norms is not None or self._unchecked_losses):
            norms = self._check_finite(norms)
        if norms is None:
            return
        parts = norms if isinstance(norms, list) else [norms]
        self._norms.extend(parts)
        if primary and self._layers_owed:
            self._layer, self._layers_owed = ([self._param_name(p, i) for i, p in enumerate(params)], parts), False
        self.norm_sampler.measured(time.perf_counter() - started)

    def _watch_head(self, step: int) -> None:
        """Keep the output layer's first weights: the module that made the loss's input, else the last layer
        with weights that the training forward ran (a CRF computing the loss inside the model)."""
        if self.facts.head is not None:
            return
        made = next((call.input_module for call in self.facts.loss_calls.values() if call.input_module), None)
        last = self._last_weighted if self._last_weighted is not None and self._reached(self._last_weighted) else None
        for head in (made, last):  # the model itself made the loss's input: its last layer did
            if head is not None and self.facts.head is None:
                self.facts.head = watch_head(head, self.model, step, [*self.optimizers, *self.created_optimizers])

    def _reached(self, label: str) -> bool:
        """Whether the loss reaches the layer ``label`` (``fc (Linear)``): a trainable weight of it has a gradient
        now, after backward (a frozen one counts: its freeze is what the head check names). The last layer a
        forward ran need not make the output: an EGNN's final feature update is computed and left unused."""
        own = [p for p in own_parameters(self.model, label.split(" ", 1)[0]).values() if p.requires_grad]
        return not own or any(p.grad is not None for p in own)

    def _check_wiped(self, optimizer: torch.optim.Optimizer) -> None:
        """A zero_grad after this step's backward passes, with no backward since: the step applies nothing."""
        zeroed, backward_total = self._zeroed, self.facts.backward_total
        previous = self._backward_at_step.get(id(optimizer), 0)
        self._backward_at_step[id(optimizer)] = backward_total
        if zeroed is None or zeroed[0] != backward_total or backward_total <= previous:
            return
        params = self.parameter_lists.with_grad(optimizer)
        with torch.no_grad():
            if params and bool(torch.stack([p.grad.detach().abs().sum() for p in params]).sum() != 0):
                return
        self.facts.wiped_grads.append((self.step + 1, zeroed[1], user_site_text()))
        del self.facts.wiped_grads[:-20]

    def _check_finite(self, norms: torch.Tensor | None) -> list[float] | None:
        """The step's one host read while armed: the gradient norms, on a GPU the losses of its backward
        passes, and what the checks queued (one transfer). A break at the first non-finite one; the
        norms' values are returned."""
        losses, self._unchecked_losses = self._unchecked_losses, []
        values = self.facts.reads.read_with(
            ([torch.stack([loss.reshape(()) for loss in losses])] if losses else []) + ([norms] if norms is not None else []))
        loss_values, norm_values = values[:len(losses)], values[len(losses):]
        for value in loss_values:
            self._read_loss(value)
        bad = next((i for i, value in enumerate(loss_values) if not math.isfinite(value)), None)
        if bad is not None:
            self._break_on_loss(losses[bad], loss_values[bad], "(read before the optimizer step)", "before_step")
        elif norms is not None and not math.isfinite(total := total_of(norm_values)):
            self.event("nonfinite_grad", f"non-finite gradient norm ({total:g}) before optimizer step")
            self.control.break_on_nonfinite("non-finite gradient before the optimizer step", "before_step")
        return norm_values if norms is not None else None

    def after_step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.probes.replaying:
            self.probes.after_replay_step(optimizer)
            return
        if self._primary is not None and optimizer is self._primary():
            if self.loop_uses_loader() and self.batches[-1].source in self.facts.loaders:
                self._trained_from(self.batches[-1].source)
            self._finish_step(skipped=False)

    def _trained_from(self, source: int) -> None:
        """The loop trains on this loader's batches. The first time, while its first pass is on, the end of
        that pass is announced as evidence to wait for: much of a script runs at an epoch's end (evaluation,
        metrics, a schedule's step), and diagnose lengthens its window for it when the end is near."""
        seen = self.facts.loaders[source]
        if seen.trained:
            return
        seen.trained = True
        loader = self.loaders.get(source, lambda: None)()
        try:
            batches = len(loader)
        except TypeError:  # an iterable dataset: no end to wait for
            return
        if seen.passes == 1 and not any(other.trained for key, other in self.facts.loaders.items() if key != source):
            self.event("suspect", f"epoch_end: the first pass over the training data ({batches} batches) has not ended",
                       [f"batches in a pass: {batches}", f"the pass began after step {seen.pass_started}"])

    def on_scaler_skipped(self, optimizer: torch.optim.Optimizer, scale: float | None) -> None:
        """GradScaler.step fired no optimizer hook: it skipped the step on inf/NaN gradients."""
        if self.probes.replaying:
            return
        if optimizer not in self.optimizers:
            self.optimizers.append(optimizer)
            self.facts.optimizers = len(self.optimizers)
        if self._skips_reported < 5:
            self._skips_reported += 1
            self.event("amp_skip", f"GradScaler skipped the optimizer step (inf/NaN gradients), scale {scale}")
        self._finish_step(skipped=True)

    def optimizer_stepped_since(self) -> bool:
        """Whether an optimizer hook fired since the last call; resets the flag."""
        stepped, self._stepped = self._stepped, False
        return stepped

    def on_warning(self, category: type, message: str, filename: str, lineno: int) -> None:
        self.event("warning", f"{category.__name__}: {message} ({filename}:{lineno})")
        self.facts.note_warning(category, message, filename, lineno)

    def loop_ended(self) -> None:
        """The script ended: a loop that updates by hand has its last iteration still open."""
        if self.manual_updates and self._losses:
            self._finish_step(skipped=False)
        self.facts.observe_watched(self.watched_step.end())
        self.facts.script_ended = True
        if self.step == 0:  # a loop that never stepped has had no step to report its findings at
            self._report_findings()
        if self.step == 0 and not self.facts.backward_total:
            self._report_stepless()
        warmup = self.facts.unfinished_warmup()  # only a whole run says so
        if warmup and "warmup_unfinished" not in self.facts.reported:
            self.facts.reported.add("warmup_unfinished")
            self.event("finding", f"warmup_unfinished: {warmup}")

    def on_clip(self, total_norm: Any, max_norm: Any) -> None:
        """The script's clip_grad_norm_ returned the norm before clipping: shown as the gradient norm."""
        if self.probes.replaying or not isinstance(total_norm, torch.Tensor):
            return
        self._clipped.append(total_norm.detach())
        self._clip_at = float(max_norm)
        if self.facts.clip_site is None:
            self.facts.clip_site = user_site_text()
        if self.step and not self._backward_since_step and self.facts.clip_after_step is None:
            # no backward since the optimizer step: it already applied these gradients
            self.facts.clip_after_step = user_site_text()

    # --- steps ----------------------------------------------------------------------------

    def _finish_step(self, skipped: bool) -> None:
        self.step += 1
        now = time.perf_counter() - self.control.held_seconds  # the run's own time: pauses and probes left out
        record = PendingStep(
            step=self.step, time=time.time(), losses=self._losses, norms=self._norms,
            lrs=self._learning_rates(),
            step_seconds=None if self._last_step_end is None else now - self._last_step_end,
            batch_size=self._batch_size, epoch=self._epoch,
            cuda_allocated=torch.cuda.memory_allocated() if torch.cuda.is_initialized() else None,
            skipped=skipped, backward_calls=self._backward_calls, clipped=self._clipped, clip_at=self._clip_at,
            epoch_batch=self._position[0], epoch_batches=self._position[1], planned_steps=self._planned,
            compute_seconds=self._compute_seconds,
            norm_every=1 if self.config.break_on_nan else self.norm_sampler.every,
        )
        self.norm_sampler.step_took(record.step_seconds)
        self._clipped, self._clip_at, self._compute_seconds = [], None, None
        self.facts.observe_lr(self.step, record.lrs[0] if record.lrs else None,
                              self.optimizers[0].param_groups[0].get("initial_lr") if self.optimizers else None)
        if self._layer is not None:
            record.layer_names, record.layer_norms = self._layer
        if torch.cuda.is_initialized() and any(t.is_cuda for t in record.losses + record.norms):
            record.ready = torch.cuda.Event()
            record.ready.record()
        self._losses, self._norms, self._layer, self._backward_calls = [], [], None, 0
        self._unchecked_losses = []
        if self._step_loss_values:
            self.read_losses.append((self.step, sum(self._step_loss_values) / len(self._step_loss_values)))
            self._step_loss_values = []
        self._backward_since_step, self._loss_calls, self._loss_targets = 0, 0, []
        self.facts.step_done()
        self.facts.observe_watched(self.watched_step.end())
        self._last_step_end = now
        self._read_memory(record)
        self._outputs.clear()
        checks_took = 0.0
        if self.checks.sampled(self.step):
            if self.facts.drawn_apart is None and self.loop_uses_loader():  # once a run, some reads of one item
                self.facts.transforms_drawn_apart(self.dataset())
            started = time.perf_counter()
            self._check_weights_move(skipped)
            self._check_idle_optimizers()
            self._tag_held_graphs()
            self._report_findings()
            checks_took = time.perf_counter() - started
        self.checks.step_took(self.step, record.step_seconds, checks_took)
        record.check_every = self.checks.every if self.checks.stretched else None
        self.tracing_outputs = self.checks.sampled(self.step + 1)
        if self.client is not None:
            self.client.send_metric(record)
        self._maybe_checkpoint(record.step_seconds)
        self.control.after_step(self.step)
        self.watched_step.begin(self.step, self.observed.input_size,
                                    None if self.watched_step.done else self.loader_batch_size())

    def _check_weights_move(self, skipped: bool) -> None:
        """At the sampled steps: the model's trainable weights (one fused norm) against the last sampled step's.
        The same after optimizer steps whose gradients were not all zero, at a rate above zero, none skipped by a
        GradScaler: the optimizer updates other tensors than the model's (copies of the weights)."""
        model = self.model
        if model is None or self.manual_updates or skipped or self._skips_reported or self.facts.weights_still:
            return
        params = [p for p in model.parameters() if p.requires_grad]
        # float16 / bfloat16 weights round an update below half their spacing away: still weights say nothing
        # of which tensors the optimizer holds
        if not params or any(p.dtype in (torch.float16, torch.bfloat16) for p in params):
            return
        with torch.no_grad():
            now = torch.stack(torch._foreach_norm(params))
        previous, self._weights_seen = self._weights_seen, (self.step, now)
        if previous is None or previous[1].shape != now.shape or not torch.equal(previous[1], now):
            return
        checks = [c for c in self.facts.grad_checks if c[0] > previous[0]]
        moving = bool(checks) and all(len(c[1]) + len(c[2]) < len(params) for c in checks)
        if moving and self._rate_kept() and self._steps_only_model_or_copies(params, previous[0]):
            self.facts.weights_still = (previous[0], self.step)

    def _check_idle_optimizers(self) -> None:
        """At the sampled steps: an optimizer the script made that has never stepped while another steps, over
        parameters no stepping optimizer holds, whose gradients are renewed (backward passes reach them) while
        their values stay put (IDLE_STEPS). A finished stage's optimizer stepped once and is not one; the model
        of an earlier fold keeps the gradients of its last backward. In most runs every optimizer made also
        steps, and this costs nothing."""
        stepping = set(self.optimizers)
        idle = [o for o in list(self.created_optimizers) if id(o) not in self.facts.last_stepped]
        if not stepping or not idle or self.facts.idle_optimizer is not None:
            return
        held = {id(p) for p in optimizer_params(*stepping)}
        for optimizer in idle:
            # requires_grad is not asked: a GAN's loop switches it off for the discriminator in the generator's phase
            params = [p for p in optimizer_params(optimizer) if id(p) not in held]
            if not params or any(p.grad is None for p in params):
                continue
            with torch.no_grad():
                values = torch.stack(torch._foreach_norm([p.detach() for p in params]))
                grads = torch.stack(torch._foreach_norm([p.grad.detach() for p in params]))
            first = self._idle_seen.get(id(optimizer))
            if first is None or first[1].shape != values.shape or not torch.equal(first[1], values):
                self._idle_seen[id(optimizer)] = (self.step, values, grads)
            elif bool(grads.sum() > 0) and not torch.equal(first[2], grads) and self.step - first[0] >= IDLE_STEPS:
                kind, made = self.facts.made_sites.get(id(optimizer), (type(optimizer).__name__, "?"))
                steppers = list(dict.fromkeys(f"{name} steps at {site}" for name, site in self.facts.step_sites.values()))
                self.facts.idle_optimizer = IdleOptimizer(kind, made, [self._param_name(p, i) for i, p in enumerate(params)],
                                                          first[0], self.step, steppers)

    def _rate_kept(self) -> bool:
        """The rate is at least STILL_RATE_SHARE of its peak at the sampled steps: a schedule decayed towards
        zero (a StepLR stepped every batch) leaves the weights still by itself, the schedule check's case."""
        rate = max((lr for lr in self._learning_rates() if isinstance(lr, (int, float))), default=0.0)
        self._peak_rate = max(self._peak_rate, rate)
        return rate > 0 and rate >= STILL_RATE_SHARE * self._peak_rate and self.facts.lr_collapsed_at is None

    def _steps_only_model_or_copies(self, own: list[torch.Tensor], since: int) -> bool:
        """Every optimizer that stepped since ``since`` holds the model's trainable parameters (``own``) or tensors
        of exactly their shapes (copies): one that trains another model (a later stage, a discriminator) explains
        still weights."""
        ids, shapes = {id(p) for p in own}, sorted(tuple(p.shape) for p in own)
        stepped = self.facts.stepped_after(since)
        for optimizer in self.optimizers:
            if id(optimizer) not in stepped:
                continue
            held = optimizer_params(optimizer)
            if not all(id(p) in ids for p in held) and sorted(tuple(p.shape) for p in held) != shapes:
                return False
        return True

    def _read_memory(self, record: PendingStep) -> None:
        """The process's memory at this step boundary, when due (see MEMORY_SHARE)."""
        cheap = record.step_seconds is not None and self._memory_read_seconds <= MEMORY_SHARE * record.step_seconds
        if not cheap and self.step % max(1, self.config.memory_every) != 0:
            return
        started = time.perf_counter()
        rss, vms = process_memory()
        self._memory_read_seconds += COST_SMOOTHING * (time.perf_counter() - started - self._memory_read_seconds)
        self.facts.record_memory(self.step, rss, record.cuda_allocated, vms)

    def _maybe_checkpoint(self, step_seconds: float | None) -> None:
        """While break-on-NaN is armed, keep a recent host copy of the state, so that the NaN probes
        can replay the steps that led to a failure at other rates or with clipping. The interval
        stretches so that copying costs at most ``checkpoint_budget`` of the training time."""
        every = self.config.checkpoint_every
        if not self.config.break_on_nan or every <= 0 or self.step < self._next_checkpoint:
            return
        if self._checkpoint_numel is None:
            self._checkpoint_numel = sum(p.numel() for m in self.observed.models for p in m.parameters())
        if self._checkpoint_numel > self.config.checkpoint_max_params:
            return
        started = time.perf_counter()
        self.checkpoints.append((self.step, self.take_snapshot()))
        cost = time.perf_counter() - started
        if self._loss_calm():
            self.calm_checkpoints.append(self.checkpoints[-1])
        budget_steps = cost / (self.config.checkpoint_budget * step_seconds) if step_seconds else every
        self._next_checkpoint = self.step + min(8 * every, max(every, math.ceil(budget_steps)))

    def _wants_layers(self) -> bool:
        """Per-layer gradient norms every ``norm_stride`` steps, and on the first (an early failure has
        no other)."""
        stride = self.config.norm_stride
        return stride > 0 and (self.step == 0 or (self.step + 1) % stride == 0)

    def _learning_rates(self) -> list[Any]:
        return [group.get("lr") for opt in self.optimizers for group in opt.param_groups]

    def _param_name(self, param: torch.Tensor, index: int) -> str:
        return self._param_names.get(id(param), f"param{index}")


def made_at(sites: list[Site]) -> str:
    """Where an object was made: its line, and where a factory returned it from (``return LambdaLR(...)``
    in a helper such as get_linear_schedule_with_warmup) or a subclass's ``__init__`` made it (``super().__init__``
    in a WarmupLinearSchedule), the line that called the factory or the class."""
    if len(sites) > 1 and (sites[0].text.startswith("return") or "__init__(" in sites[0].text):
        return f"{sites[0]} (called from {sites[1]})"
    return str(sites[0])


@functools.lru_cache(maxsize=64)
def _takes_closure_second(optimizer_class: type) -> bool:
    """Whether the class's step takes a closure as its first argument after self, as torch's optimizers do."""
    try:
        parameters = list(inspect.signature(optimizer_class.step).parameters)
    except (TypeError, ValueError):
        return True
    return len(parameters) > 1 and parameters[1] == "closure"


_peek_interpreter_stack = getattr(torch._C._functorch, "peek_interpreter_stack", None)


def _in_func_transform() -> bool:
    return _peek_interpreter_stack is not None and _peek_interpreter_stack() is not None


def _shuffles(loader: Any) -> bool:
    """The loader draws its samples in a random order (``shuffle=True``, or a random sampler given)."""
    sampler = getattr(loader, "sampler", None)
    return isinstance(sampler, (torch.utils.data.RandomSampler, torch.utils.data.SubsetRandomSampler))


def _is_lightning(module: torch.nn.Module) -> bool:
    return any(cls.__name__ == "LightningModule" for cls in type(module).__mro__)


def input_paths(args: tuple, kwargs: dict, batch: Any) -> tuple[list[str], dict[str, str]] | None:
    """Where the model's tensor arguments come from in the batch (``batch[0]``, ``batch['input_ids']``),
    so that a copy can be fed any captured batch the way the loop feeds it; None when one is not in it."""
    positional = [batch_path_of(a, batch) for a in args]
    named = {k: batch_path_of(v, batch) for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    if any(not isinstance(a, torch.Tensor) for a in args) or None in positional or None in named.values():
        return None
    return positional, named


def batch_path_of(tensor: Any, batch: Any) -> str | None:
    """Where in the batch ``tensor`` comes from (the same tensor, or a view of the same storage)."""
    if not isinstance(tensor, torch.Tensor):
        return None
    storage = tensor.untyped_storage().data_ptr()
    for path, candidate in tensors_in(batch):
        if candidate is tensor or (candidate.device == tensor.device and candidate.untyped_storage().data_ptr() == storage):
            return path
    return None


def to_step(record: PendingStep) -> Step:
    """Read a pending step's tensors (on the writer thread) into a Step message."""
    if record.ready is not None:
        record.ready.synchronize()
    losses = [float(t) for t in record.losses]
    norms = values_of(record.norms)
    step = Step(
        step=record.step, time=record.time, backward_calls=record.backward_calls,
        loss=sum(losses) / record.backward_calls if losses else None,
        grad_norm=total_of(norms) if norms else None,
        lrs=[float(lr) for lr in record.lrs if lr is not None],
        step_seconds=record.step_seconds, batch_size=record.batch_size, epoch=record.epoch,
        cuda_allocated=record.cuda_allocated, skipped=record.skipped, clip_at=record.clip_at,
        norm_before_clip=total_of([float(t) for t in record.clipped]) if record.clipped else None,
        epoch_batch=record.epoch_batch, epoch_batches=record.epoch_batches, planned_steps=record.planned_steps,
        compute_seconds=record.compute_seconds, norm_every=record.norm_every, check_every=record.check_every,
    )
    if record.layer_norms is not None:
        step.layer_norms = dict(zip(record.layer_names, values_of(record.layer_norms)))
    return step


def graph_leaves(loss: torch.Tensor, limit: int = 100_000) -> list[torch.Tensor]:
    """The leaf tensors that ``loss.backward()`` accumulates gradients into (its AccumulateGrad nodes),
    in the order first reached; at most ``limit`` graph nodes are walked."""
    variables = (getattr(node, "variable", None) for node in holders.graph_nodes(loss.grad_fn, limit))
    return [variable for variable in variables if isinstance(variable, torch.Tensor)]


def _outside_forward(frames: list[Any]) -> list[Any]:
    """The failing stack's frames (outermost first) down to the first module's ``forward``: the locals of a forward
    and of what it calls are the step's working memory (a decoder's list of per-step attention maps, returned
    at its end), which no step keeps for the next."""
    for index, frame in enumerate(frames):
        if frame.f_code.co_name == "forward" and isinstance(frame_locals(frame).get("self"), torch.nn.Module):
            return frames[:index]
    return frames
