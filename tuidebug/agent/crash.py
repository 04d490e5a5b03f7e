"""The script raised: what the exception means in terms of the user's own tensors and modules.

Read at the moment of the exception, before its frames are dropped: the innermost line of the
user's code, the values named on that line (shapes, dtypes, label ranges, layer sizes), the module
whose forward raised (from the hooks) and the loss call that raised. The failure is classified by
those tensors and the op, not by the message text, which is only a last resort; the result is
plain strings, so no frame or tensor is kept alive by it.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import math
import re
import resource
import sys
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any

import psutil
import torch

from tuidebug.format import bytes_text
from tuidebug.probes.shape import classes_moved_to_dim1
from tuidebug.probes.source import (MISSING, assigned_value, assignments, attribute_chain, calls_named, calls_of,
                                    frame_value, module_site)
from tuidebug.agent.worker_errors import failing_dataset, failing_sample, read_worker_error
from tuidebug.sites import Site, frame_locals, innermost_user_site, is_user_file, user_frames

SHAPE_MESSAGE = re.compile(
    r"shape|size mismatch|mat1 and mat2|must match the size|dimension|Expected input batch_size|"
    r"doesn't match the broadcast|cannot be multiplied|Target size|expected input|input.size|hidden|equal size|"
    r"size of tensor|is invalid for input of size|number of dimensions|same number of|expected .*size|"
    r"should contain \d+ elements not \d+", re.I)
ALLOCATION = re.compile(r"(?:tried to allocate|Unable to allocate)\s+([\d.]+)\s*([KMGT]?i?B|bytes)", re.I)
UNITS = {"bytes": 1, "b": 1, "kb": 1e3, "kib": 2**10, "mb": 1e6, "mib": 2**20, "gb": 1e9, "gib": 2**30, "tb": 1e12,
         "tib": 2**40}
MAX_OPERANDS = 8
# oneDNN reports a failed allocation of its scratch memory as "could not create a primitive"; once the process's
# peak virtual size is this close to its address-space limit, that failure is taken for running out of memory
# (an allocation of the limit's last few percent: the conv's workspace, a few MiB to a few hundred).
ADDRESS_SPACE_FULL = 0.95
RNN = (torch.nn.RNN, torch.nn.LSTM, torch.nn.GRU)
CLASS_LOSSES = ("cross_entropy", "nll_loss")
DEEPCOPY_NON_LEAF = "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol"
BINARY_LOSSES = ("binary_cross_entropy", "binary_cross_entropy_with_logits")
# "[torch.FloatTensor [1, 128, 1, 1]] is at version 2; expected version 1": a tensor autograd saved for backward
# was changed in place since (its version counter says how many times).
INPLACE = re.compile(r"modified by an inplace operation: \[torch\.[\w.]*Tensor \[([\d, ]*)\]\](?:, which is output \d+ "
                     r"of (\w+),)? is at version (\d+); expected version (\d+)")
# What saved a weight, when the message says: a view of it (a Linear saves its transpose). Anything else (ReLU's
# output) is an activation, however its shape and version match a weight's (an init's in-place fill is version 1).
WEIGHT_VIEWS = re.compile(r"(T|Transpose|AsStrided|View|Permute|Expand|Unsqueeze|Squeeze|Alias|Select|Slice)(Backward\d*)?$")


@dataclass
class Crash:
    kind: str  # oom | shape | no_graph | other
    cause: str  # the tree's cause id this points to (shape_mismatch, target_out_of_range, ...)
    exception: str
    site: str | None = None
    frames: list[str] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)
    module: str | None = None
    module_inputs: list[str] = field(default_factory=list)
    loss: str | None = None
    findings: list[str] = field(default_factory=list)
    fix: str = ""
    memory: dict[str, Any] = field(default_factory=dict)
    batch_size: int | None = None

    @property
    def failing_line(self) -> str:
        """``train.py:73``: the user's line that raised (or "the failing line" where none is known)."""
        return self.site.split(" ", 1)[0] if self.site else "the failing line"

    def lines(self) -> list[str]:
        """The analysis as evidence lines (also sent to the TUI in the crash event)."""
        out = [f"exception: {self.exception}"]
        if self.site:
            out.append(f"raised at {self.site}")
        out += [f"finding: {line}" for line in self.findings]
        if self.module:
            out.append(f"failing module: {self.module}" + (f", input {', '.join(self.module_inputs)}"
                                                           if self.module_inputs else ""))
        if self.loss:
            out.append(f"failing loss call: {self.loss}")
        out += [f"operand {line}" for line in self.operands]
        out += [f"memory: {key} {value}" for key, value in self.memory.items()]
        out += [f"traceback: {line}" for line in self.frames[-6:]]
        if self.fix:
            out.append(f"fix: {self.fix}")
        return out


@dataclass
class FailedModule:
    module: torch.nn.Module
    name: str
    inputs: list[Any]
    step: int


@dataclass
class FailedLoss:
    function: str
    input: Any
    target: Any
    step: int


def describe(value: Any) -> str | None:
    """A value as evidence: a tensor's shape and dtype (and label range), a layer's sizes."""
    if isinstance(value, torch.Tensor):
        text = f"{shape_text(value.shape)} {str(value.dtype).replace('torch.', '')}"
        if not value.is_floating_point() and not value.is_complex() and 0 < value.numel() <= 10_000_000:
            text += f" values {int(value.min())}..{int(value.max())}"
        return text
    if isinstance(value, torch.nn.Module):
        return module_text(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value[:8]):
        return "[" + ", ".join(shape_text(v.shape) for v in value[:8]) + "]"
    if value is None or isinstance(value, (int, float, bool)):
        return repr(value)
    if type(value).__name__ == "ndarray" and hasattr(value, "shape"):  # numpy's, without importing numpy
        return f"numpy array {shape_text(value.shape)} {value.dtype}"
    return None


def shape_text(shape: Any) -> str:
    dims = [int(d) for d in shape]
    return "(" + ", ".join(map(str, dims)) + ("," if len(dims) == 1 else "") + ")"


def module_text(module: torch.nn.Module) -> str:
    extra = module.extra_repr()
    return f"{type(module).__name__}({extra})" if extra else type(module).__name__


