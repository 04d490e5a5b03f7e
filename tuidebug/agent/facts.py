"""What the hooks observe of the training loop, for the checks that name why a run does not learn,
computes a silently wrong loss, or keeps growing in memory.

Everything here runs on the training thread, so it is sampled: a check that needs a look at
tensors (a host sync on a GPU) is made on the sampled steps only (``check_schedule``). What is kept is
small: a few numbers, names and source lines per kind.
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import re
import sys
import statistics
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tuidebug.agent.evaluation_classes import EvaluationClasses, Renumbered
from tuidebug.agent.gradients import blocks_host, stacked_norms
from tuidebug.agent.host_reads import HostReads
from tuidebug.agent.memory import process_memory, release_free_heap
from tuidebug.agent.resets import OptimizerResets
from tuidebug.agent.sample_transforms import separate_random_transforms
from tuidebug.probe_api import optimizer_params
from tuidebug.probes.holders import SEARCH_NODES, graph_nodes
from tuidebug.probes.shape import reordered
from tuidebug.sites import Site, frame_locals, is_user_file, user_site

CLASS_LOSSES = ("cross_entropy", "nll_loss")
# The losses whose target is a probability: binary_cross_entropy refuses one outside [0, 1], the logits form
# takes it and its loss falls without bound (8-bit masks of 0/255 are the usual way there).
PROBABILITY_TARGETS = ("binary_cross_entropy", "binary_cross_entropy_with_logits")
LOG_ROUNDING = 1e-3  # a log-probability computed as log(p + eps) reaches eps above 0 at p = 1, no more
# Findings need repeated evidence: STALE_CHECKS first-backward checks in a row with the gradients
# already set (or STALE_CHECKS steps whose gradients a zero_grad after backward wiped); the graphs of
# LEAKED_STEPS different earlier steps alive at once; NO_STEP_BACKWARDS backward passes with no step. One sample could be a pattern the loop means (accumulation, a graph
# kept for one more step); three cannot.
STALE_CHECKS = 3
# A schedule collapses the rate when it falls below LR_COLLAPSE of its start; stepped every batch, it
# does so "early" when that happens within the first epoch (or, without a DataLoader, EARLY_COLLAPSE steps).
LR_COLLAPSE = 1e-3
ROUNDING = 1 + 1e-9  # three factor-0.1 decays are LR_COLLAPSE, a hair above it in binary floating point
EARLY_COLLAPSE = 1000
# However the rate is set (a scheduler, or by hand in the loop), one that fell below LR_COLLAPSE of its
# start and has stayed there for as many steps as it took to get there (and COLLAPSED_STEPS at least)
# trains on at nothing: a schedule that anneals to ~0 at the end of its run is not caught (it ends
# there), a decay applied every batch instead of every epoch is. A rate of exactly 0 is caught once it
# has stayed there COLLAPSED_STEPS steps, however late it came: an annealing schedule touches 0 at its
# last step only, a multiplier of 0 (StepLR(gamma=0)) keeps it there while the run trains on.
COLLAPSED_STEPS = 20
# A run that ends by itself with its rate never having fallen, below the rate the optimizer was given (a
# scheduler's base) and at WARMUP_SHORT of it or less on average over its steps, spent all its steps warming up:
# the warm-up is longer than the run, and the steps moved the weights a tenth or less as far as configured (a
# warm-up stepped once an epoch holds each of its rates for a whole epoch, from 0 for the first). A run that
# diagnose's window cuts short is not judged (it goes on warming up), nor one of fewer than WARMUP_MIN_STEPS
# steps (a smoke test).
WARMUP_SHORT = 0.1
WARMUP_MIN_STEPS = 20
PER_EPOCH = ("StepLR", "MultiStepLR", "ExponentialLR")
# A layer with weights built inside forward at MADE_IN_FORWARD_STEPS different steps is built at every
# call (a lazily built layer is built once, at the first forward): two are enough, as nothing but a bug
# makes a trainable layer per call. At most MADE_IN_FORWARD_SEEN creations are looked at (each reads the
# stack for its line): a loop that builds parameterless layers (nn.Softmax()) at every call pays nothing after.
MADE_IN_FORWARD_STEPS = 2
MADE_IN_FORWARD_SEEN = 64
LEAKED_STEPS = 3
# ... and at two sampled checks in a row, the oldest of the first still alive at the second with newer steps
# joined: graphs that accumulate. Variables that each hold the latest graph of their kind are freed when
# reassigned: in a GAN whose generator steps once per 25 critic steps, its loss's graph lives through all
# 25 and is replaced at the next generator step (bounded, not a leak).
# Graphs can also pile up within one step (an evaluation loop run with gradients on, between two
# optimizer steps): more graphs of the step in progress alive than twice what a step makes (and more
# than LEAKED_GRAPHS) is a leak.
LEAKED_GRAPHS = 8
PILE_CHECK = 8
# Memory grows when, over the second half of the readings (one every few steps, at least
# GROWTH_SAMPLES of them), it rises by GROWTH_BYTES a step and GROWTH_TOTAL in all, in at least
# GROWTH_RISING of the intervals: a cache that warms up and then stays flat does not; RSS noise of a
# few MiB does not.
GROWTH_SAMPLES = 8
GROWTH_BYTES = 256 * 1024
GROWTH_TOTAL = 32 * 2**20
GROWTH_RISING = 0.75
GROWTH_POINTS = 128  # readings looked at, evenly spaced: a steady rise shows as well in 128 as in 1,024
NO_STEP_BACKWARDS = 5
# An optimizer the script made that never steps while another does, over parameters that no stepping
# optimizer holds, whose gradients are not zero and whose values did not move in IDLE_STEPS steps (two
# sampled steps at least that far apart): a step of the wrong optimizer (``g_optimizer.step()`` where
# ``d_optimizer.step()`` was meant). A stage that starts later (a discriminator made at the start and used
# after a pre-training phase) gets no gradients meanwhile and is not caught.
IDLE_STEPS = 50
# Losses computed with a graph, by a model in training mode, with an optimizer made and yet no backward
# pass and no step: a loop that never updates (its update lives in a hook nobody calls). An evaluation
# runs in eval mode or under no_grad and is not counted. Once the script has ended, 20 (four times
# NO_STEP_BACKWARDS) is a loop. While it runs, a loop may gather micro-batch losses in a list for one
# backward of their sum (32 is a usual accumulation): 200 such graphs alive at once is not that.
LOSSES_WITHOUT_BACKWARD = 20
LIVE_LOSSES_WITHOUT_BACKWARD = 200
# A classification loss (cross_entropy / nll_loss over C classes) that sits at ln(C), the loss of equal
# probabilities for every class, over the last fifth of the run (at least CHANCE_STEPS steps in all): the
# median of those steps within CHANCE_SPREAD of ln(C) and each step within CHANCE_BAND, having started
# above CHANCE_START times it. The model came down from a bad start to outputs that no longer depend on the
# input, and stays there. Each step is let off to CHANCE_BAND because near-uniform outputs still give a batch
# of 32 a loss a little off ln(C) with its mix of classes (a Lightning encoder left in eval mode: 1.371 to
# 1.405 around ln 4 = 1.386, median 1.385). A healthy run passes ln(C) on its way down (its median ends
# below the band), and one that starts at ln(C) (a small init) is left to the trend rule: neither is caught.
# A class loss told to ignore a target index (ignore_index=k, k >= 0) whose targets hold k at positions
# where the input is a real token (not the embedding's padding_idx) for at least IGNORED_SHARE of the real
# tokens (and MIN_IGNORED of them): the padding and a class share the index, and that class is never learned
# (a tagger's first tag numbered 0 like the padding). A few real tokens with the index are a deliberate
# "no label" (a subword continuation), hence the share.
IGNORED_SHARE = 0.05
MIN_IGNORED = 10
CHANCE_STEPS = 50
CHANCE_SPREAD = 0.01
CHANCE_BAND = 0.03
CHANCE_START = 1.5
# A run learns when its loss (the median of its last quarter against its first) falls below LEARNS of its start:
# the probes' own bar (learning.LEARNS). A module beside the model that no optimizer holds is a finding only in a
# run of PART_STEPS steps or more that does not (a fixed backbone left out of the optimizer on purpose goes with a
# loss that falls below it); an evaluation's renumbered labels are judged only once the run does, over
# EVALUATION_STEPS or more (before, a model may match its labels to anything).
LEARNS = 0.8
PART_STEPS = 40
EVALUATION_STEPS = 8
MODE_LAYERS = (torch.nn.Dropout, torch.nn.modules.batchnorm._BatchNorm)
# A container of the model grows when, over its last CONTAINER_PASSES sightings (one at the start of each
# pass over a DataLoader: training and evaluation epochs, Lightning's sanity check included), it never
# shrank, rose at least CONTAINER_PASSES - 2 times and holds CONTAINER_TENSORS tensors: a buffer that a
# pass fills and the next empties (outputs collected for the epoch's end) is empty or the same size at
# each start; a bounded deque is not looked at; a metric state never reset rises at every evaluation.
CONTAINER_PASSES = 4
CONTAINER_TENSORS = 4
# Graph tags kept per step: a healthy loop frees step t's graph by step t + 2 (see NOTES.md), so a
# tag older than that still alive means something holds the graph.
TAGGED_STEPS = 400
TAGGED_LAYERS = 4000  # layer outputs are tagged on sampled steps only
GRAPH_AGE = 2
HELD = "held tensor"  # the tag of a graph the script's objects hold (``tag_held``), not a loss or model output
MEMORY_SAMPLES = 2048
# A model call on LARGE_CALL times the input elements of its usual call (the median of the last calls,
# once USUAL_CALLS were seen) without a batch that much larger is kept: when the run runs out of memory
# inside it, an axis the size of the data set is the cause, not the batch (PETS' validation over every
# point at once). Training calls do not vary tenfold from step to step; a tenfold larger batch (an
# evaluation batch size) stays the batch check's. The OOM check reads it only for the call that failed.
LARGE_CALL = 10
USUAL_CALLS = 8
# numpy reports a division by zero, an invalid operation (0/0, log of a negative) or an overflow as a
# RuntimeWarning "... encountered in <ufunc>" attributed to the caller's line: preprocessing that makes
# the NaN/Inf a batch carries later. The first WARNINGS_KEPT distinct lines of each kind are kept.
WARNINGS_KEPT = 8
NUMERIC_WARNING = "encountered in"
# torch warns when a tensor that requires grad is copied into a new tensor (torch.tensor(t), or a list of
# such tensors made into one): the copy has no graph. On a line that builds a tensor that way, it is a cut
# in the graph; float(loss) for a log warns too, and is no cut.
GRAPH_CUT_WARNINGS = ("To copy construct from a tensor", "Converting a tensor with requires_grad=True to a scalar")
# torch.utils.checkpoint in its reentrant form warns when none of its inputs requires grad (a frozen stem
# before LoRA blocks): its outputs then carry no graph to the weights inside it. torch attributes the warning
# to its own frame, so the user's line is taken from the stack.
CHECKPOINT_WARNING = "None of the inputs have requires_grad=True"
# The model called in training mode under no_grad with its output given to a loss, this many times: an
# evaluation loop (a validation set's batches), not one call of a monitor or a teacher.
TRAIN_MODE_EVALUATIONS = 3
# torch warns, at the user's line, when a std or var reduces over one element (degrees of freedom <= 0): its
# result is NaN. Where no replay of the failing step can run, that warning names the op that made the NaN.
DOMAIN_WARNING = "degrees of freedom is <= 0"
REBUILDS = re.compile(r"\b(torch\.(tensor|Tensor|FloatTensor|as_tensor|DoubleTensor)|np\.(array|asarray))\(")


def _classes_read_from_positions(input: torch.Tensor, target: torch.Tensor, module: str | None) -> bool:
    """(N, L, ..., C) scores made with their classes last (a Linear's output features, or a softmax over the
    last dim) given to cross_entropy or nll_loss with (N, L, ...) targets, whose sizes let the loss read dim 1
    as the classes without raising: L == C (a tagger with as many tags as positions)."""
    shape = tuple(input.shape)
    if input.dim() < 3 or target.is_floating_point() or tuple(target.shape) != shape[:-1] or \
            tuple(target.shape) != (shape[0], *shape[2:]):
        return False
    node = input.grad_fn
    dim = getattr(node, "_saved_dim", None)
    dim = dim - 2**64 if isinstance(dim, int) and dim >= 2**63 else dim  # autograd keeps -1 as an unsigned int
    softmax_last = type(node).__name__ in ("LogSoftmaxBackward0", "SoftmaxBackward0") and dim in (-1, input.dim() - 1)
    return softmax_last or (module is not None and module.endswith("(Linear)"))


def value_ranges(input: torch.Tensor, target: torch.Tensor | None) -> list[torch.Tensor]:
    """A loss's input range (of its finite values), whether its rows sum to 1 (probabilities), its
    target's range and whether it had one: six 0-dim tensors, computed where the input lives and read
    later with the step's other values (``LossCall.fill_ranges``)."""
    nothing = input.new_full((), math.nan, dtype=torch.float32)
    low = high = rows_sum_to_one = nothing
    if input.numel() and input.is_floating_point():
        finite = torch.isfinite(input)
        low = torch.where(finite, input, math.inf).min().float()
        high = torch.where(finite, input, -math.inf).max().float()
        if input.dim() >= 2:  # as torch.allclose(sums, 1, atol=1e-3) would say, without a read
            rows_sum_to_one = (input.sum(dim=1, dtype=torch.float32) - 1).abs().le(1e-3 + 1e-5).all().float()
    has_target = target is not None and target.numel() > 0
    target_low = target.detach().min().float() if has_target else nothing
    target_high = target.detach().max().float() if has_target else nothing
    return [low, high, rows_sum_to_one, target_low, target_high, nothing.new_full((), float(has_target))]


@dataclass
class MadeInForward:
    """Layers of one kind built at one line while a forward ran, at these steps."""

    kind: str
    site: Site | None
    steps: set[int] = field(default_factory=set)

    def text(self) -> str:
        where = f" at {self.site}" if self.site is not None else ""
        return (f"`{self.kind}` is built inside forward{where} at every step ({len(self.steps)} steps seen): its "
                "weights are new random ones at each call, not a part of the model, and no optimizer holds them")


@dataclass
class TrainModeEvaluation:
    """The model called under torch.no_grad() in training mode, with batch norm in it, its output given to a
    loss: an evaluation whose batch norm normalises each batch with that batch's own statistics (and moves
    the running ones). Kept: the latest such call, to replay in both modes."""

    step: int
    inputs: tuple  # (args, kwargs) of the model call, detached
    key: Any  # the item of the output the loss was given (None: the output itself)
    loss: tuple  # (function, target, kwargs): the loss call as the script made it
    loss_site: Site | None  # the user's line of the loss call
    mode_site: Site | None  # the user's line of the model's last .train() before it


@dataclass
class OutsidePart:
    """A module the training forward calls on its own (beside the model), whose weights all get gradients and
    none of which an optimizer holds (``Facts.check_outside_parts``)."""

    kind: str  # its class
    names: list[str]  # its trainable parameters
    step: int  # when it was found
    first: torch.Tensor  # the norms of its weights then
    module: weakref.ref

    def unchanged(self) -> bool:
        module = self.module()
        if module is None:
            return False
        params = [p for p in module.parameters() if p.requires_grad]
        with torch.no_grad():
            return len(params) == len(self.first) and torch.equal(torch.stack(torch._foreach_norm(params)), self.first)

    def text(self) -> str:
        names = ", ".join(self.names[:4]) + (f" and {len(self.names) - 4} more" if len(self.names) > 4 else "")
        return (f"{self.kind} ({names}) gets a gradient at every backward, but no optimizer holds any of its "
                f"{len(self.names)} trainable tensor(s): its weights have not changed since step {self.step}")


@dataclass
class IdleOptimizer:
    """An optimizer that never stepped over parameters with gradients that never moved (see IDLE_STEPS)."""

    kind: str  # its class
    made: str  # where the script created it
    names: list[str]  # its parameters that no stepping optimizer holds
    since: int  # the sampled steps between which they had gradients and did not move
    until: int
    stepping: list[str] = field(default_factory=list)  # "<class> steps at <line>" of the optimizers that do step

    def text(self) -> str:
        stepping = f" ({'; '.join(self.stepping)})" if self.stepping else ""
        return (f"the {self.kind} created at {self.made} never steps: its {len(self.names)} parameter tensor(s) "
                f"({', '.join(self.names[:3])}) get non-zero gradients and did not change from step {self.since} to "
                f"step {self.until}, while another optimizer steps{stepping}")


@dataclass
class ReorderedView:
    """A model input that is a view of a tensor with the same sizes in another order (``facts.observe_first_inputs``)."""

    index: int  # which tensor of the call's inputs
    shape: tuple[int, ...]
    base: tuple[int, ...]
    site: Site | None  # the model call


@dataclass
class IgnoredClass:
    """A class loss's ignore_index met at real tokens: (ignored, real) counts, read later."""

    site: str
    function: str
    index: int
    padding_idx: int
    ignored: int = 0
    real: int = 0

    def fill(self, numbers: list[float]) -> None:
        """(ignored, real) for each token input and way the sequences may run: the one with the fewest ignored."""
        pairs = [(int(numbers[i]), int(numbers[i + 1])) for i in range(0, len(numbers), 2)]
        self.ignored, self.real = min(pairs)

    def text(self) -> str:
        return (f"{self.function} at {self.site} ignores target {self.index} (ignore_index={self.index}), yet "
                f"{self.ignored} of the {self.real} real tokens inside the sequences (the input there is not the "
                f"padding_idx {self.padding_idx}) have target {self.index}: a class shares the padding's index and is never learned")


@dataclass
class LossCall:
    """One loss function's call, as first seen (and refreshed at sampled steps)."""

    function: str
    site: str
    input_shape: list[int]
    target_shape: list[int] | None
    input_dtype: str
    target_dtype: str | None
    input_producer: str | None  # the autograd node that made the input: SoftmaxBackward0, ...
    input_module: str | None  # the module whose output the input is (``net.3 (Softmax)``)
    loss_module: str | None = None  # the torch.nn loss whose forward made the call (``CrossEntropyLoss``)
    input_min: float | None = None
    input_max: float | None = None
    rows_sum_to_one: bool = False
    target_min: float | None = None
    target_max: float | None = None
    classes: int | None = None
    classes_last: bool = False  # (N, L, C) scores with L == C given as they are: the loss reads L as the classes
    calls: int = 0
    grad_enabled: bool = True  # called with gradients on (an evaluation's loss under no_grad is not)

    def fill_ranges(self, numbers: list[float]) -> None:
        """The values ``value_ranges`` computed, once read (NaN where there was nothing to compute)."""
        low, high, rows_sum_to_one, target_low, target_high, has_target = numbers
        if math.isfinite(low):
            self.input_min, self.input_max = low, high
            self.rows_sum_to_one = low >= 0 and rows_sum_to_one == 1
        if has_target == 1:
            self.target_min, self.target_max = target_low, target_high

    @property
    def gets_probabilities(self) -> bool:
        """A class loss given probabilities: a softmax made its input, or its rows are non-negative and sum to 1
        (a mixture of distributions, a pointer-generator's output). cross_entropy expects logits and nll_loss
        log-probabilities, which are never all non-negative."""
        return self.function in ("cross_entropy", "nll_loss") and (
            (self.input_producer or "").startswith("Softmax") or self.rows_sum_to_one)

    @property
    def positive_log_probabilities(self) -> bool:
        """kl_div given values above 0 where it expects log-probabilities (never above 0): probabilities (a
        softmax in place of log_softmax) or raw scores. LOG_ROUNDING allows a log(p + eps) at p = 1."""
        return self.function == "kl_div" and self.input_max is not None and self.input_max > LOG_ROUNDING

    @functools.cached_property
    def broadcasts(self) -> bool:
        """Input and target of different shapes that broadcast to a larger one ((N,1) against (N,))."""
        if self.target_shape is None or self.input_shape == self.target_shape:
            return False
        try:
            shape = list(torch.broadcast_shapes(torch.Size(self.input_shape), torch.Size(self.target_shape)))
        except RuntimeError:
            return False
        return shape != self.input_shape or shape != self.target_shape