def analyse(exc: BaseException, failed_module: FailedModule | None, failed_loss: FailedLoss | None,
            model_batch: int | None, one_hot: dict[str, set[int]],
            model_call: tuple[torch.nn.Module, tuple[tuple, dict]] | None = None,
            loader: LoaderShape | None = None, evaluated_after: int | None = None,
            graphless_after: tuple[int, list[tuple[str, int]]] | None = None) -> Crash:
    """The crash's classification and evidence, from the exception and what the hooks recorded
    (``model_call``: the model and the inputs of its last call; ``loader``: the DataLoader that gave
    the failing batch; ``evaluated_after``: the training steps run, when the model was in eval mode at
    the exception and the shape error came from a line of the user's; ``graphless_after``: the training steps run
    and the user's lines of the first training backward's stack, outermost first, when the backward that raised
    was of a loss without a graph, with gradients off)."""
    crash = Crash(kind="other", cause="exception", exception=f"{type(exc).__name__}: {exc}".strip()[:600],
                  batch_size=model_batch)
    tb = exc.__traceback__
    found = innermost_user_site(tb)
    crash.frames = [f"{f.f_code.co_filename.rsplit('/', 1)[-1]}:{f.f_lineno} in {f.f_code.co_name}"
                    for f in user_frames(tb)]
    if found is not None:
        site, frame = found
        crash.site = str(site)
        crash.operands = operands_on_line(site, frame)
    if failed_module is not None:
        crash.module = f"{failed_module.name} {module_text(failed_module.module)}"
        crash.module_inputs = [d for d in (describe(v) for v in failed_module.inputs) if d]
    if failed_loss is not None:
        crash.loss = (f"{failed_loss.function}(input {describe(failed_loss.input)}, "
                      f"target {describe(failed_loss.target)})")
    if is_out_of_memory(exc):
        _out_of_memory(crash, exc)
    elif failed_loss is not None and _loss_findings(crash, failed_loss, model_batch, one_hot,
                                                    found[1] if found is not None else None,
                                                    model_call[0] if model_call is not None else None):
        pass
    elif failed_module is not None and _module_findings(crash, failed_module):
        pass
    elif ONE_VALUE_PER_CHANNEL in str(exc):
        _single_sample_batch(crash, failed_module, loader)
    elif _second_backward(exc):
        _carried_graph(crash, model_call, user_frames(tb))
    elif DEEPCOPY_NON_LEAF in str(exc):
        _stored_outputs(crash, model_call[0] if model_call is not None else None)
    elif INPLACE.search(str(exc)):
        _modified_in_place(crash, INPLACE.search(str(exc)), user_frames(tb), found[0] if found else None)
    elif _no_graph(exc) and graphless_after and (entry := _parting_call(tb, graphless_after[1])) is not None:
        _backward_in_evaluation(crash, graphless_after[0], entry)
    elif _no_graph(exc):
        crash.kind, crash.cause = "no_graph", "no_gradient_to_weights"
        crash.findings.append("backward() was called on a loss that does not require grad: no autograd path "
                              "leads from it to any parameter")
    elif _sample_data_error(crash, exc, tb):
        pass
    elif _index_past_classes(crash, exc, model_call[0] if model_call is not None else None,
                             found[1] if found is not None else None, model_batch):
        pass
    elif _index_past_size(crash, exc, loader):
        pass
    elif isinstance(exc, StopIteration) and crash.site and "next(" in crash.site:
        _loader_exhausted(crash, loader)
    elif isinstance(exc, (RuntimeError, ValueError, IndexError)) and SHAPE_MESSAGE.search(str(exc)) and \
            evaluated_after is not None and _raised_on_user_line(tb):
        _evaluation_shape_error(crash, str(exc), evaluated_after)
    elif isinstance(exc, (RuntimeError, ValueError, IndexError)) and SHAPE_MESSAGE.search(str(exc)):
        crash.kind, crash.cause = "shape", "shape_mismatch"
        reshape = _folded_reshape(str(exc), model_batch) or _reshape_finding(str(exc))
        if reshape is not None and reshape[2]:
            crash.cause = "batch_folded"
        crash.findings.append(reshape[0] if reshape else
                              "a shape error raised by torch; the operands on the failing line are listed")
        crash.findings += _one_hot_hint(one_hot)
        crash.fix = ("assert the operands' shapes just before the failing line "
                     f"({crash.site.split(' ')[0] if crash.site else 'see the traceback'}), fix the layer size or the "
                     "reshape that disagrees, then remove the assertion")
        if one_hot:
            site = next(iter(one_hot)).split(" ", 1)[0]
            crash.fix = f"pass the number of classes to F.one_hot at {site}: F.one_hot(labels, num_classes=C)"
        elif reshape:
            crash.fix = reshape[1]
    elif _read_empty_stdin(exc, found[0] if found else None):
        crash.findings.append("the script reads its standard input, which tuidebug does not connect here (the screen "
                              "and diagnose own the terminal): input() met the end of it at once")
        crash.fix = ("give the value another way (a command-line argument or an environment variable), or run it "
                     "under `tuidebug --headless`, which leaves stdin to the script")
    _raised_in_worker(crash, exc)
    return crash


def _raised_in_worker(crash: Crash, exc: BaseException) -> None:
    """An exception of a DataLoader's worker process (``worker_errors``): its own message and line, not the
    loop's ``for batch in loader:`` where the copy was raised."""
    error = read_worker_error(str(exc))
    if error is None:
        return
    crash.exception = f"{error.exception} (raised in DataLoader worker process {error.worker}, {error.role})"[:600]
    crash.operands = []  # the loop's variables there still hold the previous batch, not the one that failed
    crash.frames += [f"{site.short} in {site.function} (worker {error.worker})" for site in error.sites]
    dataset = failing_dataset(exc.__traceback__)
    sample = failing_sample(dataset, error) if dataset is not None else None
    if sample is not None and isinstance(sample[1], str):
        owner = type(dataset).__name__
        crash.findings.append(f"sample {sample[0]} of {owner} holds None ({sample[1]} of what its __getitem__ "
                              f"returns): the DataLoader's collate ({error.innermost}) cannot put None in a batch")
        crash.fix = (f"make {owner}.__getitem__ return a value for sample {sample[0]} and those like it, or leave them "
                     "out (filter them where the dataset is built, or give the DataLoader a collate_fn that drops them)")
    elif sample is not None:
        index, again = sample
        same = str(again).split() == error.exception.split(": ", 1)[-1].split()  # its type may be module-qualified
        crash.findings.append(f"sample {index} of the dataset is one that fails: loading it again in the script's own "
                              "process raises " + ("the same error" if same else f"{type(again).__name__}: {again}"))
        found = innermost_user_site(again.__traceback__)
        if found is not None:  # the loading code's values for that sample, which the worker's copy cannot give
            crash.operands = operands_on_line(*found)
        again.__traceback__ = None
    if error.site is None:
        return
    crash.site = str(error.site)
    which = f"sample {sample[0]} and those like it" if sample is not None else "the sample that breaks it"
    if crash.kind == "other" and not crash.fix:
        crash.fix = (f"fix {error.site.short} `{error.site.text}` for {which}; with num_workers=0 the same error is "
                     "raised in the script's own process, where the sample's values can be read")


def _raised_on_user_line(tb: TracebackType | None) -> bool:
    """The exception came from a torch op on a line of the user's own code (its innermost frame is theirs),
    not from inside a library (a DataLoader's collate stacking images of different sizes)."""
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return is_user_file(tb.tb_frame.f_code.co_filename)


def _evaluation_shape_error(crash: Crash, message: str, steps: int) -> None:
    """A shape error outside the model's forward and the loss, raised with the model in eval mode after
    training steps ran: the evaluation's own code (a metric's reshape, a report) failed, not the shapes
    the training step feeds through the model and the loss (the protocol's shape checks). It stays a
    crash of that line; the reshape's reading is evidence."""
    reshape = _reshape_finding(message)
    crash.findings.append(f"raised in the evaluation (the model in eval mode) after {steps} training steps, outside "
                          "the model's forward and the loss: the training ran, the evaluation's own code failed")
    crash.findings.append(reshape[0] if reshape else "a shape error raised by torch; the operands on the failing line "
                          "are listed")


def _backward_in_evaluation(crash: Crash, steps: int, entry: Site) -> None:
    """A backward on a loss without a graph, with gradients off, after training steps ran, reached by another path
    than the training's backward (an evaluation under torch.no_grad calling a loss helper that always calls it).
    The training had its graph at every step: a crash of the evaluation, not a model cut off from its loss."""
    crash.findings.append(f"backward() was called on a loss without a graph after {steps} training steps, with gradients "
                          f"off (torch.no_grad), from {entry}, where the call parts from the training's: the "
                          "training's losses had their graphs, this one has none, so its backward raises")
    crash.fix = (f"call backward only where the step trains: guard {crash.failing_line}'s backward with "
                 f"`if torch.is_grad_enabled():`, or give the evaluation at {entry.short} a loss call without it")


def _parting_call(tb: TracebackType | None, training: list[tuple[str, int]]) -> Site | None:
    """The user's call in the traceback where its path parts from the training backward's (outermost first),
    None where it follows that path all the way (the training's own backward raised)."""
    for frame, (path, line) in zip(user_frames(tb), training):
        if (frame.f_code.co_filename, frame.f_lineno) != (path, line):
            return Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
    return None


def _read_empty_stdin(exc: BaseException, site: Site | None) -> bool:
    """The script read its standard input where tuidebug gives it none (``input()`` met its end, or the
    empty line read from ``sys.stdin`` did not parse)."""
    if sys.stdin is not None and sys.stdin.isatty():
        return False
    reads = site is not None and ("input(" in site.text or "stdin" in site.text)
    return isinstance(exc, EOFError) or (reads and isinstance(exc, ValueError))


def operands_on_line(site: Site, frame: FrameType) -> list[str]:
    """The names on the failing line with their values' shapes (``x: (64, 2048) float32``)."""
    found = []
    for name in _names(site.text):
        value = frame_value(name, frame)
        text = describe(value) if value is not MISSING else None
        if text is not None:
            found.append(f"{name}: {text}")
        if len(found) >= MAX_OPERANDS:
            break
    return found


def _names(line: str) -> list[str]:
    """Names and attribute chains on a line of source (``self.fc``, ``x``), in order, once each."""
    text = line.strip()
    bare = re.sub(r"^(elif|if|while|for|with|return|assert|yield)\b", "", text.rstrip(":")).strip()
    for candidate in (text, bare):
        try:
            tree = ast.parse(candidate)
            break
        except SyntaxError:
            continue
    else:
        return list(dict.fromkeys(re.findall(r"[A-Za-z_][\w.]*", text)))
    chains = [(node.col_offset, c) for node in ast.walk(tree) if isinstance(node, ast.Attribute) and (c := attribute_chain(node))]
    heads = {chain.split(".")[0] for _, chain in chains}
    plain = [(node.col_offset, node.id) for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id not in heads]
    outermost = [(offset, chain) for offset, chain in chains if not any(
        other != chain and other.startswith(chain + ".") for _, other in chains)]
    return list(dict.fromkeys(name for _, name in sorted(outermost + plain)))


# --- classification by the tensors ------------------------------------------------------------

RESHAPES = re.compile(r"\.(view|reshape|flatten)\(")


def _reshaped_at(frame: FrameType | None, target: torch.Tensor) -> tuple[str, Site] | None:
    """(the variable, the line) where the failing frame reshapes the variable that holds ``target``: the
    last line from the start of the function to the failing one that assigns it with a view / reshape /
    flatten."""
    if frame is None:
        return None
    path, first, last = frame.f_code.co_filename, frame.f_code.co_firstlineno, frame.f_lineno
    found = None
    for name in [name for name, value in frame_locals(frame).items() if value is target]:
        assigned = re.compile(rf"^\s*{re.escape(name)}\s*=")
        for line in range(first, last + 1):
            text = linecache.getline(path, line)
            if assigned.match(text) and RESHAPES.search(text):
                found = (name, Site(path, line, frame.f_code.co_name))
    return found


def _classes_last(input: torch.Tensor, target: torch.Tensor) -> bool:
    """A sequence model's (N, L, C) scores given to a class loss with (N, L) targets: the loss reads dim 1 as
    the classes."""
    return input.dim() >= 3 and target.shape == input.shape[:-1] and target.shape != (input.shape[0], *input.shape[2:])


def _scores_classes_last(crash: Crash, function: str, input: torch.Tensor, target: torch.Tensor) -> None:
    crash.kind, crash.cause = "shape", "shape_mismatch"
    crash.findings.append(f"{function} takes the classes in dim 1, (N, C, d1, ...): the input {shape_text(input.shape)} "
                          f"has its {int(input.shape[-1])} classes last, for targets {shape_text(target.shape)}")
    crash.fix = f"move the classes to dim 1: {classes_moved_to_dim1(function, tuple(input.shape), 'output')}"


def _class_indicators(crash: Crash, function: str, input: torch.Tensor, target: torch.Tensor) -> None:
    """Integer 0/1 targets of the scores' shape given to a class loss: one indicator per class. With one 1 a
    row they are one-hot (the index is wanted); with several, the task is multi-label (a loss per class)."""
    one_hot = bool((target.sum(dim=1) == 1).all())  # the classes are dim 1, as the loss reads the scores
    crash.kind, crash.cause = "shape", "target_out_of_range"
    what = "one-hot labels" if one_hot else "multi-hot labels (several classes on at once: a multi-label task)"
    crash.findings.append(f"{function} got {str(target.dtype).replace('torch.', '')} targets of the scores' shape "
                          f"{shape_text(target.shape)} holding 0/1: {what}; it takes one class index per example "
                          f"(shape {shape_text(input.shape[:1])}) or float class probabilities")
    crash.fix = ("pass the class index: target.argmax(dim=1)" if one_hot else
                 "a multi-label task takes a loss per class: nn.BCEWithLogitsLoss()(scores, target.float()) "
                 "(sigmoid per class), not cross_entropy's softmax over the classes")


def _output_width(crash: Crash, model: torch.nn.Module | None, input: torch.Tensor, target: torch.Tensor) -> bool:
    """A loss given (N, C) outputs for (N, K) targets, K != C: the model's last layer of C outputs is sized
    for another task (a label list of another data set). Names that layer, where it is made and where the
    model is built with that size."""
    if model is None or input.dim() != 2 or target.dim() != 2 or input.shape[0] != target.shape[0]:
        return False
    width, wanted = input.shape[-1], target.shape[-1]
    layer = _output_layer(crash, model, width)
    if layer is None:
        return False
    crash.findings[-1] += f"; the targets have {wanted}"
    name, built = layer
    crash.fix = (f"give `{name}` {wanted} outputs, one per target column: the size it is built with"
                 + (f" at {built}" if built else "") + f" gives {width}")
    return True