@dataclass
class SchedulerCalls:
    kind: str
    site: str
    calls: int = 0
    steps_at_first_call: int = 0
    scheduler: Any = None  # a weak reference

    def live(self) -> Any:
        """The scheduler, while it is alive (else None)."""
        return self.scheduler() if self.scheduler is not None else None

    def gamma(self) -> float | None:
        """The schedule's multiplier (StepLR, MultiStepLR, ExponentialLR), while it is alive."""
        scheduler = self.live()
        gamma = getattr(scheduler, "gamma", None)
        return float(gamma) if isinstance(gamma, (int, float)) else None

    def collapse_step(self) -> int | None:
        """The step count at which this schedule puts the rate below LR_COLLAPSE of its start (from
        its own settings: StepLR, MultiStepLR, ExponentialLR), or None when it never does."""
        scheduler = self.live()
        gamma = getattr(scheduler, "gamma", None)
        if scheduler is None or not gamma or not 0 < gamma < 1:
            return None
        decays = math.ceil(math.log(LR_COLLAPSE) / math.log(gamma))
        if self.kind == "StepLR":
            return decays * int(scheduler.step_size)
        if self.kind == "ExponentialLR":
            return decays
        if self.kind == "MultiStepLR":
            milestones = sorted(scheduler.milestones.elements())
            return milestones[decays - 1] if len(milestones) >= decays else None
        return None


@dataclass
class GraphTag:
    """Lives in an autograd node's metadata: freed with the graph that holds it."""

    step: int
    what: str
    evaluating: bool = False  # a model output made in eval mode (with gradients on)
    chained: bool = False  # a model output from inputs that carried a graph (a head run on the body's output): no new pass


@dataclass
class LoaderSeen:
    """A DataLoader the script iterated: where it was made and iterated, whether it shuffles, and
    whether its batches fed an optimizer step (a shuffled loader iterated for anything else, such as
    extracting features, yields its samples in an order nothing else shares)."""

    created: str | None
    iterated: str | None
    shuffled: bool
    trained: bool = False
    passes: int = 0
    pass_started: int = 0  # the step count when its latest pass began


# The output layer (the module that makes the loss's input, else the last module with weights the
# training forward ran) is compared with its first reading after this many steps: by then every
# optimizer of the loop has stepped many times (a GAN's discriminator, trained every other step; a
# head unfrozen after a warm-up epoch of a few dozen steps is the exception it would still catch early:
# its weights do not move before then, and the finding's check then rules the freeze intended when the
# run learns).
HEAD_STEPS = 50
HEAD_MAX_ELEMENTS = 4_000_000  # a copy of a larger head (an LM's vocabulary projection) costs too much


@dataclass
class HeadWatch:
    """The output layer's parameters as first seen, and one other trainable parameter, to compare later."""

    module: str  # ``fc (Linear)``
    step: int
    params: dict[str, tuple[torch.Tensor, torch.Tensor]]  # name -> (the live parameter, its first value)
    other: str  # the name of a parameter outside the head that trains
    other_param: tuple[torch.Tensor, torch.Tensor]

    @property
    def path(self) -> str:
        """The module's path in the model: ``fc`` of ``fc (Linear)``."""
        return self.module.split(" ", 1)[0]

    def untouched(self) -> bool:
        """The head's weights are exactly as first seen while the other parameter moved."""
        live, first = self.other_param
        return not torch.equal(live.detach(), first) and all(
            torch.equal(live.detach(), first) for live, first in self.params.values())


def own_parameters(model: torch.nn.Module, path: str) -> dict[str, torch.Tensor]:
    """The parameters the module at ``path`` (``layers.3.node_mlp.2``) holds itself, by their names in ``model``
    (not its children's)."""
    return {name: p for name, p in model.named_parameters()
            if name.startswith(path + ".") and "." not in name[len(path) + 1:]}


def watch_head(module_name: str, model: torch.nn.Module, step: int,
               optimizers: list[torch.optim.Optimizer]) -> HeadWatch | None:
    """A HeadWatch of ``module_name`` (``fc (Linear)``), if it has weights, is small enough to copy, and the
    model has another parameter an optimizer holds."""
    params = own_parameters(model, module_name.split(" ", 1)[0])
    if not params or sum(p.numel() for p in params.values()) > HEAD_MAX_ELEMENTS:
        return None
    held = {id(p) for p in optimizer_params(*optimizers)}
    other = next(((name, p) for name, p in model.named_parameters()
                  if name not in params and p.requires_grad and id(p) in held), None)
    if other is None:
        return None
    return HeadWatch(module_name, step, {n: (p, p.detach().clone()) for n, p in params.items()},
                     other[0], (other[1], other[1].detach().clone()))