def _output_layer(crash: Crash, model: torch.nn.Module | None, width: int) -> tuple[str, str | None] | None:
    """The model's last layer of ``width`` outputs (``out_features``), named in the findings with where it is
    made and where the model is built: its name and the first building line, or None."""
    if model is None:
        return None
    layer = next(((name, module) for name, module in reversed(list(model.named_modules()))
                  if name and width in (getattr(module, "out_features", None), getattr(module, "out_channels", None))),
                 None)
    if layer is None:
        return None
    name, module = layer
    made = module_site(model, name)
    crash.findings.append(f"the model's {width} outputs a sample come from `{name}` ({module_text(module)})"
                          + (f", made at {made}" if made else ""))
    try:
        path = inspect.getsourcefile(type(model))
    except TypeError:
        path = None
    built = calls_named(path, {type(model).__name__}) if path and is_user_file(path) else []
    crash.findings += [f"{type(model).__name__} is built at {site}" for site in built[:2]]
    return name, (built[0].short if built else None)


def _loss_findings(crash: Crash, failed: FailedLoss, model_batch: int | None, one_hot: dict[str, set[int]],
                   frame: FrameType | None = None, model: torch.nn.Module | None = None) -> bool:
    input, target, function = failed.input, failed.target, failed.function
    if not isinstance(input, torch.Tensor) or not isinstance(target, torch.Tensor):
        return False
    integer_target = not target.is_floating_point() and target.dtype != torch.bool
    if function in CLASS_LOSSES and integer_target and _classes_last(input, target):
        _scores_classes_last(crash, function, input, target)
        return True
    if function in CLASS_LOSSES and integer_target and target.shape == input.shape and input.dim() >= 2 \
            and bool(((target == 0) | (target == 1)).all()):
        _class_indicators(crash, function, input, target)
        return True
    if function in CLASS_LOSSES and integer_target and input.dim() >= 2 and target.numel():
        classes, low, high = int(input.shape[1]), int(target.min()), int(target.max())
        if high >= classes or (low < 0 and low != -100):
            crash.kind, crash.cause = "shape", "target_out_of_range"
            crash.findings.append(f"the labels run {low}..{high} but the model outputs {classes} classes "
                                  f"(valid labels 0..{classes - 1}) at {function}")
            crash.fix = (f"make the labels 0-based (e.g. `y - 1` if they run 1..{classes}) or give the last layer "
                         f"{high + 1} outputs, so that every label is below the number of classes")
            return True
    if function in CLASS_LOSSES and target.is_floating_point() and target.shape != input.shape:
        crash.kind, crash.cause = "shape", "target_out_of_range"
        crash.findings.append(f"{function} got float targets of shape {shape_text(target.shape)} for input "
                              f"{shape_text(input.shape)}: it expects class indices (int64, shape "
                              f"{shape_text(input.shape[:1])}) or probabilities of the input's shape")
        crash.fix = "pass class indices: target.argmax(dim=1).long() (or labels.long()), not one-hot floats"
        return True
    if function in BINARY_LOSSES and not target.is_floating_point():
        crash.kind, crash.cause = "shape", "target_out_of_range"
        crash.findings.append(f"{function} got {str(target.dtype).replace('torch.', '')} targets: it needs float "
                              "targets of the input's shape")
        crash.fix = "convert the targets: target.float() (and target.view_as(input) if the shapes differ)"
        return True
    if input.dim() and target.dim() and input.shape[0] != target.shape[0]:
        crash.kind = "shape"
        if model_batch is not None and input.shape[0] == model_batch and target.numel() == input.numel():
            crash.cause = "batch_folded"
            crash.findings.append(
                f"{function}: the target {shape_text(target.shape)} holds the {target.numel()} values of the output "
                f"{shape_text(input.shape)} for the batch of {model_batch}: a view/reshape of the target folds its "
                "batch dimension")
            reshaped = _reshaped_at(frame, target)
            name, where = (reshaped[0], f" at {reshaped[1].short}") if reshaped else ("target", "")
            if reshaped:
                crash.findings.append(f"`{name}` is reshaped at {reshaped[1]}")
            crash.fix = (f"keep the target's batch dimension first{where}: {name}.view({name}.size(0), -1) (or "
                         f"{name}.flatten(1)), never view(1, -1) or view(-1)")
        elif model_batch is not None and target.shape[0] == model_batch:
            crash.cause = "batch_folded"
            crash.findings.append(
                f"the model was called with {model_batch} examples but its output has {input.shape[0]} rows "
                f"({shape_text(input.shape)}): a view/reshape in the forward folds the batch dimension")
            crash.fix = ("keep the batch dimension first when flattening: x.view(x.size(0), -1) or x.flatten(1), "
                         "never x.view(-1, features) with a wrong feature count")
        else:
            crash.cause = "shape_mismatch"
            crash.findings.append(f"{function}: input has {input.shape[0]} rows {shape_text(input.shape)} but the "
                                  f"target has {target.shape[0]} {shape_text(target.shape)}")
            crash.fix = "make the model's output and the target cover the same examples (same first dimension)"
        return True
    if input.shape != target.shape:
        crash.kind, crash.cause = "shape", "shape_mismatch"
        crash.findings.append(f"{function}: input {shape_text(input.shape)} and target {shape_text(target.shape)} "
                              "disagree")
        widths = next((sorted(w) for site, w in one_hot.items() if len(w) > 1 or target.shape[-1] in w), None)
        if widths is not None and target.dim() and target.shape[-1] in widths:
            site = next(s for s, w in one_hot.items() if target.shape[-1] in w)
            crash.findings.append(f"the target was one-hot encoded without num_classes at {site}: its width "
                                  f"follows the largest label of each batch (seen {widths})")
            crash.fix = f"give the number of classes: F.one_hot(labels, num_classes={input.shape[-1]})"
        elif not _output_width(crash, model, input, target):
            crash.fix = f"reshape the target or the output so that both are {shape_text(input.shape)}"
        return True
    return False


ONE_VALUE_PER_CHANNEL = "Expected more than 1 value per channel when training"


@dataclass
class LoaderShape:
    """What decides the size of a DataLoader's last batch, and where the loader was made."""

    dataset_length: int | None
    batch_size: int | None
    drop_last: bool
    created: str | None


def _single_sample_batch(crash: Crash, failed: FailedModule | None, loader: LoaderShape | None) -> None:
    """BatchNorm in training mode normalises each channel over the batch: a batch of one sample (after
    global pooling, one value per channel) has no variance. Not a wrong shape: the batch is too small,
    and it is almost always the last batch of an epoch (the data set is 1 more than a multiple of the
    batch size)."""
    where = f"{failed.name} ({type(failed.module).__name__})" if failed is not None else "a BatchNorm layer"
    crash.findings.append(f"{where} got a batch of 1 in training mode: it normalises each channel over the batch, "
                          "and one value per channel has no variance")
    made = f" (made at {loader.created.split(' ', 1)[0]})" if loader is not None and loader.created else ""
    if loader is not None and loader.dataset_length and loader.batch_size and not loader.drop_last:
        n, b = loader.dataset_length, loader.batch_size
        if n % b == 1:
            crash.findings.append(f"the DataLoader{made} splits {n} samples into batches of {b}: the last batch of "
                                  f"every epoch holds {n} - {n // b} x {b} = 1 sample")
    crash.fix = (f"pass drop_last=True to the training DataLoader{made} so that its last batch of a single sample "
                 "is skipped (or keep batches above 1 sample another way: a data set size that is not 1 more than a "
                 "multiple of the batch size)")