@dataclass
class Facts:
    loss_calls: dict[int, LossCall] = field(default_factory=dict)  # by call order within a step
    reordered_view: ReorderedView | None = None
    pairing: Any = None  # ``shape.Pairing``: an op of a hand-written loss that paired (N,) with (N, 1)
    relabel: Any = None  # ``shape.Relabel``: a view that made the batch the first dim without moving the data
    batch_as_sequence: Any = None  # ``shape.BatchAsSequence``: a batch_first=False layer given the batch first
    singleton_softmax: Any = None  # ``shape.SingletonSoftmax``: a softmax over a dim of size 1
    shifted_targets: Any = None  # ``shape.ShiftedTargets``: a class loss's targets, the token inputs two positions ahead
    drawn_apart: list[tuple[str, str, Site]] | None = None  # random transforms of a sample's parts in separate calls
    ignored_class: IgnoredClass | None = None  # a class loss's ignore_index met at real tokens (see IGNORED_SHARE)
    stale_grads: list[tuple[int, bool]] = field(default_factory=list)  # (step, grads non-zero at its first backward)
    zero_grad_steps: collections.deque = field(default_factory=lambda: collections.deque(maxlen=64))  # a zero_grad ran
    resets: OptimizerResets | None = None  # with several optimizers, each one's gradients followed between its steps
    backward_without_graph: str | None = None  # where a loss that did not require grad went backward
    graphless_backward_grad_off: bool = False  # the latest backward was of a loss without a graph, gradients off
    training_backward_stack: list[tuple[str, int]] | None = None  # the first backward with a graph: user lines, outermost first
    losses_without_backward: int = 0  # training losses with a graph while no backward and no step has run
    script_ended: bool = False
    unused_loss_sites: list[str] = field(default_factory=list)  # the first such loss's line and its callers
    wiped_grads: list[tuple[int, str, str]] = field(default_factory=list)  # (step, zero_grad site, step site)
    grad_checks: list[tuple[int, list[str], list[str]]] = field(default_factory=list)  # (step, no grad, zero grad)
    not_in_optimizer: list[str] = field(default_factory=list)
    optimizer_foreign: int = 0  # parameters an optimizer holds that the model does not use
    unregistered: list[str] = field(default_factory=list)
    made_in_forward: dict[str, MadeInForward] = field(default_factory=dict)  # creation site -> the layers made there
    outside_parts: list[OutsidePart] = field(default_factory=list)
    frozen: list[str] = field(default_factory=list)
    mode_checks: list[tuple[int, bool]] = field(default_factory=list)  # (step, model.training)
    eval_parts: list[tuple[int, list[tuple[str, int]]]] = field(default_factory=list)  # (step, [(name, id)])
    has_mode_layers: bool = False
    train_sites: dict[int, Site] = field(default_factory=dict)  # id(module) -> the user's line of its last .train()
    train_mode_evaluations: int = 0  # calls of the model in training mode under no_grad whose output went to a loss
    train_mode_evaluation: TrainModeEvaluation | None = None  # the latest
    evaluation_classes: EvaluationClasses = field(default_factory=EvaluationClasses)
    renumbered: Renumbered | None = None  # an evaluation whose labels follow another numbering than the training's
    schedulers: dict[int, SchedulerCalls] = field(default_factory=dict)
    manual_updates: int = 0
    one_hot: dict[str, set[int]] = field(default_factory=dict)  # site -> widths, for calls without num_classes
    memory: collections.deque = field(default_factory=lambda: collections.deque(maxlen=MEMORY_SAMPLES))
    first_lr: float | None = None
    last_lr: float | None = None  # the rate at the latest step
    lr_collapsed_at: int | None = None  # the step since which the rate is below LR_COLLAPSE of its start
    lr_base: float | None = None  # the rate the optimizer was given, under a scheduler (its initial_lr)
    lr_steps: int = 0
    lr_sum: float = 0.0  # the rates of the steps, summed: their mean
    lr_fell: bool = False  # the rate fell at some step: not a warm-up throughout
    tags: collections.deque = field(default_factory=lambda: collections.deque(maxlen=TAGGED_STEPS))
    old_graph_steps: list[int] = field(default_factory=list)  # the earlier steps whose graphs were alive at the last check
    layer_tags: collections.deque = field(default_factory=lambda: collections.deque(maxlen=TAGGED_LAYERS))
    backward_total: int = 0
    calls_since_backward: int = 0  # the model's calls since the latest backward
    calls_per_backward: int = 0  # the most calls a backward followed (a GAN's D(real), D(G(z)))
    carried_input: bool = False  # the model's latest call got an input that carries an autograd graph
    steps: int = 0
    tagged: int = 0
    tags_this_step: int = 0
    tags_per_step: int = 0
    outputs_this_step: int = 0
    outputs_per_step: int = 0  # model outputs a step makes (the most seen)
    backward_site: str | None = None
    clip_after_step: str | None = None  # a clip_grad_norm_ that ran after the step that used its gradients
    clip_site: str | None = None  # the user's line of the first clip_grad_norm_ call
    weights_still: tuple[int, int] | None = None  # (from, to): sampled steps between which no weight moved
    step_sites: dict[int, tuple[str, str]] = field(default_factory=dict)  # id(optimizer) -> (its class, its step's line)
    last_stepped: dict[int, int] = field(default_factory=dict)  # id(optimizer) -> the last step it stepped at
    model_site: Site | None = None  # where the loop calls the model (its first call)
    optimizers: int = 0
    optimizer_sites: list[tuple[str, str]] = field(default_factory=list)  # (type, where it was created)
    made_sites: dict[int, tuple[str, str]] = field(default_factory=dict)  # id(optimizer) -> (type, where it was created)
    idle_optimizer: IdleOptimizer | None = None
    scheduler_sites: list[tuple[str, str]] = field(default_factory=list)  # (type, where it was created)
    half_site: str | None = None  # where model.half() (or .to(torch.float16)) was called
    # id(module) -> where .eval() / .train(False) was called, and the loop's line that called the function doing it
    eval_sites: dict[int, tuple[Site, Site | None]] = field(default_factory=dict)
    eval_at_training: tuple[Site, Site | None] | None = None  # the model's last .eval() before a step in eval mode
    target_path: str | None = None  # which tensor of the batch the loss takes as its target (``batch[1]``)
    input_paths: Any = None  # where the model's arguments come from in the batch (``core.input_paths``)
    trainable: int = 0
    epoch_length: int | None = None  # batches per epoch of the DataLoader that feeds the loop
    heap_refill: int = 0  # resident memory before the C heap was trimmed: a rise back up to it is no growth
    held_chained: bool = False  # a held tensor's graph reached the root of one held at an earlier step
    leak_holders: list = field(default_factory=list)  # ``holders.Holding`` found while the run was live
    leak_step: int | None = None
    leak_spread: Any = None  # ``holders.Spread`` from a census while the run was live, when no holder was found
    gathered: list = field(default_factory=list)  # ``holders.piled`` in the frames of an out-of-memory error
    unrolled_weights: tuple | None = None  # ``holders.weights_with_graph`` in those frames: fast weights
    held_at_oom: list = field(default_factory=list)  # ``holders.find`` in those frames: an evaluation's list
    container_counts: dict = field(default_factory=dict)  # path -> (owner class, tensors held at each pass)
    growing_container: str | None = None
    call_sizes: collections.deque = field(default_factory=lambda: collections.deque(maxlen=64))  # (elements, batch)
    usual_call: tuple[int, int] | None = None  # the median of call_sizes, refreshed every USUAL_CALLS calls
    calls_seen: int = 0
    large_call: tuple | None = None  # (elements, usual, shapes, site) of the latest call, if far above
    address_space: int | None = None  # the process's address space at the latest step boundary (or first forward)
    source_files: set[str] = field(default_factory=set)  # the user's files the sites above are in
    loaders: dict[int, LoaderSeen] = field(default_factory=dict)  # id(DataLoader) -> what was seen of it
    numeric_warnings: list[tuple[Site, str]] = field(default_factory=list)  # numpy's, at the user's lines
    graph_cuts: list[tuple[Site, str]] = field(default_factory=list)  # torch's, where a tensor is rebuilt
    domain_warnings: list[tuple[Site, str]] = field(default_factory=list)  # torch's, a std of one element
    checkpoint_cuts: list[tuple[Site, str]] = field(default_factory=list)  # a reentrant checkpoint given no grad
    copied_parameters: list[tuple[str, str]] = field(default_factory=list)  # see ``copied_parameters``
    detached_return: tuple[str, Site] | None = None  # (module, line) whose forward returns .data / .detach()
    reported: set[str] = field(default_factory=set)
    reads: HostReads = field(default_factory=HostReads)  # the values the checks below wait for, read once a step
    head: HeadWatch | None = None  # the output layer's weights as first seen, to tell whether they ever move
    missing_first: dict[str, torch.Tensor] = field(default_factory=dict)  # parameters in no optimizer, as first seen

    # --- findings: what is wrong beyond doubt, reported once as it is seen --------------------

    def new_findings(self, step: int, losses: Callable[[], list[float | None]] = list) -> list[tuple[str, str, list[str]]]:
        """(code, text, details) of findings not reported yet; see ``tuidebug.triage`` for what each opens.
        ``losses`` gives the recent steps' losses, oldest first (read only by a check that needs them)."""
        self.steps = step
        found = []
        for code, check in (("loss_broadcast", self._broadcast), ("one_hot_width", self._one_hot),
                            ("relabelled_view", self._reordered), ("target_range", self._target_range),
                            ("classes_last", self._classes_last),
                            ("batch_as_sequence", lambda: self.batch_as_sequence and self.batch_as_sequence.text()),
                            ("softmax_over_one", lambda: self.singleton_softmax and self.singleton_softmax.text()),
                            ("transforms_drawn_apart", self.drawn_apart_text),
                            ("labels_shifted", lambda: self.shifted_targets and self.shifted_targets.text()),
                            ("ignored_class", self._ignored_class),
                            ("stale_grads", self.never_reset), ("zero_grad_wipes", self._wiped),
                            ("not_in_optimizer", self._not_in_optimizer),
                            ("head_untrained", lambda: self._head_untrained(step)),
                            ("unregistered_modules", self._unregistered),
                            ("layers_in_forward", lambda: next((made.text() for made in self.layers_in_forward()), None)),
                            ("part_not_in_optimizer", lambda: (part := self.part_outside(losses())) and part.text()),
                            ("no_grad_params", self._no_grad),
                            ("weights_unchanged", self._weights_unchanged),
                            ("idle_optimizer", lambda: self.idle_optimizer and self.idle_optimizer.text()),
                            ("graph_cut", self._graph_cut),
                            ("eval_mode", self._eval_mode), ("loss_input", self._loss_input),
                            ("evaluated_in_train_mode", self.evaluated_in_train_mode),
                            ("evaluation_renumbered", lambda: self.renumbered_evaluation(step, losses())),
                            ("no_optimizer_step", self._no_step), ("loss_without_backward", self._no_backward),
                            ("lr_schedule", lambda: self._schedule(step)),
                            ("lr_collapsed", lambda: self._collapsed_rate(step)),
                            ("loss_at_chance", lambda: self._at_chance(losses)),
                            ("graphs_kept", lambda: self._graphs(step)), ("memory_growth", self._growth),
                            ("container_growth", self._container_growth)):
            if code in self.reported:
                continue
            try:
                result = check()
            except Exception as exc:  # a check's bug must not take the user's step down with it
                self.reported.add(code)
                found.append(("check_failed", f"the {code} check failed: {type(exc).__name__}: {exc}", []))
                continue
            if result:
                self.reported.add(code)
                text, details = result if isinstance(result, tuple) else (result, [])
                found.append((code, text, details))
        return found

    def _broadcast(self) -> str | None:
        call = next((c for c in self.loss_calls.values() if c.broadcasts and c.function not in CLASS_LOSSES), None)
        if call is None and self.pairing is not None:
            return self.pairing.text()
        if call is None:
            return None
        shape = list(torch.broadcast_shapes(torch.Size(call.input_shape), torch.Size(call.target_shape)))
        return (f"{call.function} at {call.site} compares input {tuple(call.input_shape)} with target "
                f"{tuple(call.target_shape)}: they broadcast to {tuple(shape)}, every output against every target")

    def _reordered(self) -> str | None:
        view = self.reordered_view
        if view is None:
            return self.relabel.text() if self.relabel is not None else None
        return (f"the model's input {view.index} at {view.site} is a view {view.shape} of a {view.base} tensor: "
                "the same sizes in another order, with the data left in the source's order")

    def probabilities_outside(self) -> LossCall | None:
        """A loss whose target is a probability (PROBABILITY_TARGETS), given targets outside [0, 1]."""
        return next((c for c in self.loss_calls.values() if c.function in PROBABILITY_TARGETS
                     and c.target_min is not None and (c.target_min < 0 or c.target_max > 1)), None)

    def _classes_last(self) -> str | None:
        call = next((c for c in self.loss_calls.values() if c.classes_last), None)
        if call is None:
            return None
        made = f"{call.input_module}'s output" if call.input_module else f"a softmax over the last dim ({call.input_producer})"
        return (f"{call.function} at {call.site} gets {tuple(call.input_shape)} scores with their classes last ({made}) and "
                f"{tuple(call.target_shape)} targets: it reads dim 1, the {call.input_shape[1]} positions, as the classes "
                "(the same count, so nothing raises)")

    def _target_range(self) -> str | None:
        call = self.probabilities_outside()
        if call is None:
            return None
        return (f"{call.function} at {call.site} gets targets from {call.target_min:g} to {call.target_max:g}: it "
                "expects probabilities in [0, 1]")

    def _ignored_class(self) -> str | None:
        found = self.ignored_class
        if found is None or found.ignored < max(MIN_IGNORED, IGNORED_SHARE * found.real):
            return None
        return found.text()

    def observe_ignored(self, site: str, function: str, target: torch.Tensor, index: int,
                        inputs: list[torch.Tensor], padding_idx: int) -> None:
        """A class loss's ``ignore_index`` against the model's input tokens (the target in the same places):
        how many real tokens (not ``padding_idx``) followed by another real one have the ignored target. The
        last real token of a sequence is left out: a language model's target there is the next position's,
        the padding. The sequences may run along the first dimension or the last, and of several token
        inputs (a translation's source and the decoder's own) the one aligned with the target has the fewest:
        the lowest count is kept."""
        counts = torch.stack([count for tokens in inputs for dim in {0, tokens.dim() - 1}
                              for count in _inside_counts(tokens.transpose(dim, -1) != padding_idx,
                                                          target.reshape(tokens.shape).transpose(dim, -1) == index)])
        found = IgnoredClass(site, function, index, padding_idx)
        self.reads.later([counts], found.fill)
        self.ignored_class = found

    def _one_hot(self) -> str | None:
        site = next((s for s, widths in self.one_hot.items() if len(widths) > 1), None)
        if site is None:
            return None
        return (f"F.one_hot without num_classes at {site} made encodings of widths {sorted(self.one_hot[site])}: "
                "the width follows the largest label of each batch")

    def never_reset(self) -> str | None:
        """Why the gradients are never reset (the last STALE_CHECKS sampled steps all began their first
        backward with non-zero gradients), or None."""
        if self.optimizers > 1:
            return self._carried()
        recent = self.stale_grads[-STALE_CHECKS:]
        one_update = self.optimizers == 1 or (self.optimizers == 0 and self.manual_updates > 0)  # or by hand
        if not one_update or len(recent) < STALE_CHECKS or not all(stale for _, stale in recent):
            return None
        if any(step in self.zero_grad_steps for step, _ in recent):
            return None  # reset later in the step: a first backward for something else (an attack's input gradient)
        return (f"the gradients were already non-zero when backward started, at the first backward of steps "
                f"{', '.join(str(s) for s, _ in recent)}: they are never reset (no zero_grad)")

    def _carried(self) -> str | None:
        carried = self.resets.carried(STALE_CHECKS) if self.resets is not None else None
        if carried is None:
            return None
        label, steps = carried
        return (f"the gradients of {label} ({self.resets.followed_names.get(label, '?')} followed) held the previous "
                f"step's plus the new ones at its steps {', '.join(str(s) for s in steps)}: they are never reset (no zero_grad)")

    def _wiped(self) -> str | None:
        if len(self.wiped_grads) < STALE_CHECKS:
            return None
        _, zeroed, stepped = self.wiped_grads[-1]
        return (f"zero_grad() at {zeroed} runs after backward() and before the optimizer step at {stepped}, at steps "
                f"{', '.join(str(s) for s, _, _ in self.wiped_grads[-STALE_CHECKS:])}: every step applies no gradient")

    def untrained_head(self) -> HeadWatch | None:
        """The output layer being watched, if its weights never moved while the rest did."""
        return self.head if self.head is not None and self.head.untouched() else None

    def _head_untrained(self, step: int) -> str | None:
        head = self.head
        if head is None or step - head.step < HEAD_STEPS or self.untrained_head() is None:
            return None
        why = ("requires_grad=False" if all(name in self.frozen for name in head.params) else
               "in no optimizer" if all(name in self.not_in_optimizer for name in head.params) else
               "never changed by the optimizer steps")
        return (f"{head.module}, the layer that makes the model's output, is never updated: its weights "
                f"({', '.join(list(head.params)[:3])}) are {why}, the same at step {step} as at step {head.step}, "
                f"while {head.other} changed")

    def moved_outside_optimizer(self, model: torch.nn.Module) -> list[str]:
        """Parameters in no optimizer whose values changed since first seen: updated by other means (an EMA
        codebook, a hand-written update), not left behind."""
        named = dict(model.named_parameters())
        return [n for n, first in self.missing_first.items()
                if n in named and named[n].shape == first.shape and not torch.equal(named[n].detach(), first)]

    def _not_in_optimizer(self) -> str | None:
        if self.not_in_optimizer and (self.optimizer_foreign or len(self.not_in_optimizer) == self.trainable):
            foreign = f"; it holds {self.optimizer_foreign} tensor(s) the model does not use" if self.optimizer_foreign else ""
            return (f"the optimizer holds none of the {len(self.not_in_optimizer)} trainable parameter(s) the model "
                    f"uses ({', '.join(self.not_in_optimizer[:4])}){foreign}")
        return None

    def _unregistered(self) -> str | None:
        if not self.unregistered:
            return None
        return ("layers kept in a plain Python container are not registered, so model.parameters() and the "
                f"optimizer never see them: {'; '.join(self.unregistered[:3])}")

    def observe_made_in_forward(self, module: torch.nn.Module, site: Site | None, step: int) -> None:
        """A layer with trainable weights built while a forward ran, and not a part of the model."""
        key = str(site) if site is not None else type(module).__name__
        made = self.made_in_forward.setdefault(key, MadeInForward(type(module).__name__, site))
        made.steps.add(step)

    def layers_in_forward(self) -> list[MadeInForward]:
        """The layers built inside forward at MADE_IN_FORWARD_STEPS steps or more: new weights at every call."""
        return [made for made in self.made_in_forward.values() if len(made.steps) >= MADE_IN_FORWARD_STEPS]

    def _last_grad_checks(self) -> list[tuple[int, list[str], list[str]]]:
        """The last two gradient checks after step 1 (the first step may run before every loss is in)."""
        return [c for c in self.grad_checks if c[0] > 1][-2:]

    def stepped_after(self, step: int) -> set[int]:
        """The ids of the optimizers that stepped after ``step``."""
        return {key for key, last in self.last_stepped.items() if last > step}

    def _weights_unchanged(self) -> str | None:
        if self.weights_still is None:
            return None
        first, last = self.weights_still
        stepped = self.stepped_after(first)
        steppers = "; ".join(f"{name} steps at {site}" for key, (name, site) in self.step_sites.items() if key in stepped)
        return (f"none of the model's {self.trainable} trainable parameter(s) changed from step {first} to step {last}, "
                f"though the optimizer stepped with non-zero gradients: it updates other tensors (copies of the "
                f"weights)" + (f" ({steppers})" if steppers else ""))

    def _no_grad(self) -> str | None:
        checks = self._last_grad_checks()
        if len(checks) < 2 or not self.trainable:
            return None
        missing = set(checks[0][1] + checks[0][2])
        if not all(len(set(c[1] + c[2])) >= self.trainable for c in checks):
            return None
        return (f"no gradient reached any of the {self.trainable} trainable parameter(s) at steps "
                f"{', '.join(str(c[0]) for c in checks)} ({', '.join(sorted(missing)[:4])}...)")

    def partly_reached(self) -> list[str]:
        """The trainable parameters that got no gradient at the last two checks while the others did."""
        checks = self._last_grad_checks()
        if len(checks) < 2 or not checks[0][1] or set(checks[0][1]) != set(checks[1][1]) or \
                len(checks[0][1]) >= self.trainable:
            return []
        return sorted(checks[0][1])

    def _graph_cut(self) -> str | None:
        missing = self.partly_reached()
        if missing and self.detached_return is not None:
            module, site = self.detached_return
            return (f"{', '.join(missing[:4])} never get a gradient, and {module}'s forward returns its output cut "
                    f"from the graph at {site}")
        if not self.graph_cuts or not missing:
            return None
        site, message = self.graph_cuts[0]
        return (f"{', '.join(missing[:4])} never get a gradient, and {site} rebuilds a tensor from tensors that "
                f"require grad (torch warned \"{message[:60]}...\"): the graph is cut there")

    def _eval_mode(self) -> str | None:
        recent = self.mode_checks[-3:]
        if not self.has_mode_layers or len(recent) < 3 or any(training for _, training in recent):
            return None
        return (f"the model trains in eval mode (model.training is False at steps "
                f"{', '.join(str(s) for s, _ in recent)}): dropout is off and batch norm uses its running statistics")

    def evaluated_in_train_mode(self) -> str | None:
        """The finding: an evaluation loop run in training mode (see ``TrainModeEvaluation``)."""
        evaluation = self.train_mode_evaluation
        if evaluation is None or self.train_mode_evaluations < TRAIN_MODE_EVALUATIONS:
            return None
        where = f" (after model.train() at {evaluation.mode_site})" if evaluation.mode_site else ""
        return (f"the model is evaluated in training mode{where}: {self.train_mode_evaluations} calls under "
                f"torch.no_grad() whose output goes to the loss at {evaluation.loss_site}, with batch norm normalising "
                "each batch by its own statistics")

    def transforms_drawn_apart(self, dataset: Any) -> list[tuple[str, str, Site]]:
        """The transforms the training dataset draws separately for a sample's parts (``sample_transforms``),
        read once a run."""
        if self.drawn_apart is None:
            self.drawn_apart = separate_random_transforms(dataset) if dataset is not None else []
        return self.drawn_apart

    def drawn_apart_text(self) -> str | None:
        """The finding: the transforms drawn apart, with their calls (None where there are none)."""
        if not self.drawn_apart:
            return None
        calls = "; ".join(f"`self.{attr}({arg})` at {site}" for attr, arg, site in self.drawn_apart)
        return (f"__getitem__ passes a sample's parts through random transforms in separate calls ({calls}): each call "
                "draws its own, so the parts stop matching")

    def renumbered_evaluation(self, step: int, losses: list[float | None]) -> str | None:
        """The finding: an evaluation pass whose labels are numbered differently from its predictions (see
        ``evaluation_classes``), once the training loss (``losses``, oldest first) has fallen (``loss_falls``); once
        the script ended, its last pass counts too."""
        if self.renumbered is None and loss_falls(losses, EVALUATION_STEPS):
            self.renumbered = self.evaluation_classes.renumbered(step, ended=self.script_ended)
        return self.renumbered.text() if self.renumbered is not None else None

    def observe_train_mode_evaluation(self, evaluation: TrainModeEvaluation) -> None:
        self.train_mode_evaluations += 1
        self.train_mode_evaluation = evaluation

    def record_mode(self, step: int, model: torch.nn.Module) -> None:
        """The model's mode at a sampled step, and the parts of it in eval mode while it trains (the
        outermost module of each such part that holds dropout or batch norm)."""
        self.mode_checks.append((step, model.training))
        del self.mode_checks[:-50]
        if not model.training and id(model) in self.eval_sites:
            self.eval_at_training = self.eval_sites[id(model)]
        parts = []
        if model.training:
            modules = dict(model.named_modules())
            for name, module in modules.items():
                parent = modules.get(name.rpartition(".")[0] if "." in name else "")
                if name and not module.training and parent is not None and parent.training and \
                        any(isinstance(m, MODE_LAYERS) for m in module.modules()):
                    parts.append((name, id(module)))
        self.eval_parts.append((step, parts))
        del self.eval_parts[:-50]

    def parts_in_eval(self) -> list[tuple[str, int]]:
        """The parts in eval mode at each of the last three checks while the model trained."""
        recent = self.eval_parts[-3:]
        if len(recent) < 3 or not all(parts == recent[0][1] for _, parts in recent):
            return []
        return recent[0][1]

    def classes(self) -> int | None:
        """The number of classes a class loss (cross_entropy / nll_loss) was given scores for."""
        return next((c.classes for c in self.loss_calls.values()
                     if c.function in ("cross_entropy", "nll_loss") and c.classes and c.classes >= 2), None)

    def _at_chance(self, losses: Callable[[], list[float | None]]) -> str | None:
        classes = self.classes()
        if classes is None:
            return None
        values = [v for v in losses() if v is not None and math.isfinite(v)]
        if len(values) < CHANCE_STEPS:
            return None
        chance, fifth = math.log(classes), max(10, len(values) // 5)
        tail, start = values[-fifth:], sorted(values[:fifth])[fifth // 2]
        if start < CHANCE_START * chance or abs(statistics.median(tail) - chance) > CHANCE_SPREAD * chance \
                or any(abs(v - chance) > CHANCE_BAND * chance for v in tail):
            return None
        return (f"the loss sits at ln({classes}) = {chance:.4g}, the loss of equal probabilities for all {classes} classes, "
                f"over the last {len(tail)} steps (median {statistics.median(tail):.4g}, from {start:.4g} at the start): "
                "the model's outputs no longer depend on its inputs")

    def _loss_input(self) -> str | None:
        for call in self.loss_calls.values():
            producer = call.input_producer or ""
            if call.gets_probabilities:
                made = f" made by {call.input_module}" if call.input_module else ""
                loss = f"{call.loss_module} ({call.function})" if call.loss_module else call.function
                return (f"{loss} at {call.site} gets probabilities{made} ({producer or 'rows sum to 1'}): "
                        "it expects logits (cross_entropy) or log-probabilities (nll_loss)")
            if call.positive_log_probabilities:
                made = f" made by {call.input_module}" if call.input_module else ""
                return (f"{call.function} at {call.site} gets values up to {call.input_max:.3g}{made}: it expects "
                        "log-probabilities, which are never above 0")
            if call.function == "binary_cross_entropy_with_logits" and producer.startswith("Sigmoid"):
                made = f" made by {call.input_module}" if call.input_module else ""
                return (f"{call.function} at {call.site} gets sigmoid outputs{made}: it applies the sigmoid "
                        "itself and expects logits")
        return None

    def _schedule(self, step: int) -> str | None:
        """A per-epoch schedule stepped every batch that takes the rate to nothing within an epoch."""
        for calls in self.schedulers.values():
            if calls.kind not in PER_EPOCH or step < 4 or calls.calls < 0.8 * step:
                continue
            collapse = calls.collapse_step()
            limit = self.epoch_length or EARLY_COLLAPSE
            if collapse is not None and collapse <= limit:
                epoch = f"within the first epoch ({self.epoch_length} batches)" if self.epoch_length else \
                    f"within {collapse} steps"
                return (f"{calls.kind} is stepped every batch ({calls.calls} calls in {step} steps, at {calls.site}): "
                        f"its rate falls below {LR_COLLAPSE:g} of its start at step {collapse}, {epoch}")
        return None

    def observe_lr(self, step: int, lr: Any, base: Any = None) -> None:
        """The first param group's rate at each step (and a scheduler's base rate for it): where it collapsed,
        if it did, and whether it has only risen."""
        if not isinstance(lr, (int, float)):
            return
        if self.first_lr is None:
            self.first_lr = float(lr)
        self.lr_fell = self.lr_fell or (self.last_lr is not None and lr < self.last_lr)
        self.last_lr, self.lr_steps, self.lr_sum = float(lr), self.lr_steps + 1, self.lr_sum + float(lr)
        if isinstance(base, (int, float)):
            self.lr_base = float(base)
        if self.first_lr > 0 and lr < LR_COLLAPSE * ROUNDING * self.first_lr:
            self.lr_collapsed_at = self.lr_collapsed_at or step
        else:
            self.lr_collapsed_at = None

    def unfinished_warmup(self) -> str | None:
        """At the script's end: the rate never fell, rose to below its base and averaged WARMUP_SHORT of it or less."""
        first, last, base = self.first_lr, self.last_lr, self.lr_base
        if not self.script_ended or self.lr_fell or self.lr_steps < WARMUP_MIN_STEPS or first is None or \
                last is None or not base or not first < last < base:
            return None
        mean = self.lr_sum / self.lr_steps
        if mean > WARMUP_SHORT * base:
            return None
        return (f"the learning rate never fell in the run's {self.lr_steps} steps, from {first:.3g} to {last:.3g} at its "
                f"end ({last / base:.1%} of the {base:.3g} the optimizer was given), {mean / base:.1%} of it on average: "
                "the run ended inside its warm-up")

    def _collapsed_rate(self, step: int) -> str | None:
        at = self.lr_collapsed_at
        if at is None or step - at < (COLLAPSED_STEPS if self.last_lr == 0 else max(at, COLLAPSED_STEPS)):
            return None
        return (f"the learning rate fell from {self.first_lr:.3g} to {self.last_lr:.3g} (below {LR_COLLAPSE:g} of its "
                f"start) at step {at} and has stayed there for {step - at} steps: the steps since change nothing")

    def _no_step(self) -> str | None:
        if self.optimizers or self.manual_updates or self.backward_total < NO_STEP_BACKWARDS or self.steps:
            return None
        return (f"{self.backward_total} backward passes and no optimizer step (no optimizer.step() was called, "
                "and the parameters do not change)")

    def _no_backward(self) -> str | None:
        enough = LOSSES_WITHOUT_BACKWARD if self.script_ended else LIVE_LOSSES_WITHOUT_BACKWARD
        if self.steps or self.backward_total or self.manual_updates or not self.optimizer_sites or \
                self.losses_without_backward < enough:
            return None
        where = " called from ".join(self.unused_loss_sites) or "?"
        return (f"the loss was computed {self.losses_without_backward} times in training mode ({where}), and "
                f"neither backward() nor an optimizer step ever ran: the {self.optimizer_sites[0][0]} created at "
                f"{self.optimizer_sites[0][1]} never updates the model")

    def _graphs(self, step: int) -> tuple[str, list[str]] | None:
        # Held tensors' tags count once a chain was seen: a buffer of samples kept for many steps (a replay
        # buffer, a queue of negatives) holds its old tensors themselves, not graphs that new ones extend.
        old = [tag for tag in self.old_graphs_alive(step) if tag.what != HELD or self.held_chained]
        steps = sorted({tag.step for tag in old})
        before, self.old_graph_steps = self.old_graph_steps, steps
        accumulating = bool(before) and before[0] in steps and steps[-1] > before[-1]
        if len(steps) >= LEAKED_STEPS and accumulating:
            kinds = sorted({tag.what for tag in old})[:3]
            return (f"the autograd graphs of {len(steps)} earlier steps (from step {steps[0]} on: {', '.join(kinds)}) "
                    f"are still alive at step {step}: something keeps them across steps", [])
        alive = self._evaluated(step + 1)
        if len(alive) > self.graph_allowance():
            return (f"{len(alive)} model outputs made in eval mode in the step in progress still hold their autograd "
                    f"graphs (a step of this loop makes {self.tags_per_step or 'a few'}): an evaluation run with "
                    "gradients on keeps them, collected without .detach()", [])
        return None

    def _evaluated(self, step: int) -> list[GraphTag]:
        """The graphs of ``step`` made by the model in eval mode: an evaluation run with gradients on. Outputs
        made in training mode pile up by design before the backward that uses them (an episode's
        log-probabilities in REINFORCE, losses summed over micro-batches)."""
        return [tag for tag in self.graphs_of_step(step) if tag.evaluating]

    def graphs_of_step(self, step: int) -> list[GraphTag]:
        return [tag for tag in self.graphs_alive() if tag.step == step]

    def step_done(self) -> None:
        """A step ended: how many losses and model outputs a step of this loop makes."""
        self.tags_per_step = max(self.tags_per_step, self.tags_this_step)
        self.outputs_per_step = max(self.outputs_per_step, self.outputs_this_step)
        self.tags_this_step = self.outputs_this_step = 0

    def observe_containers(self, sizes: dict[str, tuple[int, str]]) -> None:
        """The tensors held by the model's containers, at the start of each pass over a DataLoader."""
        for path, (count, owner) in sizes.items():
            self.container_counts.setdefault(path, (owner, []))[1].append(count)

    def _container_growth(self) -> tuple[str, list[str]] | None:
        """A container of the model that holds more tensors at every new pass over the data (epoch after
        epoch), never fewer: nothing empties it."""
        for path, (owner, counts) in self.container_counts.items():
            recent = counts[-CONTAINER_PASSES:]
            rises = sum(b > a for a, b in zip(recent, recent[1:]))
            if len(recent) == CONTAINER_PASSES and rises >= CONTAINER_PASSES - 2 and \
                    all(b >= a for a, b in zip(recent, recent[1:])) and recent[-1] >= CONTAINER_TENSORS:
                self.growing_container = path
                return (f"`{path}` ({owner}) holds {recent[-1]} tensors and keeps more at every pass over the data "
                        f"({', '.join(map(str, recent))}): nothing empties it", [])
        return None

    def new_suspicions(self) -> list[tuple[str, str]]:
        """(code, text) of evidence still building, not reported yet: a container of the model that held
        more tensors at every pass seen so far, too few passes for a finding. diagnose lengthens its window
        for it: a slow run may need a few more passes over the data to decide."""
        found = [("container_growth", f"`{path}` ({owner}) held more tensors at every pass so far "
                  f"({', '.join(map(str, counts))})")
                 for path, (owner, counts) in self.container_counts.items()
                 if 2 <= len(counts) < CONTAINER_PASSES and counts[-1] >= CONTAINER_TENSORS
                 and all(b > a for a, b in zip(counts, counts[1:]))]
        fresh = [(code, text) for code, text in found if f"suspect:{code}" not in self.reported]
        self.reported.update(f"suspect:{code}" for code, _ in fresh)
        return fresh

    def _growth(self) -> str | None:
        growth = self.kept_memory_growth()
        if growth is None:
            return None
        slope, total, steps, label = growth
        return (f"{label} grows {slope / 2**20:.2f} MiB a step, steadily, {total / 2**20:.0f} MiB over the last "
                f"{steps} steps: something keeps what each step makes")

    def memory_growth(self) -> tuple[float, int, int, str] | None:
        """(bytes per step, growth, steps, what was read) when memory rises steadily after warm-up: over
        the second half of the samples, by more than GROWTH_BYTES a step and GROWTH_TOTAL in all, with
        most readings above the one before."""
        # This runs at every sampled step: one pass over at most GROWTH_POINTS evenly spaced readings.
        half = len(self.memory) // 2
        first = last = previous = None
        count = rising = 0
        for step, rss, cuda in itertools.islice(self.memory, half, None, max(1, (len(self.memory) - half) // GROWTH_POINTS)):
            value = cuda if cuda is not None else rss
            if value is None:
                continue
            first = first or (step, value)
            rising += previous is not None and value > previous
            previous, last, count = value, (step, value), count + 1
        if count < GROWTH_SAMPLES:
            return None
        steps, total = last[0] - first[0], last[1] - first[1]
        if steps <= 0 or total < GROWTH_TOTAL or total / steps < GROWTH_BYTES or rising / (count - 1) < GROWTH_RISING:
            return None
        label = "CUDA allocated memory" if self.memory[-1][2] is not None else "resident memory (CPU)"
        return total / steps, total, steps, label

    def kept_memory_growth(self) -> tuple[float, int, int, str] | None:
        """``memory_growth``, tried once more for a rise in resident memory: the C heap's free pages are
        handed back to the system, and when resident memory then falls below the lowest reading of the
        rise, the rise was memory the allocator kept for reuse (fragmentation under create_graph, a
        loaded machine), not memory the script holds. The readings then restart from that point; as the
        heap fills again to where it was, they rise, so a rise counts again only once it passes the
        highest reading before the trim (``heap_refill``): a rise that goes on is seen a few steps later."""
        growth = self.memory_growth()
        if growth is None or self.memory[-1][2] is not None:
            return growth
        if self.memory[-1][1] <= self.heap_refill:
            return None  # the heap the trim emptied fills again up to where it was: no growth until it passes that
        if not release_free_heap():
            return growth
        trimmed, _ = process_memory()
        rise = [rss for _, rss, _ in itertools.islice(self.memory, len(self.memory) // 2, None) if rss is not None]
        if trimmed >= min(rise):
            return growth
        step, self.heap_refill = self.memory[-1][0], max(rise)
        self.memory.clear()
        self.memory.append((step, trimmed, None))
        return None

    def graphs_alive(self) -> list[GraphTag]:
        """The losses' and model outputs' graphs alive now."""
        return [tag for ref in self.tags if (tag := ref()) is not None]

    def graph_allowance(self) -> int:
        """How many tagged graphs of one step a loop holds when nothing leaks: twice what a step makes."""
        return max(LEAKED_GRAPHS, 2 * self.tags_per_step)

    def graphs_piling_up(self, step: int) -> bool:
        """Checked every few tags: more graphs of the step in progress alive than a step makes."""
        self.tagged += 1
        return self.tagged % PILE_CHECK == 0 and "graphs_kept" not in self.reported and \
            len(self._evaluated(step)) > self.graph_allowance()

    # --- graphs kept alive across steps ------------------------------------------------------

    def tag_graph(self, tensor: torch.Tensor, step: int, what: str, evaluating: bool = False,
                  chained: bool = False) -> None:
        node = tensor.grad_fn
        if node is None:
            return
        tag = GraphTag(step, what, evaluating, chained)
        try:
            node.metadata["tuidebug"] = tag
        except (AttributeError, RuntimeError):
            return
        if what in ("loss", "model output"):
            self.tags.append(weakref.ref(tag))
            self.tags_this_step += 1
            self.outputs_this_step += what == "model output" and not chained
        else:
            self.layer_tags.append(weakref.ref(tag))

    def tag_held(self, tensor: torch.Tensor, step: int) -> None:
        """A tensor with a graph that the script's objects hold at the end of ``step``: its graph's root is
        tagged, unless it carries a tag already (a loss or a model output keeps its own step, a tensor held
        since an earlier search its own). A new root whose graph reaches the root of a tensor held at an
        earlier search is a chain: the script builds each step's value from the last one's graph."""
        node = tensor.grad_fn
        try:
            tagged = "tuidebug" in node.metadata
        except (AttributeError, RuntimeError):
            return
        if tagged:
            return
        for earlier in graph_nodes([next_node for next_node, _ in node.next_functions], SEARCH_NODES):
            tag = earlier.metadata.get("tuidebug") if hasattr(earlier, "metadata") else None
            if isinstance(tag, GraphTag) and tag.what == HELD and tag.step < step:
                self.held_chained = True
                break
        self.tag_graph(tensor, step, HELD)

    def old_graphs_alive(self, step: int) -> list[GraphTag]:
        """Tags of graphs from steps before ``step - GRAPH_AGE`` that something still holds."""
        return [tag for ref in (*self.tags, *self.layer_tags)
                if (tag := ref()) is not None and tag.step < step - GRAPH_AGE]

    # --- the model and its optimizer -----------------------------------------------------------

    def check_parameters(self, model: torch.nn.Module, optimizers: list[torch.optim.Optimizer]) -> None:
        """Which parameters the optimizers miss, which are frozen, and layers kept in plain containers."""
        named = dict(model.named_parameters())
        self.trainable = sum(p.requires_grad for p in named.values())
        held = {id(p) for p in optimizer_params(*optimizers)}
        self.not_in_optimizer = [n for n, p in named.items() if p.requires_grad and id(p) not in held]
        if not self.missing_first:  # their first values: a parameter updated outside the optimizer (EMA) moves
            self.missing_first = {n: named[n].detach().clone() for n in self.not_in_optimizer
                                  if named[n].numel() <= HEAD_MAX_ELEMENTS}
        model_ids = {id(p) for p in named.values()}
        self.optimizer_foreign = len(held - model_ids)
        self.frozen = [n for n, p in named.items() if not p.requires_grad]
        self.unregistered = unregistered_modules(model)
        self.copied_parameters = copied_parameters(model, held | model_ids)
        self.has_mode_layers = any(isinstance(m, MODE_LAYERS)
                                   for m in model.modules())

    def check_outside_parts(self, models: list[torch.nn.Module], model: torch.nn.Module,
                            optimizers: list[torch.optim.Optimizer], step: int) -> None:
        """The modules called on their own beside the model (a recurrent memory, then a head, from a method of
        a policy) whose trainable weights all have gradients now, while no optimizer holds any of them."""
        held = {id(p) for p in optimizer_params(*optimizers)} | {id(p) for p in model.parameters()}
        for other in models:
            trainable = [(name, p) for name, p in other.named_parameters() if p.requires_grad]
            if other is model or not trainable or any(id(p) in held or p.grad is None for _, p in trainable) or \
                    any(part.module() is other for part in self.outside_parts):
                continue
            with torch.no_grad():
                first = torch.stack(torch._foreach_norm([p for _, p in trainable]))
            self.outside_parts.append(OutsidePart(type(other).__name__, [n for n, _ in trainable], step, first,
                                                  weakref.ref(other)))

    def part_outside(self, losses: list[float | None]) -> OutsidePart | None:
        """The first part outside every optimizer whose weights never moved, in a run whose loss does not fall
        below LEARNS of its start: a part left out on purpose (a fixed backbone given no optimizer) goes with a loss
        that falls all the same."""
        if loss_falls(losses, PART_STEPS) is not False:
            return None
        return next((part for part in self.outside_parts if part.unchanged()), None)

    def note_warning(self, category: type, message: str, filename: str, lineno: int) -> None:
        """Warnings at a user's line that are evidence: numpy's floating-point RuntimeWarning ("divide by zero
        encountered in divide"), torch's when a tensor is rebuilt from tensors that require grad or a std is taken
        over one element, and its reentrant checkpoint's given no input that requires grad (at the user's line on
        the stack)."""
        if issubclass(category, UserWarning) and message.startswith(CHECKPOINT_WARNING):
            site = user_site()
            if site is not None and not self.checkpoint_cuts:
                self.checkpoint_cuts.append((site, message))
                self.source_files.add(site.path)
            return
        if not is_user_file(filename):
            return
        site = Site(filename, lineno, "")
        if issubclass(category, RuntimeWarning) and NUMERIC_WARNING in message:
            kept = self.numeric_warnings
        elif issubclass(category, UserWarning) and message.startswith(GRAPH_CUT_WARNINGS) and \
                REBUILDS.search(site.text):
            kept = self.graph_cuts
        elif issubclass(category, UserWarning) and DOMAIN_WARNING in message:
            kept = self.domain_warnings
        else:
            return
        if len(kept) < WARNINGS_KEPT and all(s != site for s, _ in kept):
            kept.append((site, message.split("\n")[0]))
            self.source_files.add(filename)

    def observe_watched(self, watch: Any) -> None:
        """What the watched iteration found (``agent/watched_step.py``), once it has ended."""
        if watch is not None:
            self.pairing, self.relabel = watch.pairing, watch.relabel
            self.batch_as_sequence = watch.batch_as_sequence
            self.singleton_softmax = watch.singleton_softmax
            self.shifted_targets = watch.shifted_targets

    def observe_first_inputs(self, tensors: list[torch.Tensor], site: Site | None) -> None:
        """The model's first inputs: one that is a view of a tensor with the same sizes in another order,
        both laid out in order (a ``view``/``reshape``, not a ``permute``/``t()``), is the source's memory
        order relabelled: ``x.view(20, 640, 1)`` of a (640, 20) tensor mixes the samples of its rows."""
        for index, tensor in enumerate(tensors):
            base = tensor._base
            if base is None or not tensor.is_contiguous() or not base.is_contiguous():
                continue
            if reordered(tuple(base.shape), tuple(tensor.shape)):
                self.reordered_view = ReorderedView(index, tuple(tensor.shape), tuple(base.shape), site)
                return

    def observe_call_size(self, tensors: list[torch.Tensor], site: Any) -> None:
        """The size of the model's inputs at each call: one far above the usual although its batch (first)
        dimension is not (a data-set-sized axis fed at once) is kept with its line, for the out-of-memory
        check; a larger batch is the batch check's."""
        size = sum(t.numel() for t in tensors)
        batch = tensors[0].shape[0] if tensors and tensors[0].dim() else 1
        usual = self.usual_call
        # a usual call of no tensor values (a graph batch object) gives no measure to compare with
        if usual and usual[0] and size >= LARGE_CALL * usual[0] and batch < LARGE_CALL * usual[1]:
            where = site()
            self.large_call = (size, usual[0], [tuple(t.shape) for t in tensors], str(where) if where else "?")
            return
        self.call_sizes.append((size, batch))
        self.large_call = None
        self.calls_seen += 1
        if self.calls_seen % USUAL_CALLS == 0:  # not a sort per model call on the hot path: the median moves slowly
            self.usual_call = sorted(self.call_sizes)[len(self.call_sizes) // 2]

    def check_gradients(self, step: int, model: torch.nn.Module) -> None:
        """Which trainable parameters have no gradient, and which an all-zero one: one fused norm for all
        of them, read with the step's other values (a model of 10,000 tensors would otherwise sync the GPU
        10,000 times)."""
        trainable = [(name, param) for name, param in model.named_parameters() if param.requires_grad]
        no_grad = [name for name, param in trainable if param.grad is None]
        dense = [(name, param) for name, param in trainable if param.grad is not None and not param.grad.is_sparse]
        sparse = [(name, param) for name, param in trainable if param.grad is not None and param.grad.is_sparse]
        norms = stacked_norms([param for _, param in dense])
        largest = None
        with torch.no_grad():
            nonzero = [param.grad.detach().any() for _, param in sparse]
            if norms is not None and blocks_host(norms):
                # A 2-norm of values near 1e-30 underflows to 0. On a GPU the largest value tells (fused, read
                # with the rest); on a CPU any() confirms each such one (no device to wait for).
                largest = torch.stack(torch._foreach_norm([param.grad for _, param in dense], float("inf")))
        values = [tensor for tensor in (norms, largest) if tensor is not None] + nonzero
        self.reads.later(values, lambda numbers: self._note_zero_grads(step, trainable, no_grad, dense, sparse,
                                                                       numbers, largest is not None))

    def _note_zero_grads(self, step: int, trainable: list, no_grad: list[str], dense: list, sparse: list,
                         numbers: list[float], with_largest: bool) -> None:
        norms, numbers = numbers[:len(dense)], numbers[len(dense):]
        largest, numbers = (numbers[:len(dense)], numbers[len(dense):]) if with_largest else (None, numbers)
        zeros = {name for (name, _), nonzero in zip(sparse, numbers) if not nonzero}
        with torch.no_grad():
            for i, ((name, param), norm) in enumerate(zip(dense, norms)):
                if norm == 0 and (largest[i] == 0 if largest is not None else
                                  param.grad is not None and not bool(param.grad.detach().any())):
                    zeros.add(name)
        self.grad_checks.append((step, no_grad, [name for name, _ in trainable if name in zeros]))
        del self.grad_checks[:-20]

    # --- loss calls -------------------------------------------------------------------------

    def observe_loss(self, index: int, function: str, input: Any, target: Any, module_of: Any) -> None:
        if not isinstance(input, torch.Tensor):
            return
        call = self.loss_calls.get(index)
        site = user_site()
        target_tensor = target if isinstance(target, torch.Tensor) else None
        call = LossCall(
            function=function, site=str(site) if site else "?", input_shape=list(input.shape),
            target_shape=list(target_tensor.shape) if target_tensor is not None else None,
            input_dtype=_dtype(input), target_dtype=_dtype(target_tensor) if target_tensor is not None else None,
            input_producer=type(input.grad_fn).__name__ if input.grad_fn is not None else None,
            input_module=module_of(input), loss_module=_calling_loss_module(), calls=(call.calls if call else 0) + 1,
            grad_enabled=torch.is_grad_enabled())
        values = input.detach()
        if values.dim() >= 2 and values.is_floating_point() and function in CLASS_LOSSES:
            call.classes = int(values.shape[1])
            call.classes_last = target_tensor is not None and _classes_read_from_positions(input, target_tensor,
                                                                                          call.input_module)
        with torch.no_grad():
            ranges = value_ranges(values, target_tensor)
        self.reads.later(ranges, call.fill_ranges)
        self.loss_calls[index] = call

    # --- memory -----------------------------------------------------------------------------

    def record_memory(self, step: int, rss: int | None, cuda: int | None, vms: int | None = None) -> None:
        self.memory.append((step, rss, cuda))
        if vms is not None:
            self.address_space = vms


def _inside_counts(real: torch.Tensor, ignored: torch.Tensor) -> list[torch.Tensor]:
    """Real tokens followed by a real one along the last dimension: those with the ignored target, and all."""
    inside = real[..., :-1] & real[..., 1:]
    return [(inside & ignored[..., :-1]).sum(), inside.sum()]


def loss_falls(losses: list[float | None], steps: int) -> bool | None:
    """Whether the median of the last quarter of ``losses`` (oldest first) is below LEARNS of the first quarter's;
    None over fewer than ``steps`` finite losses or for a start at or below 0 (nothing to judge)."""
    values = [v for v in losses if v is not None and math.isfinite(v)]
    quarter = len(values) // 4
    if quarter < steps // 4:
        return None
    start, end = statistics.median(values[:quarter]), statistics.median(values[-quarter:])
    return None if start <= 0 else end < LEARNS * start


def unregistered_modules(model: torch.nn.Module) -> list[str]:
    """Attributes that hold modules in plain lists, tuples or dicts (nested too): their parameters are
    invisible to ``model.parameters()`` (``hids (list of 3 Linear in SNLINet)``)."""
    found = []
    registered = {id(m) for m in model.modules()}
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr.startswith("_") or not isinstance(value, (list, tuple, dict)):
                continue
            modules = [m for m in _modules_in(value) if id(m) not in registered]
            if modules:
                kinds = sorted({type(m).__name__ for m in modules})
                owner = f"{path}." if path else ""
                found.append(f"{owner}{attr} ({type(value).__name__} of {len(modules)} {'/'.join(kinds)} "
                             f"in {type(module).__name__})")
    return found


def copied_parameters(model: torch.nn.Module, known: set[int], nodes: int = 32) -> list[tuple[str, str]]:
    """Plain tensor attributes of the model's modules computed from a leaf that requires grad and that no module
    and no optimizer holds (``known``: their ids): ``self.w = nn.Parameter(t).to(dtype)`` keeps the copy, and the
    Parameter itself is registered nowhere. (attribute path, what it is), e.g. ``("linear.weight", "a float64
    copy of shape (13, 1) of a Parameter ... in Linear")``."""
    found = []
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr.startswith("_") or not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter) \
                    or value.grad_fn is None:
                continue
            leaf = next((node.variable for node in graph_nodes(value.grad_fn, nodes)
                         if isinstance(getattr(node, "variable", None), torch.Tensor)), None)
            if leaf is not None and id(leaf) not in known:
                owner = f"{path}." if path else ""
                kind = "Parameter" if isinstance(leaf, torch.nn.Parameter) else "leaf tensor that requires grad"
                found.append((f"{owner}{attr}", f"a {_dtype(value)} copy of shape {tuple(value.shape)} of a "
                              f"{_dtype(leaf)} {kind}, in {type(module).__name__}"))
    return found


def _modules_in(value: Any, depth: int = 0) -> list[torch.nn.Module]:
    if isinstance(value, torch.nn.Module):
        return [value]
    if depth > 3:
        return []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else []
    return [m for item in items for m in _modules_in(item, depth + 1)]


def _dtype(tensor: torch.Tensor | None) -> str | None:
    return str(tensor.dtype).replace("torch.", "") if tensor is not None else None


def site_text(site: Site | None) -> str:
    return str(site) if site is not None else "?"


def _calling_loss_module() -> str | None:
    """The class of the ``torch.nn`` loss module whose forward is on the stack (the user wrote
    ``nn.CrossEntropyLoss()``, torch calls ``F.cross_entropy``), read only when a loss call is recorded."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        owner = frame_locals(frame).get("self")
        if isinstance(owner, torch.nn.modules.loss._Loss):
            return type(owner).__name__
        frame = frame.f_back
    return None