def _loader_exhausted(crash: Crash, loader: LoaderShape | None) -> None:
    """``next(batch_iterator)`` past the end of one pass: an iterator over a DataLoader gives one epoch's
    batches, and a loop counted in iterations (ssd.pytorch's MAX_ITER) asks for more."""
    line = crash.failing_line
    made = f" (made at {loader.created.split(' ', 1)[0]})" if loader is not None and loader.created else ""
    if loader is not None and loader.dataset_length and loader.batch_size:
        n, b = loader.dataset_length, loader.batch_size
        batches = n // b if loader.drop_last else -(-n // b)
        crash.findings.append(f"next() at {line} ran past the last batch of its iterator: one pass over the "
                              f"DataLoader{made} is {n} samples in batches of {b} = {batches} batches, and the loop "
                              "asks for more")
    else:
        crash.findings.append(f"next() at {line} ran past the last item of its iterator: one pass over a DataLoader "
                              "ends after its last batch, and the loop asks for more")
    crash.fix = (f"at {line}: start a new pass when the iterator runs out (`try: batch = next(it)` / `except "
                 "StopIteration: it = iter(loader); batch = next(it)`), or loop over epochs of the DataLoader")


TENSOR_INDEX = re.compile(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)")


NUMPY_SHAPE = re.compile(r"for array|operands could not be broadcast together|cannot reshape array")
SAMPLE_INDEX_NAMES = ("index", "idx", "i", "item", "ind")


def _sample_data_error(crash: Crash, exc: BaseException, tb: TracebackType | None) -> bool:
    """numpy's shape error in a Dataset's ``__getitem__`` (a transform, an annotation loader): one sample's data
    is not shaped as the code assumes (an image without objects makes an empty annotation array of shape (0,), a
    grayscale image has two dims). The run trains until that sample comes: a data bug, not the model's shapes."""
    if not isinstance(exc, (IndexError, ValueError)) or not NUMPY_SHAPE.search(str(exc)):
        return False
    loading = None
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "__getitem__" and is_user_file(tb.tb_frame.f_code.co_filename):
            loading = (tb.tb_frame, tb.tb_lineno)
        tb = tb.tb_next
    if loading is None:
        return False
    frame, line = loading
    scope = frame_locals(frame)
    index = next((scope[name] for name in SAMPLE_INDEX_NAMES if isinstance(scope.get(name), int)), None)
    sample = f"sample {index}" if index is not None else "a sample"
    owner = type(scope["self"]).__name__ if "self" in scope else "the Dataset"
    where = crash.failing_line
    crash.findings.append(f"raised while loading {sample} of {owner} ({owner}.__getitem__ at "
                          f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{line}): numpy found that sample's data "
                          f"shaped otherwise than the code at {where} assumes" + (
                              f" ({'; '.join(crash.operands)})" if crash.operands else ""))
    crash.fix = (f"look at {sample}'s data: make the code at {where} handle its shape (an empty list of annotations "
                 "becomes an array of shape (0,): build it with .reshape(-1, columns)), or leave such samples out "
                 "where the dataset is built")
    return True


def _index_past_classes(crash: Crash, exc: BaseException, model: torch.nn.Module | None,
                        frame: FrameType | None = None, batch: int | None = None) -> bool:
    """An index past the model's classes: a gather (or an index) into a dimension after the batch whose size is
    the model's output width, at an index beyond it (t2vec's vocabulary of 404 cells for a model built with
    402 outputs, its targets' neighbours read from the log-probabilities); or a table of one row a class (a
    one-hot ``torch.eye(C)[labels]``) read at a label past it, where a per-sample integer tensor of the failing
    line holds that very index. The indices come from the data's labels; the model is sized for fewer classes
    than they hold."""
    match = TENSOR_INDEX.search(str(exc))
    if not isinstance(exc, (RuntimeError, IndexError)) or match is None:
        return False
    index, dim, size = (int(group) for group in match.groups())
    labels = _labels_holding(frame, index, batch) if dim == 0 else None
    if (dim == 0 and labels is None) or index < size:
        return False
    first = len(crash.findings)
    layer = _output_layer(crash, model, size)
    if layer is None:
        return False
    name, built = layer
    line = crash.failing_line
    crash.kind, crash.cause = "shape", "target_out_of_range"
    if labels is None:
        crash.findings.insert(first, f"index {index} in dimension {dim} at {line} is past the model's {size} classes "
                              f"(valid 0..{size - 1}): the labels reach class {index}")
        crash.fix = (f"build `{name}` with as many outputs as the data has classes (at least {index + 1}): the size it "
                     f"is built with{f' at {built}' if built else ''} gives {size}; or keep the labels below {size}")
        return True
    label, tensor = labels
    counted = int((tensor == index).sum())
    ignore = f" ({index} is the value labels commonly give what the loss should ignore)" if index in IGNORE_LABELS \
        else ""
    crash.findings.insert(first, f"`{label}` ({describe(tensor)}) holds label {index} at {counted} entries, and {line} "
                          f"reads a row per label from a table of the model's {size} classes (valid 0..{size - 1})"
                          f"{ignore}")
    crash.fix = (f"at {line}: leave the labels past class {size - 1} out before `{label}` indexes (mask them, e.g. "
                 f"`{label}.masked_fill({label} >= {size}, 0)` with those entries weighted out), or build "
                 f"`{name}` with as many outputs as the labels have classes")
    return True


IGNORE_LABELS = (255, -1, -100)


def _labels_holding(frame: FrameType | None, index: int, batch: int | None) -> tuple[str, torch.Tensor] | None:
    """The failing frame's per-sample integer tensor (first dim the batch) whose largest value is ``index``."""
    if frame is None or not batch:
        return None
    for name, value in frame_locals(frame).items():
        if isinstance(value, torch.Tensor) and not value.is_floating_point() and value.dtype != torch.bool \
                and value.dim() and value.shape[0] == batch and 0 < value.numel() <= 10_000_000 \
                and int(value.max()) == index:
            return name, value
    return None


def _index_past_size(crash: Crash, exc: BaseException, loader: LoaderShape | None) -> bool:
    """A tensor read at a fixed index it does not have (``x[1]`` of a batch of one). Not a shape mismatch
    between operands: the line assumes a size, and a batch smaller than the rest (an epoch's last, when the
    data set is not a multiple of the batch size) has fewer rows."""
    match = TENSOR_INDEX.search(str(exc))
    if not isinstance(exc, IndexError) or match is None:
        return False
    index, dim, size = (int(group) for group in match.groups())
    line = crash.failing_line
    crash.findings.append(f"the line reads index {index} of dimension {dim}, which holds {size} here")
    crash.fix = (f"at {line}: keep the index below the size of dimension {dim} (bound it by the tensor's own size, "
                 f"x.size({dim}), rather than a fixed number)")
    if dim != 0 or loader is None or not loader.dataset_length or not loader.batch_size or loader.drop_last:
        return True
    n, b = loader.dataset_length, loader.batch_size
    if n % b == size < b:
        made = f" (made at {loader.created.split(' ', 1)[0]})" if loader.created else ""
        crash.findings.append(f"the DataLoader{made} splits {n} samples into batches of {b}: the last batch of every "
                              f"epoch holds {n} - {n // b} x {b} = {size}")
        crash.fix = (f"at {line}: index within the batch's own size (index {index} needs {index + 1} rows; the "
                     f"epoch's last batch has {size}), or pass drop_last=True to the DataLoader{made}")
    return True


RESHAPE = re.compile(r"shape '\[([-\d, ]+)\]' is invalid for input of size (\d+)")


def _folded_reshape(message: str, batch: int | None) -> tuple[str, str, bool] | None:
    """A view/reshape that infers the batch (``-1`` first) while its fixed sizes hold several examples' worth
    of values (``view(-1, 8*16*30*30)`` on a batch of 8 examples of 16*30*30): it folds the batch into one
    row. Every full batch trained as a single example; only a smaller batch (an epoch's last) cannot fill
    the row, and raises."""
    match = RESHAPE.search(message)
    if not match or not batch:
        return None
    dims, size = [int(d) for d in match.group(1).split(",")], int(match.group(2))
    if size % batch or len(dims) < 2 or dims[0] != -1 or min(dims[1:]) < 1:
        return None
    per_example, folded = size // batch, math.prod(dims[1:])
    if folded <= per_example or folded % per_example:
        return None
    examples = folded // per_example
    return (f"the reshape to {tuple(dims)} asks for {folded} = {examples} x {per_example} values a row: an "
            f"example here has {per_example}, so the size holds {examples} examples and folds a batch of {examples} "
            f"into one row (every full batch trained as one example); this batch of {batch} cannot fill it",
            f"keep the batch dimension first: .view(x.size(0), -1) ({per_example} values per example), and size the "
            f"next layer for {per_example} inputs", True)


def _reshape_finding(message: str) -> tuple[str, str, bool] | None:
    """A view/reshape to a fixed shape that the input does not fill: which dimension is off, and by how
    much (a batch size written into the shape meets the last, smaller batch of an epoch)."""
    match = RESHAPE.search(message)
    if not match:
        return None
    dims = [int(d) for d in match.group(1).split(",")]
    size = int(match.group(2))
    for index, dim in enumerate(dims):
        others = 1
        for other in dims[:index] + dims[index + 1:]:
            others *= other if other > 0 else 1
        if dim > 0 and others and size % others == 0 and size // others != dim:
            actual = size // others
            finding = (f"the reshape asks for {dim} in dimension {index} of {tuple(dims)} but the input holds "
                       f"{actual} there ({size} values): a size written into the shape")
            fix = (f"let the reshape infer that dimension: .view(-1, ...) or x.size({index}) instead of {dim}"
                   + ("; if it is the batch size, the last batch of an epoch is smaller (or pass drop_last=True to "
                      "the DataLoader)" if index == 0 else ""))
            return finding, fix, False
    return None


def _one_hot_hint(one_hot: dict[str, set[int]]) -> list[str]:
    """One-hot encodings made without num_classes: their width follows each batch's largest label."""
    return [f"F.one_hot was called without num_classes at {site} (widths seen: {sorted(widths)}): the width follows "
            "the largest label of each batch; pass num_classes" for site, widths in one_hot.items()]


def _module_findings(crash: Crash, failed: FailedModule) -> bool:
    module, inputs = failed.module, [v for v in failed.inputs if isinstance(v, torch.Tensor)]
    if not inputs:
        return False
    x = inputs[0]
    name = failed.name
    if isinstance(module, torch.nn.Linear) and x.dim() and x.shape[-1] != module.in_features:
        crash.kind, crash.cause = "shape", "shape_mismatch"
        crash.findings.append(f"{name} is Linear(in_features={module.in_features}) but its input is "
                              f"{shape_text(x.shape)}: the last dimension is {x.shape[-1]}")
        if x.dim() > 2:
            crash.fix = (f"flatten the input before {name}: x = x.flatten(1) (then in_features="
                         f"{int(torch.tensor(x.shape[1:]).prod())})")
        else:
            crash.fix = (f"make {name} take the input it gets: nn.Linear(in_features={x.shape[-1]}, "
                         f"out_features={module.out_features})")
        return True
    if isinstance(module, torch.nn.modules.conv._ConvNd) and x.dim() >= 2:
        channels = x.shape[1] if x.dim() == module.weight.dim() else x.shape[0]
        if channels != module.in_channels:
            crash.kind, crash.cause = "shape", "shape_mismatch"
            crash.findings.append(f"{name} is {type(module).__name__}(in_channels={module.in_channels}) but its "
                                  f"input {shape_text(x.shape)} has {channels} channels")
            crash.fix = (f"give {name} in_channels={channels}, or feed it (batch, {module.in_channels}, ...) "
                         "(channels first: x.permute(0, 3, 1, 2) for channels-last images)")
            return True
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and x.dim() >= 2 and \
            x.shape[1] != module.num_features:
        crash.kind, crash.cause = "shape", "shape_mismatch"
        features = module.num_features
        crash.findings.append(f"{name} is {type(module).__name__}({features}): it normalises dim 1 of its input as "
                              f"{features} features, but its input {shape_text(x.shape)} has {x.shape[1]} there")
        if x.dim() == 3 and x.shape[-1] == features:
            crash.fix = (f"the features of {shape_text(x.shape)} are last: give {name} "
                         f"x.reshape(-1, {features}) and reshape its output back (or x.transpose(1, 2) and back)")
        else:
            crash.fix = f"give {name} num_features={x.shape[1]}, or feed it (batch, {features}, ...)"
        return True
    if isinstance(module, RNN) and SHAPE_MESSAGE.search(crash.exception):  # not oneDNN's "could not create a
        # primitive descriptor" (a bfloat16 LSTM on a CPU without bfloat16): a backend's limit, not a layout
        return _rnn_findings(crash, failed, x, inputs[1:] + [v for v in failed.inputs[1:2] if isinstance(v, tuple)])
    if isinstance(module, torch.nn.Embedding) and not x.is_floating_point() and x.numel():
        high = int(x.max())
        rows, width = module.num_embeddings, module.embedding_dim
        if high >= rows and failed.step > 1 and high < width:
            # The steps before trained on ids that all fit the table; this id is below the embedding's width: one
            # the model picked from its own outputs (generation), which are embedding_dim wide, not one per id.
            crash.findings.append(f"{name} has num_embeddings={rows} but got index {high}, after {failed.step - 1} "
                                  f"training steps whose ids fit: an id picked from the model's own outputs, which "
                                  f"are {width} wide (its embedding_dim), not {rows}")
            crash.fix = (f"make the outputs the ids are picked from {rows} wide, one per id: nn.Embedding({rows}, "
                         f"{rows}) where its rows are the logits, or a last nn.Linear(..., {rows})")
            return True
        if high >= rows and failed.step > 1:
            # Not the table's shape, which fitted every step before: ids the data had not given yet (an unknown
            # word's id past the vocabulary, a validation set's rare ids); the crash stays an exception.
            crash.findings.append(f"{name} has num_embeddings={rows} but got index {high}, after {failed.step - 1} "
                                  "steps whose ids fit: this batch holds an id the ones before did not (an unknown "
                                  "word's id set past the vocabulary, a rare id of another split)")
            crash.fix = (f"give every id a row: nn.Embedding({high + 1}, {width}) (an unknown-word id of "
                         f"len(vocab) needs len(vocab) + 1 rows), or map unseen ids to a row inside the table")
            return True
        if high >= rows:
            crash.kind, crash.cause = "shape", "shape_mismatch"
            crash.findings.append(f"{name} has num_embeddings={rows} but got index {high}")
            crash.fix = f"size the embedding for every index: nn.Embedding({high + 1}, {width})"
            return True
    return False


def _rnn_findings(crash: Crash, failed: FailedModule, x: torch.Tensor, hidden: list[Any]) -> bool:
    module, name = failed.module, failed.name
    crash.kind, crash.cause = "shape", "shape_mismatch"
    if x.shape[-1] != module.input_size:
        crash.findings.append(f"{name} is {type(module).__name__}(input_size={module.input_size}) but its input "
                              f"{shape_text(x.shape)} has {x.shape[-1]} features")
        crash.fix = f"give {name} input_size={x.shape[-1]} or fix the features fed to it"
        return True
    states = [t for h in hidden for t in (h if isinstance(h, tuple) else (h,)) if isinstance(t, torch.Tensor)]
    layout = "(batch, seq, feature)" if module.batch_first else "(seq, batch, feature)"
    batch = x.shape[0] if module.batch_first else (x.shape[1] if x.dim() == 3 else None)
    crash.findings.append(f"{name} has batch_first={module.batch_first}: it reads its input {shape_text(x.shape)} as "
                          f"{layout}, so the batch is {batch}")
    if states:
        crash.findings.append("its initial state is " + ", ".join(shape_text(s.shape) for s in states) +
                              f": expected (num_layers*directions, {batch}, {module.hidden_size})")
    if states and x.dim() == 3 and not module.batch_first and states[0].shape[1] == x.shape[0]:
        crash.fix = (f"the input is batch-first: build {name} with batch_first=True "
                     f"(nn.{type(module).__name__}(..., batch_first=True)), or pass x.transpose(0, 1)")
    elif states:
        crash.fix = f"build the initial state as torch.zeros(num_layers * directions, {batch}, {module.hidden_size})"
    else:
        crash.fix = "check the RNN's input layout (batch_first) and its input_size"
    return True


def _second_backward(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and "backward through the graph a second time" in str(exc)


def _carried_graph(crash: Crash, model_call: tuple[torch.nn.Module, tuple[tuple, dict]] | None,
                   frames: list[FrameType]) -> None:
    """A second backward through a freed graph: the tensor that carried an earlier step's graph into
    this one. The usual carrier is a model input made by the model's previous call (an RNN's hidden
    state fed back without ``.detach()``); it is named by its argument on the user's call line."""
    crash.findings.append("a tensor made in an earlier step still holds that step's graph, which its backward "
                          "already freed; this step's backward runs into it")
    carriers = _graph_carrying_inputs(model_call[1]) if model_call else []
    for key in carriers:
        found = _argument_source(model_call[0], key, frames)
        if found is None:
            continue
        text, site = found
        crash.findings.append(f"the model's input `{text}` (passed at {site}) has a grad_fn: it comes out of an "
                              "earlier step's graph")
        crash.fix = (f"detach `{text}` before it is fed back: `{text} = {text}.detach()` before {site.short} "
                     "(for an LSTM's (h, c): `tuple(t.detach() for t in state)`); retain_graph=True only hides this")
        return
    crash.fix = ("detach the tensor kept from an earlier step (a hidden state, a running total of the loss, a cached "
                 "output) with `.detach()` where it is kept (or add `.item()` to a running loss); retain_graph=True only "
                 "hides this")


def _graph_carrying_inputs(inputs: tuple[tuple, dict]) -> list[int | str]:
    """The positions (or keyword names) of the call's inputs that are, or hold, non-leaf tensors."""
    args, kwargs = inputs

    def carries(value: Any) -> bool:
        if isinstance(value, torch.Tensor):
            return value.grad_fn is not None
        if isinstance(value, (list, tuple)):
            return any(carries(v) for v in value)
        return False

    keys: list[int | str] = [i for i, value in enumerate(args) if carries(value)]
    return keys + [name for name, value in kwargs.items() if carries(value)]


def _argument_source(model: torch.nn.Module, key: int | str, frames: list[FrameType]) -> tuple[str, Site] | None:
    """The source text of argument ``key`` on the user's line that calls ``model`` (``h_state`` in
    ``out, h_state = rnn(x, h_state)``), found through the names the frames give the model."""
    for frame in reversed(frames):
        names = {name for scope in (frame_locals(frame), frame.f_globals) for name, value in list(scope.items())
                 if value is model}
        if not names:
            continue
        path = frame.f_code.co_filename
        source = "".join(linecache.getlines(path))
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names):
                continue
            argument = (node.args[key] if isinstance(key, int) and key < len(node.args) else
                        next((k.value for k in node.keywords if k.arg == key), None))
            if argument is not None and not isinstance(argument, ast.Starred):
                return ast.get_source_segment(source, argument), Site(path, node.lineno, frame.f_code.co_name)
    return None


def _stored_outputs(crash: Crash, model: torch.nn.Module | None) -> None:
    """copy.deepcopy of a model failed on a non-leaf tensor: a module keeps a tensor made in its forward (an
    attention map kept for plotting) with its graph. Each is named with the line that stores it."""
    crash.findings.append("copy.deepcopy copies only leaf tensors (parameters, buffers, tensors without a grad_fn): "
                          "the object copied holds a tensor made by autograd")
    if model is None:
        return
    for path, module, attr, value in _non_leaf_attributes(model)[:3]:
        stored = _assignment_site(type(module), attr)
        at = f", stored at {stored[0]}" if stored else ""
        crash.findings.append(f"`{path}` ({type(module).__name__}) holds a {shape_text(value.shape)} tensor with a "
                              f"grad_fn ({type(value.grad_fn).__name__}), kept from the last forward{at}")
        if not crash.fix:
            crash.fix = (f"store it without its graph: `self.{attr} = {stored[1]}.detach()` at {stored[0].short}"
                         if stored else f"store `self.{attr}` with .detach() in {type(module).__name__}.forward") + \
                ", or clear it before copying the model"


def _non_leaf_attributes(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module, str, torch.Tensor]]:
    """(path, module, attribute, tensor) of the tensors with a grad_fn that the model's modules keep as plain
    attributes."""
    found = []
    for name, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, torch.Tensor) and value.grad_fn is not None:
                found.append((f"{name}.{attr}" if name else attr, module, attr, value))
    return found


def _assignment_site(cls: type, attr: str) -> tuple[Site, str] | None:
    """The last line in ``cls``'s source that assigns ``self.<attr>`` something other than None, and what it
    assigns (``a`` in ``self.attn = a``)."""
    try:
        lines, first = inspect.getsourcelines(cls)
        path = inspect.getsourcefile(cls)
    except (OSError, TypeError):
        return None
    found = [(site, value) for site in assignments(path, attr, attribute=True) if first <= site.line < first + len(lines)
             and site.text.startswith(f"self.{attr}") and (value := assigned_value(site)) not in (None, "None")] \
        if path else []
    return found[-1] if found else None


def _modified_in_place(crash: Crash, match: re.Match, frames: list[FrameType], site: Site | None) -> None:
    """A tensor saved for backward was changed in place before that backward. A parameter of the shape and version
    the message gives is named with the optimizer whose step() changed it (a GAN whose discriminator steps between
    the generator's forward and its backward); else a variable of the user's of that shape and version."""
    shape = tuple(int(d) for d in match.group(1).split(",") if d.strip())
    made_by, version, saved = match.group(2), int(match.group(3)), int(match.group(4))
    scopes = [(name, value) for frame in reversed(frames) for scope in (frame_locals(frame), frame.f_globals)
              for name, value in list(scope.items()) if not name.startswith("__")]
    times = version - saved
    changed = (f"changed in place {'once' if times == 1 else f'{times} times'} after the forward that saved it for "
               "this backward")
    weights = _held_weights(scopes, shape, version) if made_by is None or WEIGHT_VIEWS.match(made_by) else []
    exact = [w for w in weights if tuple(w[2].shape) == shape] or [w for w in weights if tuple(w[2].shape) == shape[::-1]]
    if exact:
        label, module, weight, stepper = exact[0]
        others = len({id(w[2]) for w in exact}) - 1
        label_text = f"`{label}` {shape_text(weight.shape)}" + (f" (or one of {others} more weights of that shape "
                                                                 "and version)" if others else "")
        crash.findings.append(f"{label_text} was {changed}: an optimizer step updates the weights in place, and a "
                              "backward through an earlier forward needs them as they were")
        steps = [call for frame in frames for call in calls_of(frame.f_code.co_filename, stepper, "step")]
        before = [call for call in steps if site is not None and call.path == site.path and call.line < site.line]
        at = f" at {(before or steps)[-1]}" if steps else ""
        crash.findings.append(f"`{stepper}` holds `{label}`: `{stepper}.step()`{at}, before this backward, updates it "
                              f"in place after the forward through `{module}` saved it")
        crash.fix = (f"call `{stepper}.step()` only after every backward through `{module}` (take this backward first), "
                     f"or compute this loss with a new forward of `{module}` after the step")
        return
    variable = next((name for name, value in scopes if isinstance(value, torch.Tensor) and not value.is_inference()
                     and tuple(value.shape) == shape and value._version == version), None)
    what = (f"`{variable}` {shape_text(shape)}" if variable else f"a {shape_text(shape)} tensor") + \
        (f" (the output of {made_by})" if made_by else "")
    crash.findings.append(f"{what} was {changed} (`x += y`, `x[i] = v`, `x.relu_()`, nn.ReLU(inplace=True))")
    crash.fix = (f"make the in-place op on {what} out of place (x = x + y; x = x.clone() before writing into it; "
                 "inplace=False), or run once under torch.autograd.set_detect_anomaly(True) to see the op")


def _held_weights(scopes: list[tuple[str, Any]], shape: tuple[int, ...],
                  version: int) -> list[tuple[str, str, torch.Tensor, str]]:
    """(``model.layer.weight``, ``model``, the weight, the optimizer's name) of the weights of the frames' modules
    with ``shape``'s element count (a view of a weight shares its version counter) at ``version`` that an optimizer
    of the frames holds: its step() updates them in place."""
    optimizers = [(name, value) for name, value in scopes if isinstance(value, torch.optim.Optimizer)]
    found = []
    for name, value in scopes:
        if not isinstance(value, torch.nn.Module):
            continue
        for path, weight in value.named_parameters():
            if weight._version != version or weight.numel() != math.prod(shape):
                continue
            stepper = next((opt_name for opt_name, opt in optimizers
                            if any(p is weight for group in opt.param_groups for p in group["params"])), None)
            if stepper is not None:
                found.append((f"{name}.{path}", name, weight, stepper))
    return found


def _no_graph(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and "does not require grad" in str(exc)


def is_out_of_memory(exc: BaseException) -> bool:
    """torch's OutOfMemoryError, the CPU allocator's failure, Python's MemoryError, a cuDNN / cuBLAS allocation
    failure, or oneDNN's "could not create a primitive" once the process has used its address space up (its
    scratch buffer is allocated outside torch's allocator, whose failure message it does not pass on)."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc)
    if not isinstance(exc, RuntimeError):
        return False
    if "can't allocate memory" in text or "out of memory" in text.lower() or "_ALLOC_FAILED" in text:
        return True
    # "could not create a primitive descriptor for ..." is oneDNN's unsupported configuration, not an allocation
    return re.search(r"could not create a primitive(?! descriptor)", text) is not None and _address_space_used_up()


def _address_space_used_up() -> bool:
    """The process's peak virtual size reached ADDRESS_SPACE_FULL of its RLIMIT_AS (none set: never)."""
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY or limit <= 0:
        return False
    try:
        with open("/proc/self/status") as status:
            peak = next((int(line.split()[1]) * 1024 for line in status if line.startswith("VmPeak:")), None)
    except OSError:
        return False
    return peak is not None and peak >= ADDRESS_SPACE_FULL * limit


def _out_of_memory(crash: Crash, exc: BaseException) -> None:
    crash.kind, crash.cause = "oom", "out_of_memory"
    match = ALLOCATION.search(str(exc))
    if match:
        size = float(match.group(1)) * UNITS.get(match.group(2).lower(), 1)
        crash.memory["asked for"] = bytes_text(size)
        crash.memory["asked_bytes"] = int(size)
    if torch.cuda.is_initialized():
        index = torch.cuda.current_device()
        crash.memory.update({
            "allocated": bytes_text(torch.cuda.memory_allocated(index)),
            "reserved": bytes_text(torch.cuda.memory_reserved(index)),
            "peak": bytes_text(torch.cuda.max_memory_allocated(index)),
            "device total": bytes_text(torch.cuda.get_device_properties(index).total_memory),
        })
    else:
        info = psutil.Process().memory_info()
        crash.memory.update({"RSS (CPU)": bytes_text(info.rss), "address space": bytes_text(info.vms)})
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            crash.memory["address-space limit"] = bytes_text(soft)
            crash.memory["limit_bytes"] = int(soft)
        crash.memory["machine total"] = bytes_text(psutil.virtual_memory().total)

