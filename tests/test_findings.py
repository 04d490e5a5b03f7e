"""The pieces behind the verdicts on the blind corpus cases, on real tensors, graphs and modules: what
holds gathered model outputs at an out-of-memory error, the containers a Dataset reads with one index,
the ``with torch.no_grad()`` around a call, where a submodule is created, a std over one sample, a
LambdaLR that returns a rate, and the one-example share of a failed allocation."""

from __future__ import annotations

import collections
import copy
import dataclasses
from collections.abc import Callable
import math
import random
import sys
import types
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from conftest import SCRIPTS, wait_for

from tuidebug.agent.evaluation_classes import EvaluationClasses
from tuidebug.agent.facts import Facts, LossCall
from tuidebug.agent.watched_step import WATCHED_STEP, WatchedStep
from tuidebug.probes import holders, source
from tuidebug.probes.held_frozen import frozen_groups, split_frozen
from tuidebug.probes.learning import GraphCut, _rises_by_another_objective, rate_not_factor
from tuidebug.probes import memory
from tuidebug.probes.memory import _all_pairs, _batch_power, _in_model_method, _kept_more_than, _square_length
from tuidebug.probes.shape import SilentShapes, _batch_as_sequence, _classes_last, _pairwise, _relabelled
from tuidebug.probes.source import grad_off_block, guarded_steps, indexed_attributes, module_site
from tuidebug.probes.unsafe_math import ForwardWatch, SafeOp
from tuidebug.sites import Site


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.regressor = nn.Sequential(
            nn.Linear(8, 4),
            nn.ReLU(),
            nn.Linear(4, 1),
            nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.regressor(self.body(x))


class Pairs(torch.utils.data.Dataset):
    def __init__(self, names: list[str], labels: torch.Tensor, keep: torch.Tensor) -> None:
        self.names = names
        self.labels = labels[keep]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[str, torch.Tensor]:
        return self.names[index], self.labels[index]


def gather(model: nn.Module, facts: Facts, batches: int) -> torch.Tensor:
    """An evaluation loop run with gradients on, gathering outputs with their graphs."""
    feats = None
    for _ in range(batches):
        out = model(torch.randn(3, 4))
        facts.tag_graph(out, 7, "model output")
        feats = out if feats is None else torch.cat((feats, out))
    frames.append(sys._getframe())
    return feats


def gather_in_a_list(model: nn.Module, facts: Facts, batches: int) -> list[torch.Tensor]:
    """Per-batch log-likelihoods kept in a list for one autograd.grad over all of them (EWC's Fisher)."""
    log_likelihoods = []
    for _ in range(batches):
        out = model(torch.randn(3, 4))
        facts.tag_graph(out, 7, "model output")
        log_likelihoods.append(out[:, 0])
    frames.append(sys._getframe())
    return log_likelihoods


frames: list = []


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(open(__file__).read().splitlines(), 1) if line.strip() == text)


def test_a_tensor_gathering_the_outputs_of_several_forwards_is_named_with_its_line() -> None:
    facts, model = Facts(), Head()
    frames.clear()
    gather(model, facts, 4)
    found = holders.piled(frames, 7, more_than=1)
    assert [(name, forwards) for name, forwards, _ in found] == [("feats", 4)]
    assert "torch.cat((feats, out))" in found[0][2] and found[0][2].endswith("in gather()")
    frames.clear()
    gather(model, facts, 1)
    assert holders.piled(frames, 7, more_than=1) == []  # one forward's output is what a step holds anyway


def test_a_list_of_outputs_kept_with_their_graphs_is_named_with_its_append() -> None:
    facts, model = Facts(), Head()
    frames.clear()
    gather_in_a_list(model, facts, 5)
    found = holders.piled(frames, 7, more_than=1)
    assert [(name, forwards) for name, forwards, _ in found] == [("log_likelihoods", 5)]
    line = line_of("log_likelihoods.append(out[:, 0])")
    assert found[0][2] == f"test_findings.py:{line} `log_likelihoods.append(out[:, 0])` in gather_in_a_list()"


def test_containers_of_different_lengths_read_with_one_index_are_found() -> None:
    line = line_of("return self.names[index], self.labels[index]")
    assert indexed_attributes(Pairs) == [("names", line), ("labels", line)]
    from tuidebug.probes.learning import _unequal_containers
    split = Pairs(["a", "b", "c", "d"], torch.arange(4), torch.tensor([True, False, True, True]))
    assert [(name, length) for name, length, _ in _unequal_containers(split)] == [("names", 4), ("labels", 3)]
    aligned = Pairs(["a", "b"], torch.arange(2), torch.tensor([True, True]))
    assert _unequal_containers(aligned) == []


def test_the_no_grad_block_around_a_line_and_the_line_a_submodule_is_created_on() -> None:
    inside = line_of("return model(x)  # inside no_grad")
    block = grad_off_block(__file__, inside)
    assert block is not None and block.text == "with torch.no_grad():"
    assert grad_off_block(__file__, inside + 3) is None
    site = module_site(Head(), "regressor.3")
    assert site is not None and site.line == line_of("nn.Linear(4, 1),") + 1 and site.text == "nn.ReLU(),"
    assert module_site(Head(), "regressor").text == "self.regressor = nn.Sequential("


def decoded(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x)  # inside no_grad


def spread_of(x: torch.Tensor) -> torch.Tensor:
    return torch.std(x, dim=0)


def test_a_std_over_a_batch_of_one_is_named_and_its_safe_form_keeps_backward_finite() -> None:
    x = torch.randn(1, 4, requires_grad=True)
    watch = ForwardWatch()
    with watch, pytest.warns(UserWarning):
        spread_of(x)
    culprit = watch.first
    assert culprit is not None and culprit.kind == "statistics" and "a batch of one sample" in culprit.detail
    safe = SafeOp(culprit)
    with safe:
        spread = spread_of(x)
    spread.sum().backward()
    assert safe.applied == {culprit.site.line}
    assert bool(torch.isfinite(spread).all()) and bool(torch.isfinite(x.grad).all())


def weighted_bce(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    positive = -3.0 * target * torch.log(pred)
    negative = -(1 - target) * torch.log(1 - pred)
    return (positive + negative).mean()


def log_of(x: torch.Tensor) -> torch.Tensor:
    return torch.log(x)


def test_the_safe_form_of_an_op_covers_its_kind_in_the_function_that_holds_it() -> None:
    """A hand-written BCE whose log(1 - p) went non-finite at p = 1: made safe there only, its log(p) does at p = 0
    on another batch. Both logs of the function are made safe; a log in another function is not."""
    watch = ForwardWatch()
    with watch:
        weighted_bce(torch.tensor([1.0, 0.5]), torch.tensor([0.0, 1.0]))
    culprit = watch.first
    assert culprit is not None and culprit.site.text.startswith("negative = ")
    safe = SafeOp(culprit)
    with safe:
        loss = weighted_bce(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0]))
        elsewhere = log_of(torch.tensor([0.0]))
    assert bool(torch.isfinite(loss)) and not bool(torch.isfinite(elsewhere).all())
    assert safe.applied == {culprit.site.line - 1, culprit.site.line}
    assert "in the same function" in safe.also()


def masked_entropy(logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    logits = logits.masked_fill(~valid, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    log_probs = torch.log_softmax(logits, dim=-1)
    return -(probs * log_probs).sum(dim=-1)


def test_a_product_that_meets_a_masked_minus_infinity_is_named_with_the_fill_and_its_safe_form_is_finite() -> None:
    """A policy's entropy over actions masked with -inf: softmax gives 0 there, log_softmax -inf, and the
    product 0 * -inf is NaN. The culprit is the product, with the fill that wrote the infinity."""
    logits, valid = torch.randn(2, 3, requires_grad=True), torch.tensor([[True, False, True], [True, True, False]])
    watch = ForwardWatch()
    with watch:
        masked_entropy(logits, valid)
    culprit = watch.first
    product, fill = line_of("return -(probs * log_probs).sum(dim=-1)"), line_of(
        'logits = logits.masked_fill(~valid, float("-inf"))')
    assert culprit is not None and culprit.kind == "infinity" and culprit.site.line == product
    assert culprit.detail.startswith("NaN from 0 * -inf: `log_probs` is -inf at 2 of 6 entries, where `probs` is 0; "
                                     f"the infinity was written by torch.masked_fill at test_findings.py:{fill}")
    safe = SafeOp(culprit)
    with safe:
        entropy = masked_entropy(logits, valid)
    entropy.sum().backward()
    assert safe.applied == {product}
    assert bool(torch.isfinite(entropy).all()) and bool(torch.isfinite(logits.grad).all())


def masked_entropy_in_place(logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    logits = logits.masked_fill(~valid, float("-inf"))
    plogp = torch.softmax(logits, dim=-1)
    log_probs = torch.log_softmax(logits, dim=-1)
    plogp.mul_(log_probs)
    return -plogp.sum(dim=-1)


def masked_entropy_by_index(logits: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    logits = logits.clone()
    logits[~valid] = float("-inf")
    probs, log_probs = torch.softmax(logits, dim=-1), torch.log_softmax(logits, dim=-1)
    return -(probs * log_probs).sum(dim=-1)


def fill_beside_an_infinity_from_elsewhere(scores: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    scores.masked_fill(~valid, float("-inf"))
    weights = torch.tensor([float("inf"), 1.0, 1.0])
    return (torch.zeros(3) * weights).sum()


def test_an_in_place_product_is_read_before_it_and_an_infinity_the_fill_did_not_write_is_not_its() -> None:
    """`plogp.mul_(log_probs)` overwrote its 0s with NaN: the values before it show the 0 * -inf. An infinity that
    no fill wrote (a weight, data) meeting a 0 is not put down to a fill elsewhere in the step."""
    valid = torch.tensor([[True, False, True]])
    watch = ForwardWatch()
    with watch:
        masked_entropy_in_place(torch.randn(1, 3), valid)
    assert watch.first is not None and watch.first.kind == "infinity"
    assert watch.first.detail.startswith("NaN from 0 * -inf: `log_probs` is -inf at 1 of 3 entries, where `plogp` is 0")
    by_index = ForwardWatch()
    with by_index:
        masked_entropy_by_index(torch.randn(1, 3), valid)
    fill = line_of('logits[~valid] = float("-inf")')
    assert by_index.first is not None and by_index.first.detail.endswith(
        f"the infinity was written by `x[...] =` at test_findings.py:{fill} `logits[~valid] = float(\"-inf\")`")
    elsewhere = ForwardWatch()
    with elsewhere:
        fill_beside_an_infinity_from_elsewhere(torch.randn(1, 3), valid)
    assert elsewhere.first is None


def test_the_safe_form_of_an_infinity_is_the_dtypes_largest_number_and_leaves_a_nan_alone() -> None:
    from tuidebug.probes.unsafe_math import _finite_version

    largest = torch.finfo(torch.float32).max
    made = _finite_version(torch.tensor([float("nan"), float("inf"), float("-inf"), 1.0]), torch.float32)
    assert made[0].isnan() and made[1:].tolist() == [largest, -largest, 1.0]
    assert _finite_version(float("-inf"), torch.float16) == -65504.0


def overflowed_difference(x: torch.Tensor) -> torch.Tensor:
    big = x * 1e30
    return big * 1e30 - big * 1e30


def test_an_infinity_from_an_overflow_meeting_itself_is_not_unsafe_arithmetic() -> None:
    """inf - inf after a product overflowed is a divergence's symptom (the overflow is the first non-finite
    value), not an infinity put there on purpose."""
    watch = ForwardWatch()
    with watch:
        overflowed_difference(torch.ones(3))
    assert watch.first is None and watch.first_other is not None and watch.first_other.op in ("mul", "__mul__")


def summed_in_training(model: nn.Module, batches: list[torch.Tensor]) -> torch.Tensor:
    running_loss = torch.zeros(())
    for x in batches:
        loss = model(x).sum()
        running_loss += loss
    return running_loss


def summed_in_evaluation(model: nn.Module, batches: list[torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        running_loss = torch.zeros(())
        for x in batches:
            running_loss += model(x).sum()
    return running_loss


def test_a_local_that_keeps_graphs_is_named_with_the_line_of_its_own_function() -> None:
    """`running_loss` in training and in evaluation are two variables: the one found in training's frame is
    fed by training's line, though evaluation's comes later in the file."""
    fed = holders._fed_at("running_loss", __file__, "summed_in_training()")
    assert fed is not None and fed.startswith(f"test_findings.py:{line_of('running_loss += loss')} ")
    assert fed.endswith("in summed_in_training()")
    assert holders._fed_at("running_loss", __file__).endswith("in summed_in_evaluation()")  # no owner: the last


def test_a_lambda_that_returns_a_rate_is_told_from_a_warm_up() -> None:
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1e-3)
    rate = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1e-3 * 0.95 ** epoch)
    assert rate_not_factor(rate)[0] == pytest.approx(1e-3)
    warm_up = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, step / 500))
    assert rate_not_factor(warm_up) is None
    assert rate_not_factor(torch.optim.lr_scheduler.StepLR(optimizer, 10)) is None


@pytest.mark.parametrize("batch, operands, asked, free, oversized", [
    (16, ["features_b: (16, 2304, 32) float32", "features_a: (16, 32, 2304) float32"], 16 * 2304 ** 2 * 4, 270, True),
    (16, ["features: (16, 5308416) float32"], 16 * 2304 ** 2 * 4, 270, False),  # as large, but not n x n
    (32, ["x: (32, 384, 32) float32"], 32 * 384 ** 2 * 4 * 4, 600, False),  # 4 heads of 384 x 384 at batch 32
])
def test_an_n_by_n_intermediate_is_oversized_at_a_smaller_share_of_memory_than_any_other(
        monkeypatch: pytest.MonkeyPatch, batch: int, operands: list[str], asked: int, free: int, oversized: bool) -> None:
    """A correlation volume of 2304 x 2304 per example takes 7.5% of the memory the step had: an intermediate
    that grows with the resolution squared, where an activation that large per example (not n x n) is still
    the batch's, and BERT's attention at batch 32 (0.5%) is too."""
    inputs = ((torch.zeros(batch, 3),), {})
    ctx = types.SimpleNamespace(run=types.SimpleNamespace(model_inputs=lambda: inputs))
    monkeypatch.setattr(memory, "limit_and_base", lambda ctx: (1000 * 2**20, (1000 - free) * 2**20, "the limit"))
    found = memory._oversized_for_one_example(ctx, asked, types.SimpleNamespace(operands=operands))
    assert (found is not None) is oversized
    if oversized:
        assert found[0] == "is 2304 x 2304 per example (324.0 MiB)" and "7.5% of the 270.0 MiB" in found[1][0]
        assert found[2] is True  # under a tenth of the memory per example: a smaller batch might still hold it


def test_an_n_by_n_allocation_per_example_names_its_length() -> None:
    operands = ["proj_query: (8, 9216, 2) float32", "proj_key: (8, 2, 9216) float32"]
    assert _square_length(9216 * 9216 * 4, operands) == 9216
    assert _square_length(32 * 64 * 64 * 4, ["x: (64, 3, 64, 64) float32"]) is None  # a feature map, not n x n


def test_an_allocation_over_every_pair_of_an_n_by_n_input_is_told_from_a_large_batch() -> None:
    """pyGAT's all-pairs attention: a 1500-node graph's (1500, 1500) adjacency beside a failed 1500*1500*8 floats."""
    from tuidebug.agent.crash import Crash

    graph = Crash("oom", "oom", "", module_inputs=["(1500, 500) float32", "(1500, 1500) float32"])
    assert _all_pairs(1500 * 1500 * 8 * 4, graph) == (1500, 8)
    images = Crash("oom", "oom", "", module_inputs=["(256, 3, 224, 224) float32"])  # a large batch: no n x n input
    assert _all_pairs(256 * 256 * 4 * 4, images) is None


def test_a_batchnorm_given_the_last_batch_of_one_sample_is_a_crash_with_drop_last_as_its_fix() -> None:
    from tuidebug.agent.crash import FailedModule, LoaderShape, analyse

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveAvgPool2d(1), nn.BatchNorm2d(8)).train()
    x = torch.randn(1, 3, 8, 8)
    with pytest.raises(ValueError) as raised:
        model(x)
    failed = FailedModule(model[2], "2", [model[1](model[0](x))], 1)
    crash = analyse(raised.value, failed, None, 1, {}, loader=LoaderShape(161, 4, False, "train.py:46 in main"))
    assert crash.kind == "other" and crash.cause == "exception"
    assert "2 (BatchNorm2d) got a batch of 1 in training mode" in crash.findings[0]
    assert "splits 161 samples into batches of 4: the last batch of every epoch holds 161 - 40 x 4 = 1" in crash.findings[1]
    assert crash.fix.startswith("pass drop_last=True to the training DataLoader (made at train.py:46)")


def test_a_shape_error_on_an_evaluation_line_after_training_is_a_crash_of_that_line_and_a_collate_one_stays_shape():
    """A metric's reshape (num_classes 1 for 0/1 labels) raised on the user's line with the model in eval mode
    after 20 steps: the evaluation's code failed, not the training's shapes. The same error without training
    steps, and a DataLoader's collate raising inside torch, stay shape errors."""
    from torch.utils.data import default_collate

    from tuidebug.agent.crash import analyse

    with pytest.raises(RuntimeError) as metric:
        torch.bincount(torch.tensor([0, 1, 2, 2])).reshape(1, 1)
    with pytest.raises(RuntimeError) as collate:
        default_collate([torch.zeros(3, 44, 36), torch.zeros(3, 37, 36)])

    evaluated = analyse(metric.value, None, None, 16, {}, evaluated_after=20)
    assert (evaluated.kind, evaluated.cause) == ("other", "exception")
    assert "after 20 training steps" in evaluated.findings[0] and "(1, 1)" in evaluated.findings[1]
    assert analyse(metric.value, None, None, 16, {}).kind == "shape"
    assert analyse(collate.value, None, None, 16, {}, evaluated_after=20).kind == "shape"


@pytest.mark.parametrize("left_off", [False, True])
def test_a_backward_without_a_graph_in_an_evaluation_after_training_is_a_crash_named_where_it_parts(start_run,
                                                                                                     left_off) -> None:
    """A loss helper that always calls backward, run by the evaluation under torch.no_grad after 12 training steps:
    a crash of the evaluation, named with the call where its path parts from the training's, not a model cut off
    from its loss. Gradients switched off for good inside the loop make the training's own backward raise on the
    same path: that stays the learning branch's (a guard on the backward would stop the training)."""
    run, session = start_run(SCRIPTS / "backward_in_evaluation.py", *(["left_off"] if left_off else []))
    wait_for(lambda: any(e.kind == "crash" for e in session.events), 60, "the crash analysis")
    crash = next(e for e in session.events if e.kind == "crash")
    if left_off:
        assert crash.message == "no_graph no_gradient_to_weights"
        return
    assert crash.message == "other exception"
    finding = next(line for line in crash.details if line.startswith("finding:"))
    assert "after 12 training steps, with gradients off (torch.no_grad), from backward_in_evaluation.py:28 " \
           "`print(\"validation loss\", compute_loss(model, x, y))`, where the call parts" in finding
    fix = next(line for line in crash.details if line.startswith("fix:"))
    assert fix.startswith("fix: call backward only where the step trains: guard backward_in_evaluation.py:13's backward "
                          "with `if torch.is_grad_enabled():`, or give the evaluation at backward_in_evaluation.py:28 ")


def test_a_weight_an_optimizer_stepped_between_a_forward_and_its_backward_is_named_with_that_step() -> None:
    """A GAN's generator loss built on the discriminator's output, then the discriminator stepped, then the
    generator's backward: autograd's version check fails on a discriminator weight, which names the step."""
    from tuidebug.agent.crash import analyse

    netD = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    optimizerD = torch.optim.SGD(netD.parameters(), lr=0.1)
    fake = torch.randn(5, 4, requires_grad=True)
    fake_out = netD(fake).mean()
    d_loss = 1 - fake_out
    d_loss.backward(retain_graph=True)
    optimizerD.step()
    g_loss = fake_out
    with pytest.raises(RuntimeError) as raised:
        g_loss.backward()
    crash = analyse(raised.value, None, None, 5, {})

    step = line_of("optimizerD.step()")
    assert crash.findings[0].startswith("`netD.2.weight` (1, 8) was changed in place once after the forward")
    assert crash.findings[1] == (f"`optimizerD` holds `netD.2.weight`: `optimizerD.step()` at test_findings.py:{step} "
                                 "`optimizerD.step()`, before this backward, updates it in place after the forward "
                                 "through `netD` saved it")
    assert crash.fix.startswith("call `optimizerD.step()` only after every backward through `netD`")


def test_an_activation_of_a_weights_shape_and_version_is_not_taken_for_the_weight() -> None:
    """A fresh Linear's weight, which an optimizer holds, is at version 1 (its init fills it in place), as is a ReLU
    output of its shape changed once: the message says the ReLU made the tensor, not a view of a weight."""
    from tuidebug.agent.crash import analyse

    fc = nn.Linear(4, 4)
    optimizer = torch.optim.SGD(fc.parameters(), lr=0.1)
    hidden = torch.relu(fc(torch.randn(4, 4)))
    with pytest.raises(RuntimeError) as raised:
        hidden += 1
        hidden.sum().backward()
    crash = analyse(raised.value, None, None, 4, {})
    assert fc.weight._version == 1 and any(p is fc.weight for p in optimizer.param_groups[0]["params"])
    assert crash.findings[0].startswith("`hidden` (4, 4) (the output of Relu) was changed in place once")


def test_a_tensor_changed_in_place_after_autograd_saved_it_is_named_by_its_variable() -> None:
    from tuidebug.agent.crash import analyse

    weights = torch.randn(3, requires_grad=True)
    scores = weights.exp()
    with pytest.raises(RuntimeError) as raised:
        scores += 1
        scores.sum().backward()
    crash = analyse(raised.value, None, None, 3, {})
    assert crash.findings[0].startswith("`scores` (3,) (the output of Exp) was changed in place once after the forward")
    assert crash.fix.startswith("make the in-place op on `scores` (3,) (the output of Exp) out of place")


def test_a_batchnorm1d_given_features_last_is_a_shape_mismatch_fixed_by_flattening_the_positions() -> None:
    from tuidebug.agent.crash import FailedModule, analyse

    norm = nn.BatchNorm1d(16).train()
    regions = torch.randn(4, 6, 16)
    with pytest.raises(RuntimeError) as raised:
        norm(regions)
    crash = analyse(raised.value, FailedModule(norm, "att_embed.0", [regions], 3), None, 4, {})

    assert (crash.kind, crash.cause) == ("shape", "shape_mismatch")
    assert crash.findings[0] == ("att_embed.0 is BatchNorm1d(16): it normalises dim 1 of its input as 16 features, but "
                                 "its input (4, 6, 16) has 6 there")
    assert "x.reshape(-1, 16)" in crash.fix and norm(regions.reshape(-1, 16)).shape == (24, 16)


def test_an_lstm_that_the_backend_cannot_run_is_a_crash_not_a_layout_error() -> None:
    """oneDNN's "could not create a primitive descriptor" (a bfloat16 LSTM on a CPU without bfloat16) says nothing of
    shapes; the same layer given the wrong number of features still is a shape mismatch."""
    from tuidebug.agent.crash import FailedModule, analyse

    lstm = nn.LSTM(64, 32, batch_first=True)
    tokens = torch.randn(8, 24, 64)
    backend = RuntimeError("could not create a primitive descriptor for the LSTM forward propagation primitive.")
    with pytest.raises(RuntimeError) as wrong_width:
        lstm(torch.randn(8, 24, 60))

    crash = analyse(backend, FailedModule(lstm, "encoder", [tokens], 3), None, 8, {})
    shape = analyse(wrong_width.value, FailedModule(lstm, "encoder", [torch.randn(8, 24, 60)], 3), None, 8, {})
    assert (crash.kind, crash.cause) == ("other", "exception") and crash.findings == []
    assert (shape.kind, shape.cause) == ("shape", "shape_mismatch")
    assert shape.findings[0] == "encoder is LSTM(input_size=64) but its input (8, 24, 60) has 60 features"


def test_a_fixed_index_past_the_last_short_batch_is_a_crash_named_with_the_loader_not_a_shape_mismatch() -> None:
    from tuidebug.agent.crash import LoaderShape, analyse

    batch = torch.randn(1, 1, 8, 8)
    with pytest.raises(IndexError) as raised:
        batch[1, 0:1]
    crash = analyse(raised.value, None, None, 1, {}, loader=LoaderShape(153, 8, False, "train.py:98 in main"))
    assert crash.kind == "other" and crash.cause == "exception"
    assert crash.findings == ["the line reads index 1 of dimension 0, which holds 1 here",
                              "the DataLoader (made at train.py:98) splits 153 samples into batches of 8: the last "
                              "batch of every epoch holds 153 - 19 x 8 = 1"]
    assert "index within the batch's own size (index 1 needs 2 rows; the epoch's last batch has 1), or pass " \
           "drop_last=True to the DataLoader (made at train.py:98)" in crash.fix


class Boxes(torch.utils.data.Dataset):
    def __init__(self, objects: list[list[list[float]]]) -> None:
        self.objects = objects

    def __len__(self) -> int:
        return len(self.objects)

    def __getitem__(self, idx: int) -> Any:
        import numpy as np

        annots = np.array(self.objects[idx], dtype=np.float32)
        annots[:, :4] *= 0.5
        return annots


def test_numpys_shape_error_in_a_datasets_getitem_is_a_sample_of_other_data_not_a_shape_mismatch() -> None:
    """EfficientDet's Resizer on an image without objects: its empty annotation array has shape (0,). The sample is
    named, with its array; the run's shapes are not in question."""
    from tuidebug.agent.crash import analyse

    loader = torch.utils.data.DataLoader(Boxes([[[1, 2, 3, 4, 0]]] * 5 + [[]]), batch_size=2)
    with pytest.raises(IndexError) as raised:
        list(loader)
    crash = analyse(raised.value, None, None, 2, {})

    assert (crash.kind, crash.cause) == ("other", "exception")
    assert crash.findings[0].startswith("raised while loading sample 5 of Boxes (Boxes.__getitem__ at test_findings.py:")
    assert "(annots: numpy array (0,) float32)" in crash.findings[0]
    assert crash.fix.startswith("look at sample 5's data: make the code at test_findings.py:")


class Decoder(nn.Module):
    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.rnn, self.generator = nn.GRU(8, 16), nn.Linear(16, vocab_size)


def test_a_gather_of_the_log_probabilities_past_the_models_classes_names_its_output_layer() -> None:
    """t2vec's loss reads each target's neighbours from the log-probabilities: a vocabulary of 404 for a model
    built with 402 outputs. A gather past a width that no layer of the model has stays a shape error."""
    from tuidebug.agent.crash import analyse

    model = Decoder(402)
    output = torch.log_softmax(torch.randn(6, 402), dim=1)
    indices = torch.tensor([[2, 403]] * 6)
    with pytest.raises(RuntimeError) as raised:
        torch.gather(output, 1, indices)
    crash = analyse(raised.value, None, None, 6, {}, model_call=(model, ((), {})))
    other = analyse(raised.value, None, None, 6, {}, model_call=(Decoder(300), ((), {})))

    assert (crash.kind, crash.cause) == ("shape", "target_out_of_range")
    assert crash.findings[0].startswith("index 403 in dimension 1 at test_findings.py:")
    assert crash.findings[0].endswith("past the model's 402 classes (valid 0..401): the labels reach class 403")
    assert crash.findings[1].startswith("the model's 402 outputs a sample come from `generator` (Linear(")
    assert crash.fix.startswith("build `generator` with as many outputs as the data has classes (at least 404)")
    assert (other.kind, other.cause) == ("shape", "shape_mismatch")


def one_hot(label: torch.Tensor, n_classes: int) -> torch.Tensor:
    return torch.eye(n_classes)[label]


def test_a_one_hot_table_read_at_an_ignore_label_is_a_label_past_the_classes() -> None:
    """A boundary loss one-hot encodes segmentation masks with ``torch.eye(C)[label]``, and the masks mark
    pixels to ignore with 255: the labels, a per-sample tensor of the failing line, hold the very index that
    is out of bounds, and the table has a row per class of the model's head (a Conv2d of 2 channels). An
    index error of dimension 0 whose index no per-sample tensor holds stays a plain index error."""
    from tuidebug.agent.crash import analyse

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 1))
    masks = torch.zeros(4, 6, 6, dtype=torch.long)
    masks[1, 2:4, 2:4] = 255
    with pytest.raises(IndexError) as raised:
        one_hot(masks, 2)
    crash = analyse(raised.value, None, None, 4, {}, model_call=(model, ((), {})))
    with pytest.raises(IndexError) as elsewhere:
        torch.eye(2)[torch.tensor([0, 7])]
    plain = analyse(elsewhere.value, None, None, 4, {}, model_call=(model, ((), {})))

    assert (crash.kind, crash.cause) == ("shape", "target_out_of_range")
    assert crash.findings[0].startswith("`label` ((4, 6, 6) int64 values 0..255) holds label 255 at 4 entries")
    assert "a table of the model's 2 classes (valid 0..1) (255 is the value labels commonly give" in crash.findings[0]
    assert crash.findings[1].startswith("the model's 2 outputs a sample come from `2` (Conv2d(8, 2")
    assert crash.fix.endswith("`label.masked_fill(label >= 2, 0)` with those entries weighted out), or build `2` "
                              "with as many outputs as the labels have classes")
    assert plain.cause != "target_out_of_range"


def test_the_fast_weights_of_an_unrolled_inner_loop_are_found_where_the_models_own_are_not() -> None:
    """MAML-style fast weights, each step's made from the last with create_graph: a dict of the model's weight
    shapes, all autograd results. The model's own parameters (leaves) and a list of activations are not."""
    from torch.func import functional_call

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    fast_params = dict(model.named_parameters())
    activations = []
    for _ in range(3):
        out = functional_call(model, fast_params, (torch.randn(5, 4),))
        activations.append(out)
        grads = torch.autograd.grad(out.pow(2).mean(), list(fast_params.values()), create_graph=True)
        fast_params = {n: p - 0.1 * g for (n, p), g in zip(fast_params.items(), grads)}
    found = holders.weights_with_graph([sys._getframe()], model)

    assert found is not None and found[0] == "fast_params" and found[2] == 4 and found[3]
    assert found[1].startswith("test_findings.py:") and "fast_params = {n: p - 0.1 * g" in found[1]
    del grads
    fast_params = dict(model.named_parameters())
    assert holders.weights_with_graph([sys._getframe()], model) is None


def test_next_past_a_loaders_last_batch_names_the_pass_length_and_a_new_pass_as_the_fix() -> None:
    from tuidebug.agent.crash import LoaderShape, analyse

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(100, 3)), batch_size=32)
    batch_iterator = iter(loader)
    with pytest.raises(StopIteration) as raised:
        for _ in range(5):
            images = next(batch_iterator)
    crash = analyse(raised.value, None, None, 32, {}, loader=LoaderShape(100, 32, False, "train.py:75 in train"))

    line = crash.site.split(" ")[0]
    assert crash.kind == "other" and line.startswith("test_findings.py:")
    assert crash.findings == [f"next() at {line} ran past the last batch of its iterator: one pass over the DataLoader "
                              "(made at train.py:75) is 100 samples in batches of 32 = 4 batches, and the loop asks "
                              "for more"]
    assert crash.fix.startswith(f"at {line}: start a new pass when the iterator runs out")
    assert images[0].shape == (4, 3)


def test_a_metrics_states_are_weighed_together_against_the_failed_allocation() -> None:
    def held(name: str, size: int) -> holders.Holding:
        return holders.Holding(name, "list of 11 tensors", "BinaryAveragePrecision", 11, size, None, None)

    states = [held("self.val_ap.preds", 44), held("self.val_ap.target", 44), held("self.cache", 10)]
    assert [h.name for h in _kept_more_than(states, 88)] == ["self.val_ap.preds", "self.val_ap.target"]
    assert _kept_more_than(states, 100) == []


def findings_of(start_run, script: str) -> list[str]:
    _, session = start_run(SCRIPTS / script)
    wait_for(lambda: session.state == "ended", 60, "the script to end")
    return [e.message for e in session.events if e.kind == "finding"]


def test_a_zero_grad_between_backward_and_step_is_found_with_both_lines(start_run) -> None:
    wiped = next(f for f in findings_of(start_run, "zero_grad_after_backward.py") if f.startswith("zero_grad_wipes:"))
    assert "zero_grad_after_backward.py:15 `optimizer.zero_grad()`" in wiped
    assert "zero_grad_after_backward.py:16 `optimizer.step()`" in wiped


@pytest.mark.parametrize("script", ["pat_grad_accum.py", "pat_multi_optim.py"])
def test_accumulation_and_two_optimizers_reset_gradients_where_they_should(start_run, script: str) -> None:
    assert not [f for f in findings_of(start_run, script) if f.startswith("zero_grad_wipes:")]


def test_plain_tensors_updated_by_hand_count_as_steps(start_run) -> None:
    """No nn.Module and no optimizer (makemore, micrograd style): the graph's leaves are the parameters."""
    _, session = start_run(SCRIPTS / "plain_tensors_manual_sgd.py")
    wait_for(lambda: session.state == "ended", 60, "the script to end")
    assert session.step >= 29
    assert not [e for e in session.events if e.kind == "finding" and e.message.startswith("no_optimizer_step")]


@pytest.mark.parametrize("args, built", [((), True), (("fixed",), False)])
def test_a_layer_built_inside_forward_at_every_call_is_a_finding_with_its_line(start_run, args, built) -> None:
    """A Conv1d built in forward gets new weights at every call; a ReLU built there has none, a head built
    lazily once and kept in the model is a part of it, and a slice of its own ModuleList holds its own
    layers: only the conv is named."""
    _, session = start_run(SCRIPTS / "layer_built_in_forward.py", *args)
    wait_for(lambda: session.state == "ended", 60, "the script to end")
    found = [e.message for e in session.events if e.kind == "finding" and e.message.startswith("layers_in_forward")]

    assert bool(found) == built, found
    if built:
        assert found[0].startswith("layers_in_forward: `Conv1d` is built inside forward at layer_built_in_forward.py:23 ")
        assert "ReLU" not in found[0] and "Linear" not in found[0] and "ModuleList" not in found[0]


def fit_keypoints(output: torch.Tensor, key_pts: torch.Tensor, seen: list) -> torch.Tensor:
    key_pts = key_pts.view(1, -1)
    seen.append(key_pts)  # what the loss hook records as the failing call's target
    return nn.functional.mse_loss(output, key_pts)


def test_a_target_whose_batch_a_view_folded_is_named_with_the_reshape_line() -> None:
    from tuidebug.agent.crash import FailedLoss, analyse
    output, seen = torch.randn(10, 136), []
    with pytest.raises(RuntimeError) as raised, pytest.warns(UserWarning):
        fit_keypoints(output, torch.randn(10, 68, 2), seen)
    crash = analyse(raised.value, None, FailedLoss("mse_loss", output, seen[0], 1), 10, {})
    assert crash.cause == "batch_folded"
    reshaped = f"test_findings.py:{line_of('key_pts = key_pts.view(1, -1)')}"
    assert any(reshaped in finding for finding in crash.findings), crash.findings
    assert "key_pts.view(key_pts.size(0), -1)" in crash.fix and reshaped in crash.fix


def test_sequence_scores_with_their_classes_last_are_a_shape_mismatch_fixed_by_moving_the_classes() -> None:
    from tuidebug.agent.crash import FailedLoss, analyse
    scores, words = torch.randn(4, 6, 50), torch.randint(0, 50, (4, 6))  # (batch, seq, vocab) and (batch, seq)
    with pytest.raises(RuntimeError) as raised:
        nn.functional.cross_entropy(scores, words)
    crash = analyse(raised.value, None, FailedLoss("cross_entropy", scores, words, 1), 4, {})

    assert (crash.kind, crash.cause) == ("shape", "shape_mismatch")
    assert "(4, 6, 50) has its 50 classes last, for targets (4, 6)" in crash.findings[0]
    assert "output.transpose(1, 2)" in crash.fix and "reshape(-1, 50)" in crash.fix


@pytest.mark.parametrize("rows, kind", [([[0, 1, 1], [1, 0, 0]], "multi-label"), ([[0, 1, 0], [1, 0, 0]], "one-hot")])
def test_integer_zero_one_targets_of_the_scores_shape_are_labels_of_the_wrong_form(rows, kind) -> None:
    from tuidebug.agent.crash import FailedLoss, analyse
    scores, labels = torch.randn(2, 3), torch.tensor(rows)
    with pytest.raises(RuntimeError) as raised:
        nn.functional.cross_entropy(scores, labels)
    crash = analyse(raised.value, None, FailedLoss("cross_entropy", scores, labels, 1), 2, {})

    assert (crash.kind, crash.cause) == ("shape", "target_out_of_range")
    assert "int64 targets of the scores' shape (2, 3) holding 0/1" in crash.findings[0]
    assert ("BCEWithLogitsLoss" in crash.fix) == (kind == "multi-label") and ("argmax" in crash.fix) == (kind == "one-hot")


class Frames(torch.utils.data.Dataset):
    def __init__(self, frames: torch.Tensor) -> None:
        self.frames = frames

    def __len__(self) -> int:
        return len(self.frames)

    def __getitem__(self, index: int) -> torch.Tensor:
        img = self.frames[index]
        return (img - img.min()) / (img.max() - img.min())


def test_a_sample_made_nan_in_getitem_names_the_division() -> None:
    from tuidebug.probes.inputs import made_in_getitem
    frames = torch.rand(4, 8, 8)
    frames[2] = 0.0
    lines, culprit = made_in_getitem(Frames(frames), [2])
    assert culprit is not None and culprit.kind == "divide"
    assert culprit.site.line == line_of("return (img - img.min()) / (img.max() - img.min())")
    assert any("at or near 0" in line for line in lines)
    assert made_in_getitem(Frames(frames), [1]) == ([], None)


class EventImages(torch.utils.data.Dataset):
    def __init__(self, counts: torch.Tensor) -> None:
        self.counts = counts

    def __len__(self) -> int:
        return len(self.counts)

    def __getitem__(self, index: int) -> torch.Tensor:
        image = self.counts[index].clone()
        image /= torch.max(image)
        return image


def test_a_sample_made_nan_by_an_in_place_division_names_it_from_the_values_it_overwrote() -> None:
    from tuidebug.probes.inputs import made_in_getitem
    counts = torch.rand(3, 4, 4)
    counts[1] = 0.0  # a window without events: 0 / 0
    lines, culprit = made_in_getitem(EventImages(counts), [1])
    assert culprit is not None and culprit.kind == "divide"
    assert culprit.site.line == line_of("image /= torch.max(image)")
    assert "the denominator = 0" in culprit.detail
    assert made_in_getitem(EventImages(counts), [0]) == ([], None)


def test_a_call_on_tenfold_the_usual_inputs_but_not_its_batch_is_kept_with_its_line() -> None:
    facts = Facts()
    for _ in range(8):
        facts.observe_call_size([torch.zeros(32, 6)], lambda: "train.py:10")
    facts.observe_call_size([torch.zeros(64, 6)], lambda: "train.py:10")
    assert facts.large_call is None  # an evaluation batch twice the training one is still a batch
    facts.observe_call_size([torch.zeros(5000, 6)], lambda: "train.py:20")
    assert facts.large_call is None  # a larger batch: the batch check's
    facts.observe_call_size([torch.zeros(32, 500, 6)], lambda: "train.py:30")
    assert facts.large_call == (96000, 192, [(32, 500, 6)], "train.py:30")


def test_a_model_called_on_objects_that_hold_no_tensor_gives_no_usual_size_to_compare_with() -> None:
    """A graph batch object passed whole: its calls have no tensor values, and a later call with a tensor is no
    "large call" (the out-of-memory check divided by the usual size of 0)."""
    facts = Facts()
    for _ in range(8):
        facts.observe_call_size([], lambda: "train.py:10")
    facts.observe_call_size([torch.zeros(4, 6)], lambda: "screen.py:20")
    assert facts.large_call is None


class Gate(nn.Module):
    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.words = nn.Embedding.from_pretrained(table)
        self.tags = nn.Embedding.from_pretrained(table, freeze=False)
        self.gate = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        nn.init.zeros_(self.gate[0].weight)


def test_hand_set_weights_and_frozen_pretrained_tables_are_found_in_the_source() -> None:
    from tuidebug.probes.source import freezes, weight_inits
    assert line_of("nn.init.zeros_(self.gate[0].weight)") in [site.line for site in weight_inits(__file__)]
    frozen = [site.line for site in freezes(__file__)]
    assert line_of("self.words = nn.Embedding.from_pretrained(table)") in frozen
    assert line_of("self.tags = nn.Embedding.from_pretrained(table, freeze=False)") not in frozen


class Scored(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(2, 1)
        self.metric = Keeper()


class Keeper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.preds: list[torch.Tensor] = []
        self.recent: collections.deque = collections.deque(maxlen=4)


def test_a_model_container_that_grows_at_every_pass_is_a_finding_and_a_bounded_one_is_not() -> None:
    model, facts = Scored(), Facts()
    for added in (0, 2, 0, 3, 0, 3):  # a pass over the data adds to it, nothing ever empties it
        model.metric.preds += [torch.zeros(3)] * added
        model.metric.recent.extend([torch.zeros(3)] * 4)
        facts.observe_containers(holders.container_sizes([model]))
    assert holders.container_sizes([model]) == {"self.metric.preds": (8, "Keeper")}
    text, _ = facts._container_growth()
    assert "`self.metric.preds` (Keeper) holds 8 tensors" in text and facts.growing_container == "self.metric.preds"
    emptied = Facts()
    for count in (0, 4, 0, 4, 0, 4):  # outputs collected for an epoch's end, then cleared
        emptied.observe_containers({"self.outputs": (count, "Module")})
    assert emptied._container_growth() is None


def test_a_replay_that_does_not_reproduce_the_run_cannot_rule_a_cause_out() -> None:
    from types import SimpleNamespace

    from tuidebug.probes.trials import Start, Trial, unfaithful
    from tuidebug.probe_api import Adjust
    run = SimpleNamespace(failure=SimpleNamespace(step=20),
                          history=[SimpleNamespace(step=s, loss=1.0 + s / 100) for s in range(1, 20)])
    ctx = SimpleNamespace(run=run, history=run.history)
    start = Start(None, 8, "the checkpoint of step 12")  # the first replayed step is 13, whose loss was 1.13
    assert unfaithful(ctx, start, Trial(Adjust(), losses=[1.131, 1.2])) is None
    note = unfaithful(ctx, start, Trial(Adjust(), losses=[float("nan")]))
    assert note is not None and "step 13 was 1.13" in note
    assert unfaithful(ctx, start, Trial(Adjust(), losses=[0.4])) is not None


def test_a_rate_that_collapses_and_stays_there_is_a_finding_and_one_that_anneals_at_the_end_is_not() -> None:
    collapsed, annealed = Facts(), Facts()
    for step in range(1, 101):
        collapsed.observe_lr(step, 0.1 * 0.5 ** step if step < 30 else 1e-12)  # decayed every batch
        annealed.observe_lr(step, 0.1 * (1 + math.cos(math.pi * step / 100)) / 2)  # cosine to 0 at its last step
    assert "fell from 0.05 to 1e-12" in collapsed.new_findings(100)[0][1]
    assert not [f for f in annealed.new_findings(100) if f[0] == "lr_collapsed"]


class Token:
    def __init__(self, text: str) -> None:
        self.text = text
        self._embeddings: dict[str, torch.Tensor] = {}

    def set_embedding(self, name: str, vector: torch.Tensor) -> None:
        self._embeddings[name] = vector

    def clear_embeddings(self) -> None:
        self._embeddings = {}


def test_tensors_kept_across_many_small_objects_are_found_by_a_census_with_the_line_and_what_empties_them() -> None:
    tokens = [Token(str(i)) for i in range(40)]
    outputs = torch.randn(40, 256)  # one batch's output; each token keeps a row of it
    for token, row in zip(tokens, outputs):
        token.set_embedding("lm", row)
    spread = next(s for s in holders.spread_holders() if s.cls is Token)

    assert (spread.attr, spread.instances, spread.tensors) == ("_embeddings", 40, 40)
    assert spread.bytes == 40 * 256 * 4  # the rows share one storage, counted once
    assert spread.line.endswith("`self._embeddings[name] = vector` in set_embedding()")
    assert [method for method, _ in source.emptying_methods(Token, "_embeddings")] == ["clear_embeddings"]
    for token in tokens:
        token.clear_embeddings()
    assert not any(s.cls is Token for s in holders.spread_holders())


def test_the_census_after_an_out_of_memory_error_counts_the_instances_of_the_users_classes(monkeypatch) -> None:
    tokens = [Token(str(i)) for i in range(40)]
    for token, row in zip(tokens, torch.randn(40, 16)):
        token.set_embedding("lm", row)
    monkeypatch.setattr(holders.gc, "get_objects", lambda: (_ for _ in ()).throw(MemoryError()))

    spread = next(s for s in holders.spread_holders() if s.cls is Token)

    assert (spread.attr, spread.instances, spread.tensors) == ("_embeddings", 40, 40)


class Owner(nn.Module):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net
        self.history: list[torch.Tensor] = []


def test_the_modules_that_hold_a_model_are_searched_with_it() -> None:
    model = nn.Linear(2, 2)
    owner, stranger = Owner(model), Owner(nn.Linear(2, 2))
    vars(owner)  # an instance dict made real (Python 3.11 keeps it lazily): the owner is still found

    found = holders._models_and_owners([model])

    assert found[0] is model and owner in found[1:] and stranger not in found


def test_an_optimizer_step_under_a_condition_is_found_with_the_condition(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text("for i, batch in enumerate(loader):\n"
                      "    loss = model(batch).mean()\n"
                      "    loss.backward()\n"
                      "    if i % accumulate:\n"
                      "        if ready:\n"
                      "            self.optim_g.step()\n"
                      "        optimizer.zero_grad()\n"
                      "    scheduler.step()\n")

    found = guarded_steps(str(script))

    assert [(call.line, condition.line) for call, condition in found] == [(6, 5)]  # the innermost if


def test_a_fold_of_a_too_large_input_is_sized_and_its_view_rewritten_with_the_batch_first() -> None:
    from tuidebug.probes.shape import _batch_first, _per_sample_ratio

    assert _per_sample_ratio((1, 64, 8, 8), (4, 32, 2, 4, 4)) == 4  # 4096 values a sample, rows of 1024
    assert _per_sample_ratio((32, 128, 2, 2), (128, 128)) == 4
    assert _per_sample_ratio((8, 10), (10, 8)) is None  # not a whole multiple: no claim
    assert _batch_first("trans = features.view(-1, 32, 2, 4, 4)", "view") == \
        "features.view(features.size(0), 32, 2, 4, 4)"
    assert _batch_first("x = x.reshape(B, -1)", "reshape") == "x.view(x.size(0), -1) (or x.flatten(1))"


def test_a_tensor_rebuilt_from_tensors_that_require_grad_is_a_cut_when_some_weights_get_no_gradient(tmp_path) -> None:
    import importlib.util
    import warnings

    script = tmp_path / "rollout.py"
    script.write_text("import torch\n\n"
                      "def losses(saved):\n"
                      "    log_probs = torch.tensor(saved)\n"
                      "    total = float(saved[0])\n"
                      "    return log_probs, total\n")
    spec = importlib.util.spec_from_file_location("rollout", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    weight = torch.randn(3, requires_grad=True)
    warned_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # torch gives this warning once a process: an earlier test may have had it
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module.losses([weight[0] * 2, weight[1] * 2])
    finally:
        torch.set_warn_always(warned_always)
    facts = Facts()
    for warning in caught:
        facts.note_warning(warning.category, str(warning.message), warning.filename, warning.lineno)
    assert [site.line for site, _ in facts.graph_cuts] == [4]  # not line 5: float() for a log is no cut
    assert facts._graph_cut() is None  # every weight still gets a gradient
    facts.trainable = 4
    facts.grad_checks = [(25, ["mu_head.weight", "mu_head.bias"], []), (50, ["mu_head.bias", "mu_head.weight"], [])]

    text = facts._graph_cut()

    assert text.startswith("mu_head.bias, mu_head.weight never get a gradient, and rollout.py:4 `log_probs = ")


def test_torchs_warning_of_a_std_over_one_element_names_the_op_where_no_replay_can_run(tmp_path) -> None:
    import importlib.util
    import warnings

    from tuidebug.probes.unsafe_math import _warned
    script = tmp_path / "ppo.py"
    script.write_text("import torch\n"
                      "def normalise(advantages):\n"
                      "    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)\n")
    spec = importlib.util.spec_from_file_location("ppo", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    warned_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert module.normalise(torch.randn(64)).isfinite().all()
            assert module.normalise(torch.randn(1)).isnan().all()  # the last minibatch holds one transition
    finally:
        torch.set_warn_always(warned_always)
    facts = Facts()
    for warning in caught:
        facts.note_warning(warning.category, str(warning.message), warning.filename, warning.lineno)

    culprit, evidence = _warned(types.SimpleNamespace(run=types.SimpleNamespace(facts=facts)))

    assert culprit is not None and (culprit.op, culprit.kind, culprit.site.line) == ("std", "statistics", 3)
    assert evidence == [f"torch warned \"std(): degrees of freedom is <= 0. Correction should be strictly less than the "
                        f"reduction factor (input numel divided by output numel).\" at {culprit.site} while the script "
                        "ran: a std over one element is NaN"]


def test_a_rate_held_at_exactly_zero_is_a_finding_however_late_it_came() -> None:
    zeroed = Facts()
    for step in range(1, 131):
        zeroed.observe_lr(step, 0.005 if step <= 100 else 0.0)  # StepLR(step_size=100, gamma=0)
    assert "fell from 0.005 to 0" in zeroed.new_findings(130)[0][1]


def test_the_scripts_own_safeguards_and_workarounds_are_read_from_its_source(tmp_path) -> None:
    """A clip under a condition and a commented-out one, gradients switched off for the whole script,
    the loss made to require grad by hand, a directory listed without sorting it, NaN written on purpose."""
    script = tmp_path / "train.py"
    script.write_text("import os, glob, torch\n"
                      "torch.set_grad_enabled(False)\n"
                      "files = os.listdir(root)\n"
                      "names = sorted(glob.glob('*.png'))\n"
                      "listed = glob.glob('*.npy')\n"
                      "listed.sort()\n"
                      "with torch.set_grad_enabled(False):\n"
                      "    pass\n"
                      "for x, y in loader:\n"
                      "    loss = model(x).sum()\n"
                      "    loss.requires_grad = True\n"
                      "    scaler.scale(loss).backward()\n"
                      "    if args.clip > 0:\n"
                      "        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)\n"
                      "    # nn.utils.clip_grad_value_(model.parameters(), 1.0)\n"
                      "    optimizer.step()\n"
                      "y = np.array([np.nan if v is None else v for v in raw])\n"
                      "z = pd.to_numeric(column, errors='coerce') + float('NaN')\n"
                      "loss = torch.tensor(loss.item() * reward, requires_grad=True)\n")
    path = str(script)

    assert [(call.line, condition and condition.line) for call, condition in source.switched_off_clips(path)] == [
        (14, 13), (15, None)]
    assert [site.line for site in source.grad_switched_off(path)] == [2]  # not the with block
    assert source.backward_target("scaler.scale(loss).backward()") == "loss"
    assert source.backward_target("accelerator.backward(loss)") == "loss"
    assert [site.line for site in source.forced_requires_grad(path, "loss")] == [11, 19]  # and a re-wrapped number
    assert [site.line for site in source.unsorted_listings(path)] == [3]  # sorted() and .sort() are fine
    assert [site.line for site in source.nan_literals(path)] == [17, 18]


def test_a_lightning_freeze_and_the_trainers_precision_are_read_from_the_source(tmp_path) -> None:
    """BaseFinetuning.freeze(module) freezes as requires_grad=False does; Trainer(precision="16-true")
    is where a Lightning model is put in float16, inside trainer.fit."""
    script = tmp_path / "train.py"
    script.write_text("import lightning as L\n"
                      "class Stages(BaseFinetuning):\n"
                      "    def freeze_before_training(self, pl_module):\n"
                      "        self.freeze(pl_module)\n"
                      "model.freeze()\n"
                      "trainer = L.Trainer(max_epochs=3,\n"
                      "                    precision='16-true')\n"
                      "other = L.Trainer(max_epochs=1)\n")
    path = str(script)

    assert [site.line for site in source.freezes(path)] == [4, 5]
    assert [(site.line, value) for site, value in source.keyword_values(path, {"Trainer"}, "precision")] == [
        (6, "'16-true'")]


def test_numpy_arrays_kept_in_a_dict_of_lists_are_a_holding_fed_at_the_appends(tmp_path) -> None:
    import numpy as np

    class Evaluator(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(4, 2)
            self.results = {"preds": [], "targets": []}

    model = Evaluator()
    for _ in range(12):
        model.results["preds"].append(np.zeros((16, 2), dtype=np.float32))
        model.results["targets"].append(np.zeros((16, 2), dtype=np.float32))

    [holding] = [h for h in holders.find([], [model], step=10) if h.name.endswith("results")]

    assert holding.counted == "24 arrays" and holding.bytes == 24 * 16 * 2 * 4
    assert holding.line is not None and 'model.results["targets"].append(' in holding.line  # the last feed


def check_at(start_run, script: str, check: str, break_at: int):
    """``check``'s result on ``script`` paused at step ``break_at`` (a real run, the probe in the child)."""
    run, session = start_run(SCRIPTS / script, break_at=break_at)
    wait_for(lambda: session.state == "paused", 60, f"the break at step {break_at}")
    run.command("probe", name=check, params={})
    wait_for(lambda: check in session.probe_results, 60, f"{check}'s result")
    return session.probe_results[check]


def check_on_a_copy_after_end(start_run, script: str, check: str):
    """``check``'s result once ``script`` has ended, on a copy of its model (no replay of its own lines), and the
    run's session."""
    run, session = start_run(SCRIPTS / script, post_mortem=True, copy_post_mortem=True)
    wait_for(lambda: session.state == "ended", 60, "the script's end (held for post-mortem checks)")
    run.command("probe", name=check, params={})
    wait_for(lambda: check in session.probe_results, 60, f"{check}'s result")
    return session.probe_results[check], session


def check_after_end(start_run, script: str, check: str, *args: str, timeout: float = 60):
    """``check``'s result on ``script`` (run with ``args``) once it has ended, and the run's session."""
    run, session = start_run(SCRIPTS / script, *args)
    wait_for(lambda: session.state == "ended", 60, "the script to end")
    run.command("probe", name=check, params={})
    wait_for(lambda: check in session.probe_results, timeout, f"{check}'s result")
    return session.probe_results[check], session


def test_a_mixture_of_probabilities_given_to_nll_loss_is_named_with_the_log_as_its_fix(start_run) -> None:
    """No softmax makes the loss's input (a gate mixes two), but its rows are non-negative and sum to 1:
    nll_loss reads probabilities where it expects log-probabilities."""
    result = check_at(start_run, "mixture_probs_nll.py", "learning.loss_input", 20)

    assert result.status == "fail" and result.data["cause"] == "softmax_before_loss"
    assert result.summary == ("NLLLoss (nll_loss) at mixture_probs_nll.py:26 gets probabilities made by Mixer (Mixer) "
                              "(rows that sum to 1, made by AddBackward0), but it expects log-probabilities "
                              "(log_softmax)")
    assert result.fix.startswith("pass the log of the probabilities to nll_loss at mixture_probs_nll.py:26: torch.log(")


def test_gradients_switched_off_for_the_script_are_named_with_the_loss_made_to_require_grad(start_run) -> None:
    result = check_at(start_run, "grad_switched_off.py", "learning.graph", 20)

    assert result.status == "fail"
    assert "`torch.set_grad_enabled(False)` at grad_switched_off.py:9" in result.summary
    assert "drop `loss.requires_grad = True` at grad_switched_off.py:20" in result.fix


@pytest.mark.parametrize("shuffled", [False, True])
def test_an_evaluation_in_training_mode_fails_only_where_batch_norm_erases_the_batch(start_run, shuffled) -> None:
    run, session = start_run(SCRIPTS / "val_in_train_mode.py", *(["--shuffle-val"] if shuffled else []), break_at=30)
    wait_for(lambda: session.state == "paused", 60, "the break at step 30")
    run.command("probe", name="learning.mode", params={})
    wait_for(lambda: "learning.mode" in session.probe_results, 60, "learning.mode's result")
    result = session.probe_results["learning.mode"]

    assert any("calls under torch.no_grad() whose output goes to the loss at val_in_train_mode.py:30" in line
               for line in result.evidence), (result.summary, result.evidence)
    assert any("scored again" in line for line in result.evidence)
    if shuffled:  # mixed batches: their statistics are the running ones, and the two modes agree
        assert result.status == "pass", result.summary
    else:
        assert result.status == "fail" and result.data["cause"] == "eval_mode_training"
        assert "evaluated in training mode (val_in_train_mode.py:28 `model.train()`)" in result.summary
        assert "in place of the model.train() at val_in_train_mode.py:28" in result.fix


def test_gradients_never_reset_are_found_when_the_first_parameter_starts_with_a_zero_gradient(start_run) -> None:
    """LoRA: A's gradient is zero while B is still 0, so an early check sees clean gradients; the latest decide."""
    result = check_at(start_run, "lora_no_zero_grad.py", "learning.zero_grad", 20)

    assert result.status == "fail" and result.data["cause"] == "missing_zero_grad"


def test_a_schedule_with_gamma_zero_is_named_where_it_is_made(start_run) -> None:
    result = check_at(start_run, "steplr_gamma_zero.py", "learning.rate", 80)

    assert result.status == "fail" and "StepLR with gamma=0 (steplr_gamma_zero.py:9)" in result.summary
    # The constructor's own step is not counted; the break comes before step 80's scheduler.step().
    assert any(line.startswith("StepLR stepped 79 times in 80 steps") for line in result.evidence)
    assert result.fix.startswith("give StepLR a gamma between 0 and 1 at steplr_gamma_zero.py:9")


def test_an_output_layer_whose_weights_never_move_is_told_from_one_that_trains() -> None:
    from tuidebug.agent.facts import watch_head

    def trained(freeze_head: bool) -> bool:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        model[2].requires_grad_(not freeze_head)
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        head = watch_head("2 (Linear)", model, 1, [optimizer])
        assert head is not None and list(head.params) == ["2.weight", "2.bias"] and head.other == "0.weight"
        for _ in range(3):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(torch.randn(16, 4)), torch.randint(0, 3, (16,))).backward()
            optimizer.step()
        return not head.untouched()

    assert trained(freeze_head=False) and not trained(freeze_head=True)
    assert watch_head(" (Sequential)", nn.Sequential(nn.Linear(2, 2)), 1, []) is None  # no weights of its own


class Steps:
    def logs_only(self, batch):
        loss = batch.sum()
        self.log = loss

    def returns_loss(self, batch):
        def inner():
            return 1
        return batch.sum() + inner()

    def returns_from_a_nested_function_only(self, batch):
        def inner():
            return batch.sum()
        inner()


def test_a_training_step_that_returns_nothing_is_named_by_its_def_line() -> None:
    site = source.returns_nothing(Steps.logs_only)
    nested = source.returns_nothing(Steps.returns_from_a_nested_function_only)

    assert site is not None and site.text == "def logs_only(self, batch):"
    assert source.returns_nothing(Steps.returns_loss) is None
    assert nested is not None and nested.function == "returns_from_a_nested_function_only"


def critic_loss(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    return ((returns - values) ** 2).mean()


def test_a_hand_written_loss_pairing_a_squeezed_prediction_with_column_targets_is_named_with_the_squeeze() -> None:
    head = nn.Linear(3, 1)
    returns = torch.randn(16, 1)
    with SilentShapes(16) as watch:
        values = head(torch.randn(16, 3)).squeeze(-1)
        critic_loss(values, returns).backward()

    found = watch.pairing
    assert found is not None and (found.op, found.prediction, found.target) == ("sub", (16,), (16, 1))
    assert not found.prediction_left
    assert found.site.text == "return ((returns - values) ** 2).mean()"
    assert found.made is not None and found.made[1].text == "values = head(torch.randn(16, 3)).squeeze(-1)"
    assert "(16, 16)" in found.text()


def dice_loss(pr: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    tp = torch.sum(gt * pr)
    return 1 - 2 * tp / (pr.sum() + gt.sum())


def test_masks_without_the_channel_dim_against_one_channel_scores_are_a_broadcast_loss_fixed_by_unsqueeze() -> None:
    head, images, masks = nn.Conv2d(3, 1, 1), torch.randn(4, 3, 6, 6), (torch.rand(4, 6, 6) > 0.5).float()
    with SilentShapes(4) as watch:
        dice_loss(torch.sigmoid(head(images)), masks).backward()
    with SilentShapes(4) as lined_up:
        dice_loss(torch.sigmoid(head(images)), masks.unsqueeze(1) * torch.ones(1, 2, 1, 1)).backward()  # 2 channels

    found = watch.pairing
    assert found is not None and (found.prediction, found.target, found.result) == ((4, 1, 6, 6), (4, 6, 6), (4, 4, 6, 6))
    assert found.site.text == "tp = torch.sum(gt * pr)"
    assert "gt.unsqueeze(1) (or pr.squeeze(1))" in _pairwise(found).fix
    assert lined_up.pairing is None  # (4, 1, 6, 6) against (4, 2, 6, 6) is the usual broadcast over a dim of 1


def test_pairwise_terms_on_purpose_and_matching_shapes_are_not_taken_for_a_broadcast_loss() -> None:
    scores = nn.Linear(3, 1)(torch.randn(16, 3))
    with SilentShapes(16) as watch:
        ranking = scores - scores.squeeze(-1)  # both carry the graph: every pair on purpose
        matching = critic_loss(scores, torch.randn(16, 1))
        (ranking.mean() + matching).backward()

    assert watch.pairing is None


def test_a_column_output_against_another_models_row_is_a_broadcast_loss_even_though_both_carry_a_graph(tmp_path) -> None:
    """A GFlowNet's forward-looking loss (gflownet#257): the state flows come (N, 1) out of a Linear(h, 1) and meet
    the policy's (N,) log-probabilities; both carry a graph, yet they are two outputs, not a score column against
    its own row. The op's statement, spread over lines, is named by its first line."""
    flow, policy, states = nn.Linear(3, 1), nn.Linear(3, 4), torch.randn(16, 3)
    script = tmp_path / "fl_loss.py"
    script.write_text("per_node_loss = (\n    flows\n    + logprobs\n).pow(2)\n")
    with SilentShapes(16) as watch:
        flows = flow(states)
        logprobs = policy(states).log_softmax(-1)[:, 0]
        (flows + logprobs).pow(2).mean().backward()

    assert watch.pairing is not None and watch.pairing.both_predicted and watch.pairing.result == (16, 16)
    found = dataclasses.replace(watch.pairing, site=Site(str(script), 3, "<module>"))
    assert "in the statement at fl_loss.py:1 `per_node_loss = (`" in _pairwise(found).evidence

    embed = nn.Linear(3, 4)
    with SilentShapes(16) as distances:  # an RBF kernel's ||x||² + ||y||² - 2 x·y: every pair on purpose
        x, y = embed(states), embed(torch.randn(16, 3))
        squared = (x ** 2).sum(1, keepdim=True) + (y ** 2).sum(1) - 2 * x @ y.t()
        torch.exp(-squared).mean().backward()
    assert distances.pairing is None


def test_an_outer_sum_written_with_a_new_axis_is_pairwise_on_purpose_not_a_broadcast_loss() -> None:
    """DETR's box IoU: ``area1[:, None] + area2`` of predicted boxes against target boxes is every pair asked for
    (the matcher then reads the diagonal or the best match); the same operands without the new axis written are
    the bug."""
    head, features, targets = nn.Linear(3, 1), torch.randn(16, 3), torch.rand(16)
    with SilentShapes(16) as watch:
        boxes = head(features).squeeze(-1)
        union = boxes[:, None] + targets
        union.diagonal().sum().backward()
    with SilentShapes(16) as column:
        widened = head(features)
        (widened - targets).abs().mean().backward()
    with SilentShapes(16) as target_widened:
        flat = head(features).squeeze(-1)
        (flat - targets.unsqueeze(1)).abs().mean().backward()

    assert watch.pairing is None
    assert column.pairing is not None and column.pairing.site.text == "(widened - targets).abs().mean().backward()"
    assert target_widened.pairing is not None  # the target given the new axis against a flat prediction: the bug


def margin_loss(positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
    positive = positive.unsqueeze(dim=1)
    return torch.relu(1.0 + negative - positive).mean()


def test_a_margin_loss_whose_positives_got_one_dim_too_many_is_a_broadcast_loss_though_both_carry_the_graph() -> None:
    """(N, 1) positive scores unsqueezed to (N, 1, 1) against (N, K) negative ones: (N, N, K), every example against
    every other's negatives; a pairwise term on purpose lines real sizes up and is left alone."""
    scores = nn.Linear(3, 5)(torch.randn(8, 3))
    with SilentShapes(8) as watch:
        margin_loss(scores[:, :1], scores[:, 1:]).backward(retain_graph=True)
    with SilentShapes(8) as distances:
        (scores[:, None] - scores).pow(2).sum(-1).mean().backward()

    found = watch.pairing
    assert found is not None and found.both_predicted and found.result == (8, 8, 4)
    assert (found.prediction, found.target) == ((8, 4), (8, 1, 1))
    outcome = _pairwise(found)
    assert "every example against every other" in outcome.summary
    assert outcome.fix.startswith("drop the reshape at test_findings.py:") and "positive.unsqueeze(dim=1)" in outcome.fix
    assert distances.pairing is None


def test_a_hand_written_loss_that_broadcasts_is_a_finding_of_the_watched_iteration(start_run) -> None:
    found = next(f for f in findings_of(start_run, "hand_loss_pairs.py") if f.startswith("loss_broadcast:"))
    assert "hand_loss_pairs.py:13 `loss = ((pred - y) ** 2).mean()`" in found
    assert "prediction (64, 1) with a target (64,)" in found and "(64, 64)" in found


def test_the_watched_iteration_leaves_the_users_own_modes_in_place() -> None:
    watched = WatchedStep()
    watched.begin(WATCHED_STEP, 8, None)
    users = torch.device("cpu")  # a TorchFunctionMode, entered in the iteration and left open at its end
    users.__enter__()
    assert watched.end() is None and torch._C._len_torch_function_stack() == 2
    users.__exit__(None, None, None)
    assert watched.end() is not None
    watched.begin(WATCHED_STEP + 1, 8, None)  # once per run

    assert torch._C._len_torch_function_stack() == 0 and watched.watch is None


def test_a_view_that_gives_the_sources_sizes_in_another_order_is_told_from_a_transpose() -> None:
    windows = torch.randn(640, 20)
    relabelled, moved, flattened = Facts(), Facts(), Facts()
    relabelled.observe_first_inputs([windows.view([20, -1, 1])], None)
    moved.observe_first_inputs([windows.t().view(20, -1, 1)], None)
    flattened.observe_first_inputs([torch.randn(8, 3, 4, 4).view(8, -1)], None)

    view = relabelled.reordered_view
    assert view is not None and (view.shape, view.base) == ((20, 640, 1), (640, 20))
    assert moved.reordered_view is None and flattened.reordered_view is None
    assert relabelled.new_findings(1)[0][0] == "relabelled_view"


def test_a_view_that_makes_an_rnn_states_batch_the_first_dim_is_told_from_one_after_a_transpose() -> None:
    encoder = nn.GRU(5, 6, bidirectional=True, batch_first=True)
    tokens = torch.randn(8, 7, 5)
    with SilentShapes(8) as relabelled:
        _, hidden = encoder(tokens)
        rows = hidden.view(8, -1)
    with SilentShapes(8) as moved:
        _, hidden = encoder(tokens)
        moved_rows = hidden.transpose(0, 1).contiguous().view(8, -1)

    found = relabelled.relabel
    assert found is not None and (found.before, found.after, found.batch_dim) == ((2, 8, 6), (8, 12), 1)
    assert found.site.text == "rows = hidden.view(8, -1)"
    assert moved.relabel is None and rows.shape == moved_rows.shape


def test_labels_shifted_for_next_token_prediction_and_shifted_again_are_found_in_the_watched_iteration() -> None:
    """tiny-llm-zh#10: the dataset returns (sample[:-1], sample[1:]) and the model shifts again before its loss,
    so each position learns the token two ahead. Not found: labels shifted once (labels = input_ids, the model's
    own shift), a masked LM's targets (the tokens at the masked positions, -100 elsewhere), a Medusa head trained on
    the token after next on purpose (labels = input_ids, labels[..., 2:]), one loss per position in a loop, and
    padding, which matches every shift alike."""
    torch.manual_seed(0)
    embed, head = nn.Embedding(50, 8), nn.Linear(8, 50)
    sample = torch.randint(2, 50, (4, 33))
    inputs, labels = sample[:, :-1], sample[:, 1:]

    def loss_of(tokens: torch.Tensor, targets: torch.Tensor, ahead: int = 1) -> torch.Tensor:
        logits = head(embed(tokens))
        return F.cross_entropy(logits[:, :-ahead].reshape(-1, 50), targets[:, ahead:].reshape(-1), ignore_index=-100)

    with SilentShapes(4, 4) as twice:
        loss_of(inputs, labels)
    with SilentShapes(4, 4) as once:
        loss_of(inputs, inputs.clone())
    masked_at = torch.rand(inputs.shape) < 0.5
    with SilentShapes(4, 4) as masked:
        logits = head(embed(inputs.masked_fill(masked_at, 1)))
        F.cross_entropy(logits.reshape(-1, 50), inputs.masked_fill(~masked_at, -100).reshape(-1))
    with SilentShapes(4, 4) as medusa:
        loss_of(inputs, inputs, ahead=2)
    with SilentShapes(4, 4) as per_position:
        logits = head(embed(inputs))
        sum(F.cross_entropy(logits[:, t], labels[:, t + 1]) for t in range(30))
    padded = torch.zeros(4, 33, dtype=torch.long)
    with SilentShapes(4, 4) as padding:
        loss_of(padded[:, :-1], padded[:, 1:])

    found = twice.shifted_targets
    assert found is not None and (found.shape, found.loss, found.matched) == ((4, 32), "cross_entropy", 1.0)
    assert "targets[:, ahead:]" in found.site.text and "embed(tokens)" in found.tokens.text
    assert all(watch.shifted_targets is None for watch in (once, masked, medusa, per_position, padding))


def test_a_sequence_first_models_rnn_state_viewed_with_the_loaders_batch_first_is_a_relabel() -> None:
    """PaccMann's SMILES VAE: the model gets (seq, batch) tokens, so the model input's first dim is the sequence;
    its bidirectional GRU's (directions, batch, hidden) state viewed as (batch, directions * hidden) still puts the
    states of different molecules in one row, the DataLoader's batch being the evidence of which dim is the batch."""
    encoder = nn.GRU(5, 6, bidirectional=True)
    tokens = torch.randn(11, 8, 5)
    with SilentShapes(11, 8) as relabelled:
        _, hidden = encoder(tokens)
        rows = hidden.view(8, -1)
    with SilentShapes(11, 8) as moved:
        _, hidden = encoder(tokens)
        moved_rows = hidden.transpose(0, 1).reshape(8, -1)
    with SilentShapes(11, 8) as steps:
        outputs, _ = encoder(tokens)
        per_step = outputs.view(11 * 8, -1)
    with SilentShapes(11, 8) as items:  # 2 items of each sample with 8 channels: the batch's rows viewed back
        per_sample = torch.randn(8 * 2, 8, 3).view(8, 48)

    found = relabelled.relabel
    assert found is not None and (found.before, found.after, found.batch_dim) == ((2, 8, 6), (8, 12), 1)
    assert moved.relabel is None and steps.relabel is None and rows.shape == moved_rows.shape
    assert items.relabel is None and per_step.shape == (88, 12) and per_sample.shape == (8, 48)


def test_a_batch_flattened_with_its_positions_and_viewed_back_is_not_a_relabel_where_a_feature_has_the_batchs_size(
        ) -> None:
    """wav2vec 2.0's quantizer: codevectors (b * t, groups, dim) viewed back to (b, t, groups * dim), with 16
    samples of 15 frames and 16 values a group: the 16 of dim 2 is a feature, not the batch moved to the front."""
    frames = torch.randn(16, 15, 32)
    with SilentShapes(16) as restored:
        codes = frames.reshape(16 * 15, 2, 16)
        back = codes.view(16, 15, -1)
    with SilentShapes(16) as moved:
        states = torch.randn(2, 16, 6)
        rows = states.view(16, -1)

    assert restored.relabel is None and torch.equal(back, frames)
    assert moved.relabel is not None and moved.relabel.batch_dim == 1 and rows.shape == (16, 12)


def test_a_view_whose_dim_starts_inside_one_source_dim_and_ends_inside_the_next_mixes_positions() -> None:
    """A (2+1)D block's per-frame conv output, (b * t, c, h, w), viewed as (b * h * w, c, t) for its temporal
    conv: dim 1 takes the end of one row and the start of the next, so the time conv runs over neighbouring
    pixels of one frame. The heads of an attention split out of the features, (t, b, e) as (t, b * heads, e /
    heads), and a flatten only split and merge dims: each of their dims starts or ends on a source boundary."""
    from tuidebug.probes.shape import _relabelled

    frames = torch.randn(4 * 8, 6, 12, 12)
    with SilentShapes(4) as folded:
        frames.view(4 * 12 * 12, 6, 8)
    with SilentShapes(4) as heads:
        torch.randn(10, 4, 48).view(10, 4 * 8, 6)
        frames.view(4, 8, -1)

    assert folded.relabel is not None and folded.relabel.straddle == (1, 2, 3)
    outcome = _relabelled(folded.relabel)
    assert outcome.data["cause"] == "batch_folded"
    assert outcome.summary.endswith("reads (32, 6, 12, 12) as (576, 6, 8): its dim 1 (6) takes the last part of the "
                                    "source's dim 2 (12) and the first part of its dim 3 (12): the view mixes values "
                                    "of different positions (or features) in one dim")
    assert heads.relabel is None


def test_scores_flattened_to_rows_of_classes_before_their_class_dim_is_last_are_a_fold_fixed_by_a_permute() -> None:
    scores = torch.randn(4, 3, 10, requires_grad=True)
    frames = torch.randint(0, 3, (40,))
    with SilentShapes(4) as mixed:
        log_p = torch.log_softmax(scores, dim=1).reshape(-1, 3)
        nn.functional.nll_loss(log_p, frames)
    with SilentShapes(4) as moved:
        nn.functional.nll_loss(torch.log_softmax(scores, dim=1).permute(0, 2, 1).reshape(-1, 3), frames)
    with SilentShapes(4) as one_position:
        nn.functional.cross_entropy(torch.randn(4, 3, 1, requires_grad=True).reshape(-1, 3), frames[:4])
    with SilentShapes(4) as not_a_loss:
        torch.log_softmax(scores, dim=1).reshape(-1, 3).sum()

    found = mixed.relabel
    assert found is not None and (found.before, found.after, found.class_dim, found.loss) == ((4, 3, 10), (40, 3), 1,
                                                                                            "nll_loss")
    assert found.site.text == "log_p = torch.log_softmax(scores, dim=1).reshape(-1, 3)"
    assert moved.relabel is None and one_position.relabel is None and not_a_loss.relabel is None
    outcome = _relabelled(found)
    assert outcome.data["cause"] == "batch_folded" and outcome.fix.endswith("x.permute(0, 2, 1).reshape(40, 3)")


@pytest.mark.parametrize("layer", [nn.LSTM(5, 6), nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 1)])
def test_a_sequence_first_layer_given_the_loaders_batch_first_is_found_and_one_given_it_second_is_not(layer) -> None:
    width = 5 if isinstance(layer, nn.LSTM) else 8
    batch_first, padded = torch.randn(16, 7, width), torch.randn(7, 16, width)  # a loader's batches of 16 examples
    with SilentShapes(16, loader_batch=16) as wrong:
        layer(batch_first)
    with SilentShapes(7, loader_batch=16) as right:  # a collate that pads the sequences puts the batch second
        layer(padded)

    found = wrong.batch_as_sequence
    assert found is not None and (found.shape, found.batch) == ((16, 7, width), 16)
    assert found.site.text == "layer(batch_first)" and "batch_first=False" in found.text()
    assert right.batch_as_sequence is None


def test_a_watch_whose_own_check_raises_stops_watching_and_the_users_call_goes_on() -> None:
    class Broken(SilentShapes):
        def _paired(self, *args) -> None:
            raise ValueError("a bug of the check")

    head = nn.Linear(3, 1)
    with Broken(16) as watch:
        loss = (head(torch.randn(16, 3)) - torch.randn(16, 1)).pow(2).mean()
        loss.backward()

    assert watch.failed == "ValueError: a bug of the check" and head.weight.grad is not None


def test_a_batch_first_layer_and_a_loop_without_a_loader_are_not_taken_for_a_sequence_first_one() -> None:
    tokens = torch.randn(16, 7, 5)
    with SilentShapes(16, loader_batch=16) as built_right:
        nn.GRU(5, 6, batch_first=True)(tokens)
    with SilentShapes(16, loader_batch=None) as no_loader:  # the batch size is only the input's first dim
        nn.GRU(5, 6)(tokens)

    assert built_right.batch_as_sequence is None and no_loader.batch_as_sequence is None


def test_a_batch_first_layer_given_sequence_first_features_is_found_and_a_short_last_batch_is_not() -> None:
    lstm = nn.LSTM(5, 6, batch_first=True)
    features = torch.randn(7, 16, 5)  # (width, batch, channels): a CRNN's features permuted for CTC
    with SilentShapes(16, loader_batch=16) as swapped:
        lstm(features)
    with SilentShapes(5, loader_batch=16) as last_batch:  # 5 examples, each a sequence as long as a full batch
        lstm(torch.randn(5, 16, 5))

    found = swapped.batch_as_sequence
    assert found is not None and found.batch_first and "batch_first=True" in found.text()
    outcome = _batch_as_sequence(found, set())
    assert outcome.data["cause"] == "batch_folded" and "across the 16 examples" in outcome.summary
    assert outcome.fix.startswith("drop batch_first=True")
    assert last_batch.batch_as_sequence is None


def test_a_new_leaf_made_from_a_thresholded_output_is_the_cut() -> None:
    model = nn.Linear(3, 1)
    with GraphCut() as watch:
        scores = torch.sigmoid(model(torch.randn(4, 3)))
        hard = torch.tensor((scores > 0.5).float(), requires_grad=True)
        hard.sum().backward()

    what, site = watch.cut
    assert what == "torch.tensor(..., requires_grad=True)" and "torch.tensor((scores > 0.5)" in site.text
    assert model.weight.grad is None


def test_a_copy_of_the_output_made_a_new_leaf_is_the_cut() -> None:
    """distiller's KD policy: a forward hook keeps out.new_tensor(out, requires_grad=True); the loss built from it
    reaches the student only through a term weighted 0, so every gradient is zero."""
    student = nn.Linear(3, 2)
    kept = {}
    student.register_forward_hook(lambda module, args, out: kept.update(logits=out.new_tensor(out, requires_grad=True)))
    with GraphCut() as watch:
        out = student(torch.randn(4, 3))
        (0.0 * out.sum() + kept["logits"].pow(2).mean()).backward()

    what, site = watch.cut
    assert what == "new_tensor" and "out.new_tensor(out, requires_grad=True)" in site.text
    assert student.weight.grad is not None and not student.weight.grad.any()


def test_a_rising_loss_is_another_objectives_only_when_the_rebuilt_one_is_apart_and_falls_on_held_out_data() -> None:
    """A beta-VAE whose capacity target grows: the run's loss rises 0.07 -> 0.11 while the reconstruction the checks
    rebuild (0.0097 at the latest weights) falls on a held-out batch."""
    rising = [0.07 + 0.0004 * i for i in range(100)]
    swinging = [0.07 + (0.3 if i % 7 == 0 else 0.0) + 0.0004 * i for i in range(100)]  # gradients piled up
    trial = (0.0095, 0.0059, 0.0097, 0.0058)
    learns = _rises_by_another_objective(rising, 0.07, 0.11, trial, [])
    assert learns is not None and learns.status == "pass" and "0.0097 -> 0.0058" in learns.summary
    assert _rises_by_another_objective(rising, 0.07, 0.11, (0.12, 0.06, 0.11, 0.05), []) is None  # the same objective
    assert _rises_by_another_objective(rising, 0.07, 0.11, (0.0095, 0.0059, 0.0097, 0.0095), []) is None  # held-out
    assert _rises_by_another_objective(rising[::-1], 0.11, 0.07, trial, []) is None  # the loss falls
    assert _rises_by_another_objective(swinging, 0.07, 0.11, trial, []) is None


class _Scorer(nn.Module):
    """A model with a scoring method of its own, which an evaluation calls directly."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(4, 2)

    def calc(self, h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return (h - t).abs().sum(-1)


def test_an_allocation_in_a_method_of_the_models_own_class_is_one_of_its_intermediates() -> None:
    assert _in_model_method(["train.py:139 in <module>", "train.py:54 in calc"], _Scorer())
    assert _in_model_method(["train.py:60 in forward"], None)
    # train is nn.Module's, not the user's class's: a script's own train() function is not the model's
    assert not _in_model_method(["train.py:139 in <module>", "train.py:90 in train"], _Scorer())


def test_a_state_passed_on_from_call_to_call_is_found_as_the_input_that_carries_the_graph() -> None:
    rnn = nn.GRU(3, 4)
    hidden = torch.zeros(1, 2, 4)
    for _ in range(3):
        out, hidden = rnn(torch.randn(5, 2, 3), hidden)
    state = (hidden, hidden.clone())  # an LSTM's (h, c): the tuple holds it

    found = holders.carrying([sys._getframe()], [hidden])
    assert {name for name, _ in found} == {"hidden", "state"}
    assert dict(found)["hidden"].startswith(f"{Path(__file__).name}:")
    detached = out.detach()
    by_identity = holders.carrying([sys._getframe()], [detached])
    assert [name for name, _ in by_identity] == ["detached"]  # not `out`, whose values are the same
    assert state[0] is hidden


def test_a_binary_cross_entropy_given_targets_outside_zero_to_one_is_a_finding() -> None:
    masks, soft = Facts(), Facts()
    for facts, high in ((masks, 255.0), (soft, 0.9)):
        facts.loss_calls[0] = LossCall("binary_cross_entropy_with_logits", "train.py:12 `loss = criterion(p, m)`",
                                       [4, 16], [4, 16], "float32", "float32", None, None)
        facts.loss_calls[0].fill_ranges([-3.0, 2.0, 0.0, 0.0, high, 1.0])

    found = [f for f in masks.new_findings(1) if f[0] == "target_range"]
    assert found and "targets from 0 to 255" in found[0][1]
    assert soft.probabilities_outside() is None


def test_scores_with_as_many_positions_as_classes_given_classes_last_are_a_finding_and_moved_ones_are_not() -> None:
    tagger = nn.Linear(8, 12)  # 12 tags over sentences of 12 words: cross_entropy takes dim 1 and does not raise
    scores, tags = tagger(torch.randn(4, 12, 8)), torch.randint(0, 12, (4, 12))
    wrong, moved, log_probs = Facts(), Facts(), Facts()
    wrong.observe_loss(0, "cross_entropy", scores, tags, lambda t: "hidden2tag (Linear)" if t is scores else None)
    moved.observe_loss(0, "cross_entropy", scores.transpose(1, 2), tags, lambda t: None)
    log_probs.observe_loss(0, "nll_loss", scores.log_softmax(-1), tags, lambda t: None)

    found = [f for f in wrong.new_findings(1) if f[0] == "classes_last"]
    assert found and "(4, 12, 12) scores with their classes last (hidden2tag (Linear)'s output)" in found[0][1]
    assert log_probs.loss_calls[0].classes_last and not moved.loss_calls[0].classes_last
    outcome = _classes_last(wrong.loss_calls[0])
    assert outcome.data["cause"] == "target_out_of_range" and "cross_entropy(scores.transpose(1, 2), target)" in outcome.fix


def test_a_deepcopy_of_a_model_that_keeps_its_attention_map_names_the_attribute_and_where_it_is_stored() -> None:
    from tuidebug.agent.crash import analyse

    class Pooling(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.score = nn.Linear(4, 1)
            self.attention = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            weights = self.score(x).softmax(1)
            self.attention = weights
            return (weights * x).sum(1)

    model = Pooling()
    model(torch.randn(2, 5, 4))
    with pytest.raises(RuntimeError) as raised:
        copy.deepcopy(model)
    crash = analyse(raised.value, None, None, 2, {}, (model, ((), {})))

    assert "`attention` (Pooling) holds a (2, 5, 1) tensor with a grad_fn (SoftmaxBackward0)" in crash.findings[1]
    assert crash.fix.startswith("store it without its graph: `self.attention = weights.detach()` at test_findings.py:")


def test_a_part_called_beside_the_model_that_no_optimizer_holds_is_a_finding_only_while_the_loss_stays() -> None:
    memory, head, teacher = nn.GRU(3, 4), nn.Linear(4, 2), nn.Linear(3, 2)
    teacher.requires_grad_(False)
    optimizer = torch.optim.Adam(head.parameters(), lr=0.1)  # the memory was left out
    out, _ = memory(torch.randn(5, 2, 3))
    loss = (head(out[-1]) - teacher(torch.randn(2, 3))).pow(2).mean()
    loss.backward()
    facts = Facts()
    facts.check_outside_parts([memory, head, teacher], head, [optimizer], 1)
    optimizer.step()

    flat, falling = [1.0, 0.98, 0.99, 0.97] * 15, [1.0 - i / 80 for i in range(60)]
    part = facts.part_outside(flat)
    assert part is not None and part.kind == "GRU" and len(part.names) == 4 and part.step == 1
    assert facts.part_outside(falling) is None  # a backbone left out on purpose: the loss falls all the same
    with torch.no_grad():
        memory.weight_hh_l0.add_(1.0)  # moved by other means (an EMA, a hand-written update): not left behind
    assert facts.part_outside(flat) is None and [p.kind for p in facts.outside_parts] == ["GRU"]


def test_a_view_that_turns_channels_last_images_into_channels_first_is_found_in_the_watched_iteration() -> None:
    conv = nn.Conv2d(3, 4, 3)
    images = torch.rand(8, 10, 12, 3)  # as read from files: height, width, channels
    with SilentShapes(8) as watch:
        conv(images.view(8, 3, 10, 12))

    found = watch.relabel
    assert found is not None and (found.before, found.after, found.batch_dim) == ((8, 10, 12, 3), (8, 3, 10, 12), None)
    assert "x.permute(0, 3, 1, 2).reshape(8, 3, 10, 12)" in _relabelled(found).fix


def test_a_loss_that_levelled_off_is_told_from_one_still_falling() -> None:
    from tuidebug.probes.learning import levelled_off
    assert levelled_off([2.0] * 10 + [1.0] * 40)  # down to what the labels share, then flat
    assert not levelled_off([2.0 - 0.02 * step for step in range(50)])
    assert not levelled_off([2.0] * 10)  # too few steps to tell


def test_a_reshape_that_infers_the_batch_while_its_size_holds_several_examples_folds_the_batch() -> None:
    from tuidebug.agent.crash import _folded_reshape
    folded = _folded_reshape("shape '[-1, 115200]' is invalid for input of size 72000", batch=5)
    assert folded is not None and folded[2] and "8 x 14400" in folded[0] and ".view(x.size(0), -1)" in folded[1]
    # a batch size written first (the last batch is smaller) is not a fold
    assert _folded_reshape("shape '[16, 8, 8]' is invalid for input of size 704", batch=88) is None


def test_each_optimizer_of_a_gan_is_followed_for_gradients_never_reset() -> None:
    """Two optimizers: the generator's backward also fills the discriminator's gradients, which a correct
    loop clears with its own zero_grad later; only a loop that never resets them is found."""
    from tuidebug.agent.host_reads import HostReads
    from tuidebug.agent.resets import OptimizerResets

    def carried(reset: bool, clip: bool = False):
        torch.manual_seed(0)
        generator, discriminator = nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
        opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
        opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
        reads = HostReads()
        resets = OptimizerResets(reads, lambda: False)
        names = {id(p): name for name, p in [*generator.named_parameters(), *discriminator.named_parameters()]}
        bce = nn.BCEWithLogitsLoss()
        for step in range(1, 7):
            real, fake = torch.randn(8, 2) + 2, generator(torch.randn(8, 2))
            if reset:
                opt_d.zero_grad()
            (bce(discriminator(real), torch.ones(8, 1)) + bce(discriminator(fake.detach()), torch.zeros(8, 1))).backward()
            if clip:
                nn.utils.clip_grad_norm_(discriminator.parameters(), 1e-3)
            resets.at_step(opt_d, "optimizer 1 (Adam)", step, True, lambda p: names[id(p)])
            opt_d.step()
            if reset:
                opt_g.zero_grad()
            bce(discriminator(fake), torch.ones(8, 1)).backward()  # fills the discriminator's gradients too
            resets.at_step(opt_g, "optimizer 2 (Adam)", step, True, lambda p: names[id(p)])
            opt_g.step()
            reads.flush()
        return resets.carried(3), resets.followed_names

    found, followed = carried(reset=False)
    assert found is not None and found[1] == [4, 5, 6] and followed[found[0]] in ("weight", "0.weight", "2.weight")
    assert carried(reset=True)[0] is None
    assert carried(reset=True, clip=True)[0] is None
    # A gradient changed in place after backward (the discriminator's, clipped) is not read as carried.
    assert carried(reset=False, clip=True)[0] == ("optimizer 2 (Adam)", [4, 5, 6])


def test_a_part_left_in_eval_mode_while_the_model_trains_is_proven_by_a_replay_in_training_mode(start_run) -> None:
    result = check_at(start_run, "encoder_left_in_eval.py", "learning.mode", 20)

    assert result.status == "fail" and result.data["cause"] == "eval_mode_training"
    assert result.summary.startswith("encoder trains in eval mode while the rest of the model trains: the "
                                     "encoder.eval() at encoder_left_in_eval.py:10 is never undone")
    assert result.fix.startswith("call self.encoder.train() after building it")
    assert any(line.startswith("... with the whole model in training mode: ") for line in result.evidence)


def test_parts_in_eval_mode_and_a_loss_at_chance_level_are_told_from_healthy_ones() -> None:
    from tuidebug.agent.facts import Facts, LossCall

    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Sequential(nn.Dropout(0.1), nn.Linear(8, 3)))
    facts = Facts()
    for step in (1, 2, 3):
        facts.record_mode(step, model)
    assert facts.parts_in_eval() == []
    model[2].eval()  # the part holding dropout; a lone Linear in eval mode changes nothing and is not named
    model[0].eval()
    for step in (4, 5, 6):
        facts.record_mode(step, model)
    assert facts.parts_in_eval() == [("2", id(model[2]))]

    facts.loss_calls[0] = LossCall(function="cross_entropy", site="?", input_shape=[8, 3], target_shape=[8],
                                   input_dtype="float32", target_dtype="int64", input_producer=None,
                                   input_module=None, loss_module=None, calls=1, classes=3)
    chance = math.log(3)
    came_down = [40.0] * 10 + [5.0] * 10 + [chance * 1.003] * 40
    assert "sits at ln(3)" in facts._at_chance(lambda: came_down)
    assert facts._at_chance(lambda: [chance] * 60) is None  # starts there: the trend rule's case
    assert facts._at_chance(lambda: [40.0] * 10 + [5.0] * 10 + [chance * 0.9] * 40) is None  # below chance: it learns
    assert facts._at_chance(lambda: came_down[:40]) is None  # too few steps
    noisy = [40.0] * 10 + [5.0] * 10 + [chance * (1 + 0.025 * (-1) ** i) for i in range(40)]
    assert "sits at ln(3)" in facts._at_chance(lambda: noisy)  # a batch's mix of classes moves it a little
    assert facts._at_chance(lambda: [40.0] * 20 + [chance * (0.98 + 0.01 * (-1) ** i) for i in range(40)]) is None


def test_gradients_found_non_zero_at_a_first_backward_are_not_stale_when_the_step_resets_them_later() -> None:
    """Fast adversarial training: the attack's backward (for the input's gradient) comes first and fills the
    weights' gradients too; zero_grad() then runs before the training backward."""
    from tuidebug.agent.facts import Facts

    never, later = Facts(optimizers=1), Facts(optimizers=1)
    for facts in (never, later):
        facts.stale_grads = [(2, True), (3, True), (4, True)]
    later.zero_grad_steps.extend([2, 3, 4])

    assert "never reset" in never.never_reset()
    assert later.never_reset() is None


def test_a_schedule_that_gives_zero_at_every_step_is_named_with_the_line_that_sized_it(start_run) -> None:
    result = check_at(start_run, "schedule_sized_minus_one.py", "learning.rate", 30)

    assert result.status == "fail" and result.data["cause"] == "lr_schedule_decay"
    assert "(called from schedule_sized_minus_one.py:20 `scheduler = linear_schedule(" in result.summary
    assert result.fix.startswith("check the steps the schedule is sized with at schedule_sized_minus_one.py:20")


@pytest.mark.parametrize("args, cause", [(("1e-2",), None), (("1e-5",), "learning_rate_too_low"),
                                         (("1e-2", "exponential"), "lr_schedule_decay")])
def test_a_schedule_that_anneals_with_the_runs_end_is_judged_at_its_peak_not_as_a_decay(start_run, args, cause) -> None:
    """A cosine sized to the run ends below 1e-3 of its peak at the last step, by design: no decay to nothing.
    Its rate is judged at the peak once the script has ended: a good one passes, one far too low is named (the
    replays run at the peak). A per-batch ExponentialLR that collapses half-way is still a decay to nothing."""
    result, _ = check_after_end(start_run, "cosine_to_the_end.py", "learning.rate", *args, timeout=120)

    annealed = any("anneals the rate" in line and "judged at its peak" in line for line in result.evidence)
    assert annealed == (cause != "lr_schedule_decay"), (result.summary, result.evidence)
    assert result.data.get("cause") == cause
    if cause == "learning_rate_too_low":  # proven by replays at the peak, not by ones at the annealed rate
        assert result.data["confirmed"] and any(line.startswith("replay as written at the peak rate: ")
                                                for line in result.evidence), (result.summary, result.evidence)
    assert result.status == ("pass" if cause is None else "fail")


def test_the_step_check_at_a_break_replays_the_reordered_zero_grad_on_a_copy(start_run) -> None:
    """The check runs on the training thread, which it holds up: its replay trains a copy (borrowing
    the loop it holds up would wait for ever)."""
    result = check_at(start_run, "zero_grad_after_backward_loader.py", "learning.step", 12)

    assert result.status == "fail" and result.data["cause"] == "missing_optimizer_step"
    assert any(line.startswith("replay on a copy with zero_grad() before backward(): loss ") for line in result.evidence)
    assert result.data["confirmed"]


def test_blocks_of_the_batch_joined_along_dim_0_and_viewed_per_sample_are_a_fold_fixed_by_joining_features() -> None:
    """fairseq's combine_bidir: the two directions' final states (batch, hidden) each, joined along dim 0 and
    viewed as (1, batch, 2 x hidden): each row takes two samples of the first direction."""
    forward_state, backward_state = torch.randn(8, 5), torch.randn(8, 5)
    with SilentShapes(8) as folded:
        torch.cat([forward_state, backward_state], dim=0).view(1, 8, 10)
    with SilentShapes(8) as side_by_side:
        torch.cat([forward_state, backward_state], dim=1).view(1, 8, 10)
    with SilentShapes(8) as stacked:
        torch.cat([forward_state, backward_state], dim=0).view(2, 8, 5)  # direction first: no sample mixed

    found = folded.relabel
    assert found is not None and found.stacked is not None and found.stacked[0] == 2
    outcome = _relabelled(found)
    assert outcome.data["cause"] == "batch_folded" and "torch.cat([...], dim=1)" in outcome.fix
    assert side_by_side.relabel is None and stacked.relabel is None


def test_a_param_group_frozen_as_a_whole_is_proven_by_turning_it_back_on_and_its_guard_named(start_run) -> None:
    result = check_at(start_run, "group_frozen_by_set_trainable.py", "learning.held_frozen", 100)

    assert result.status == "fail" and result.data["cause"] == "frozen_parameters"
    assert result.summary.startswith("a param group of the optimizer is frozen: `backbone`")
    assert result.fix.startswith("drop the `if p.requires_grad:` test at group_frozen_by_set_trainable.py:11 in "
                                 "set_trainable()")
    assert "requires_grad is turned off at group_frozen_by_set_trainable.py:30 `model.set_trainable(False)`" \
        in result.evidence


def test_inputs_and_labels_split_by_two_random_splits_are_misaligned_with_both_lines_named(start_run) -> None:
    """The labels as given and shuffled both make the held-out batch worse; which one by less is noise, not labels
    that follow their inputs. Both random_split lines are named, and one split of both as the fix."""
    result = check_at(start_run, "labels_split_apart.py", "learning.trend", 100)

    assert result.status == "fail" and result.data["cause"] == "labels_misaligned", result.evidence
    assert "one sequence is shuffled on its own at labels_split_apart.py:22 `train_x, val_x = random_split(" \
        in "\n".join(result.evidence)
    assert result.fix.startswith("split once, inputs and labels together: random_split(TensorDataset(inputs, labels)")
    assert "labels_split_apart.py:22, labels_split_apart.py:23" in result.fix


def test_one_random_split_of_a_whole_dataset_is_not_a_sequence_shuffled_on_its_own(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text("train, val = random_split(dataset, [800, 200])\nrandom.shuffle(files)\n")
    assert [site.line for site in source.shuffles(str(script))] == [2]
    apart = tmp_path / "apart.py"
    apart.write_text("a, b = random_split(x, [8, 2])\nc, d = random_split(y, [8, 2])\n")
    assert [site.line for site in source.shuffles(str(apart))] == [1, 2]


def test_the_last_layer_a_forward_runs_is_not_taken_for_the_output_layer_when_the_loss_never_reaches_it(
        start_run) -> None:
    """EGNN's last block updates features it leaves unused, after the layer whose output makes the coordinates:
    that layer never moves, rightly. It is not watched as the output layer, so no finding says the head is frozen."""
    run, session = start_run(SCRIPTS / "last_layer_left_unused.py", post_mortem=False)
    wait_for(lambda: session.ended, what="the script to end")

    findings = " ".join(e.message for e in session.events if e.kind == "finding")
    assert "head_untrained" not in findings and session.exit_code == 0 and session.step == 400


def test_a_frozen_table_is_not_the_cause_where_every_trainable_weight_gets_a_zero_gradient(start_run) -> None:
    """GraphSAGE's fixed node features are most of the weights; the ReLU after them is dead. Unfreezing the
    table would give it zero gradients too: the gradients check passes it on to the dead-units check."""
    result = check_at(start_run, "frozen_table_dead_relu.py", "learning.gradients", 30)

    assert result.status == "pass", result.summary
    assert any(line.startswith("the 3 trainable parameter(s) get gradients, all zero: that, not the freeze")
               for line in result.evidence)


def test_weights_made_frozen_while_their_layers_biases_train_are_proven_by_turning_them_back_on(start_run) -> None:
    result = check_at(start_run, "weights_made_frozen.py", "learning.held_frozen", 100)

    assert result.status == "fail" and result.data["cause"] == "frozen_parameters"
    assert result.summary.startswith("layers train with their weight frozen: `0.weight`, `2.weight`")
    assert result.fix.startswith("make `0.weight`, `2.weight` trainable: drop the requires_grad=False at "
                                 "weights_made_frozen.py:10")


def test_dead_units_behind_a_functional_relu_are_found_by_its_line_and_the_layer_that_feeds_it(start_run) -> None:
    result = check_at(start_run, "functional_relu_dies.py", "learning.activations", 30)

    assert result.status == "fail" and result.data["cause"] == "dead_units"
    assert result.summary.startswith("dead units: 100% of relu at functional_relu_dies.py:15 `theta = torch.relu(")
    assert "topic feeds it; its bias: mean -50" in "\n".join(result.evidence)
    assert result.fix.startswith("initialise topic.bias to zero")


def test_a_relu_applied_in_a_loop_over_layers_is_judged_by_its_most_dead_application() -> None:
    """OpeNTF's GraphSAGE encoder, `for conv in self.encoder: x = F.relu(conv(x, edge_index))`: one line applies the
    ReLU after every layer, and the last layer's units may all be dead while the first's live."""
    from tuidebug.probes.learning import ReluWatch

    torch.manual_seed(0)
    layers = [nn.Linear(6, 8), nn.Linear(8, 8)]
    with torch.no_grad():
        layers[1].bias.fill_(-100.0)
    x = torch.randn(16, 6)
    with ReluWatch() as watch:
        for layer in layers:
            x = torch.relu(layer(x))

    (share, _), = watch.functional(set()).values()
    assert share == 1.0 and [applied[1] < 0.5 for applied in watch.applied] == [True, False]


def test_only_a_group_frozen_as_a_whole_beside_one_that_trains_counts_as_meant_to_train() -> None:
    backbone, head = nn.Linear(4, 4), nn.Linear(4, 2)
    backbone.requires_grad_(False)
    mixed = torch.optim.Adam([*backbone.parameters(), *head.parameters()])  # accelerate's fixed backbone
    grouped = torch.optim.Adam([{"params": backbone.parameters(), "lr": 1e-4}, {"params": head.parameters()}])
    resting = torch.optim.Adam([{"params": backbone.parameters(), "lr": 0.0}, {"params": head.parameters()}])
    only = torch.optim.Adam(backbone.parameters())

    assert frozen_groups(mixed) == [] and frozen_groups(resting) == [] and frozen_groups(only) == []
    assert frozen_groups(grouped) == [0]
    names = {id(p): name for name, p in nn.ModuleDict({"backbone": backbone, "head": head}).named_parameters()}
    assert split_frozen(mixed, names) == []  # a whole part set aside, not a weight frozen beside its bias
    backbone.bias.requires_grad_(True)
    assert split_frozen(mixed, names) == [backbone.weight]


def test_the_rate_an_optimizer_is_given_is_traced_to_its_assignment_or_its_option_default(tmp_path) -> None:
    script = tmp_path / "scaled.py"
    script.write_text("import argparse, torch\n"
                      "parser = argparse.ArgumentParser()\n"
                      "parser.add_argument('--lr', type=float, default=0.5)\n"
                      "def main(model, args, batch_size):\n"
                      "    base_lr = 0.02 * batch_size / 16\n"
                      "    optimizer = torch.optim.SGD(model.parameters(), lr=base_lr)\n"
                      "    other = torch.optim.SGD(model.parameters(), args.lr)\n"
                      "    fixed = torch.optim.SGD(model.parameters(), lr=0.1)\n")

    assert [site.line for site in source.rate_argument_sites(str(script), 6)] == [5]
    assert [site.line for site in source.rate_argument_sites(str(script), 7)] == [3]
    assert source.rate_argument_sites(str(script), 8) == []


def test_the_line_of_a_rate_passed_on_a_later_line_of_a_call_spanning_lines_is_named(tmp_path) -> None:
    """evo-design's optimizer, built over three lines: its rate (the genome's weight decay, by mistake) is on
    the second, the line to fix; a call on one line names no other."""
    script = tmp_path / "genome.py"
    script.write_text("import torch\n"
                      "def build(model, info):\n"
                      "    optimizer = torch.optim.SGD(model.parameters(),\n"
                      "                                lr=info['weight_decay']['val'],\n"
                      "                                momentum=0.9)\n"
                      "    other = torch.optim.SGD(model.parameters(), lr=0.1)\n")

    assert str(source.rate_argument_line(str(script), 3)) == "genome.py:4 `lr=info['weight_decay']['val'],`"
    assert source.rate_argument_line(str(script), 6) is None


def test_vanishing_gradients_through_stacked_sigmoids_are_proven_by_relu_from_the_same_fresh_start(start_run) -> None:
    result = check_at(start_run, "deep_sigmoid_regression.py", "learning.activations", 30)

    assert result.status == "fail" and result.data["cause"] == "dead_units" and result.data["confirmed"]
    assert result.summary.startswith("vanishing gradients: 5 stacked Sigmoid layers shrink the gradient")
    assert result.fix == ("use nn.ReLU instead of nn.Sigmoid between the hidden layers at deep_sigmoid_regression.py:11 "
                          "(or add normalisation between them)")


def test_the_loop_around_a_line_and_the_condition_that_gates_it_are_found(tmp_path) -> None:
    script = tmp_path / "records.py"
    script.write_text("def train(self, epochs):\n"
                      "    for epoch in range(epochs):\n"
                      "        self.fit()\n"
                      "        if epoch % self.every == 0:\n"
                      "            self.states[epoch] = self.snapshot()\n"
                      "    self.states['final'] = self.snapshot()\n")

    loop, condition = source.loop_around(str(script), 5)
    assert (loop.line, condition.line) == (2, 4)
    assert source.loop_around(str(script), 3)[1] is None
    assert source.loop_around(str(script), 6) is None


def test_an_allocation_over_every_triple_of_the_batch_is_told_from_a_large_batch() -> None:
    crash = collections.namedtuple("Crash", "operands")
    cubic = crash(["ap: (512, 512, 1) float32", "an: (512, 1, 512) float32", "margin: 5.0"])
    rows = crash(["x: (512, 768) float32", "y: (512, 768) float32"])

    assert _batch_power(512 ** 3 * 4, cubic, 512) == ((512, 512, 512), 512, 3)
    assert _batch_power(512 ** 3 * 4, cubic, 32) is None  # the batch is another length
    assert _batch_power(512 * 768 * 4, rows, 512) is None  # one axis of the batch: an ordinary activation


def test_an_eval_inside_a_function_the_loop_calls_is_named_with_the_loop_line_that_calls_it(start_run) -> None:
    result = check_at(start_run, "attack_leaves_eval.py", "learning.mode", 30)

    assert result.status == "fail" and result.data["cause"] == "eval_mode_training"
    assert "`self.model.eval()` at attack_leaves_eval.py:14, called from attack_leaves_eval.py:31" in result.summary
    assert result.fix.startswith("put the model back in training mode after attack_leaves_eval.py:31")


class Tagger(nn.Module):
    def __init__(self, num_labels: int) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 16)
        self.classifier = nn.Linear(16, num_labels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.encoder(x).relu())


def test_outputs_narrower_than_the_targets_name_the_layer_that_sizes_them_and_where_the_model_is_built() -> None:
    from tuidebug.agent.crash import FailedLoss, analyse
    model = Tagger(num_labels=6)
    x, tags = torch.randn(4, 8), torch.randint(0, 2, (4, 15)).float()
    with pytest.raises(ValueError) as raised:
        nn.functional.binary_cross_entropy_with_logits(model(x), tags)
    crash = analyse(raised.value, None, FailedLoss("binary_cross_entropy_with_logits", model(x), tags, 1), 4, {},
                    model_call=(model, ((x,), {})))

    made = f"test_findings.py:{line_of('self.classifier = nn.Linear(16, num_labels)')}"
    built = f"test_findings.py:{line_of('model = Tagger(num_labels=6)')}"
    assert any(f"come from `classifier` (Linear(in_features=16, out_features=6, bias=True)), made at {made}" in finding
               for finding in crash.findings), crash.findings
    assert crash.fix == f"give `classifier` 15 outputs, one per target column: the size it is built with at {built} gives 6"


def test_a_round_of_the_weights_without_a_straight_through_gradient_is_the_cut_of_every_gradient(start_run) -> None:
    result = check_at(start_run, "rounded_weights.py", "learning.graph", 20)

    assert result.status == "fail" and result.data["cause"] == "no_gradient_to_weights"
    assert result.summary.startswith("no gradient reaches the weights: torch.round at rounded_weights.py:11 has a "
                                     "zero derivative")
    assert result.fix.startswith("pass the gradient straight through the round at rounded_weights.py:11")


def test_outputs_rebuilt_from_numpy_and_made_to_require_grad_are_named_as_the_cut(start_run) -> None:
    """After the script ended the check trains a copy, which never runs the script's own lines between the model and
    the loss: the source names the loss's input made to require grad by hand. (A live loop's replay sees the
    detach itself.)"""
    result, _ = check_on_a_copy_after_end(start_run, "outputs_rebuilt_from_numpy.py", "learning.graph")

    assert result.status == "fail" and result.data["cause"] == "no_gradient_to_weights", result.summary
    assert result.summary.endswith("the loss's input is a new tensor made to require grad at "
                                   "outputs_rebuilt_from_numpy.py:19 (`outputs.requires_grad = True`), cut from the "
                                   "model's output")
    assert source.call_argument("loss = loss_func(outputs, labels)", 0) == "outputs"


def test_a_loss_given_a_detached_value_names_the_variable_and_the_line_that_detached_it(start_run) -> None:
    """No replay can run the script's lines once it has ended: the loss call that got an input without a graph
    names its variable, and the last line before it that assigns that variable is the one to change."""
    result, _ = check_on_a_copy_after_end(start_run, "critic_value_detached.py", "learning.graph")

    assert result.status == "fail" and result.data["cause"] == "no_gradient_to_weights", result.summary
    assert result.summary.endswith("smooth_l1_loss at critic_value_detached.py:19 gets `critic_value` with no graph "
                                   "(assigned at critic_value_detached.py:17 `critic_value = critic_value.detach()`)")
    assert result.fix.startswith("at critic_value_detached.py:17 (`critic_value = critic_value.detach()`) keep")


def test_a_rate_held_far_below_the_one_the_optimizer_was_built_with_names_the_line_that_computes_it(start_run) -> None:
    result = check_at(start_run, "warmup_never_ends.py", "learning.rate", 150)

    assert result.status == "fail" and result.data["cause"] == "learning_rate_too_low", result.summary
    assert "the schedule holds it far below the 0.5 the SGD was built with" in result.summary
    assert result.fix.startswith("check the rate computed at warmup_never_ends.py:17 (`lr_now = base_lr * min(1.0, "
                                 "step / 100000)`)")


def test_a_rate_held_low_by_a_lambda_schedule_names_the_line_of_the_lambda_that_returns_the_factor(start_run) -> None:
    result = check_at(start_run, "warmup_spans_the_run.py", "learning.rate", 40)

    assert result.status == "fail" and result.data["cause"] == "learning_rate_too_low", result.summary
    assert result.fix.startswith("check the rate computed at warmup_spans_the_run.py:14 (`return WARMUP_FACTOR * (1 - "
                                 "alpha)"), result.fix
    assert any(line.startswith("LambdaLR's factor at step ") and "returned at warmup_spans_the_run.py:14" in line
               for line in result.evidence)


def test_an_ignore_index_that_is_also_a_class_is_found_at_real_tokens_but_not_at_a_language_models_last_one() -> None:
    tokens = torch.tensor([[5, 6, 7, 8, 0, 0], [9, 4, 3, 0, 0, 0]] * 8)
    tags = torch.tensor([[0, 2, 0, 1, 0, 0], [1, 0, 2, 0, 0, 0]] * 8)  # tag 0 is a class and the padding
    tagger = Facts()
    tagger.observe_ignored("tag.py:9 `loss = ...`", "cross_entropy", tags.reshape(-1), 0, [tokens], 0)
    tagger.reads.flush()
    assert tagger._ignored_class().startswith("cross_entropy at tag.py:9 `loss = ...` ignores target 0 "
                                              "(ignore_index=0), yet 23 of the 45 real tokens inside the sequences")

    shifted = torch.cat([tokens[:, 1:], torch.zeros(16, 1, dtype=torch.long)], dim=1)  # the next token, padded
    model = Facts()
    model.observe_ignored("lm.py:9", "cross_entropy", shifted, 0, [tokens], 0)
    model.reads.flush()
    assert model.ignored_class.ignored == 0 and model._ignored_class() is None
    time_major = Facts()
    time_major.observe_ignored("lm.py:9", "cross_entropy", shifted.T, 0, [tokens.T], 0)
    time_major.reads.flush()
    assert time_major._ignored_class() is None
    source = torch.tensor([[5, 6, 7, 8, 9, 4]] * 16)  # a translation's source, longer than its target
    translation = Facts()
    translation.observe_ignored("mt.py:9", "cross_entropy", shifted, 0, [source, tokens], 0)
    translation.reads.flush()
    assert translation._ignored_class() is None  # the decoder's input is aligned with the target


def test_a_value_that_enters_torch_already_nan_is_not_made_by_the_op_that_converts_it() -> None:
    watch = ForwardWatch()
    with watch:
        torch.tensor(float("nan"))
        torch.log(torch.zeros(3))
    assert watch.first is not None and watch.first.op.endswith("log")


def test_the_logs_a_script_takes_are_told_apart_from_those_kept_above_zero(tmp_path) -> None:
    script = tmp_path / "features.py"
    script.write_text("import numpy as np, torch\n"
                      "step = np.log(6.4) / 27.0\n"
                      "mels = np.log(np.maximum(f, 1000.0) / 1000.0)\n"
                      "safe = torch.log(x + 1e-8)\n"
                      "clamped = torch.log10(S.clamp_min(1e-5))\n"
                      "log_S = torch.log10(S)\n"
                      "z = spec.log()\n")
    assert [site.line for site in source.unguarded_logs(str(script))] == [6, 7]


def test_a_forward_that_returns_its_output_cut_from_the_graph_is_found_by_its_line(tmp_path) -> None:
    script = tmp_path / "decoder.py"
    script.write_text("class Decoder:\n"
                      "    def forward(self, h):\n"
                      "        logits = self.out(h)\n"
                      "        logits = torch.stack([logits], 1).data\n"
                      "        return logits\n"
                      "class Head:\n"
                      "    def forward(self, h):\n"
                      "        kept = h.detach()\n"
                      "        return self.out(h), h.detach()\n"
                      "    def features(self, h):\n"
                      "        return h.detach()\n"
                      "class Extractor:\n"
                      "    def _hook(self, module, input, output):\n"
                      "        self.latents = output.clone().detach()\n"
                      "        self.kept = output.detach()\n"
                      "    def forward(self, img):\n"
                      "        pred = self.vit(img)\n"
                      "        return pred, self.latents.to(img.device)\n")
    assert [site.line for site in source.detached_returns(str(script), "Decoder")] == [4]
    assert source.detached_returns(str(script), "Head") == []  # kept is not returned; a tuple is not a cut return
    # a forward hook keeps a layer's output detached, and forward hands it on (self.kept is never read back)
    assert [site.line for site in source.detached_returns(str(script), "Extractor")] == [14]


def test_an_embedding_fed_an_id_the_model_picked_from_outputs_wider_than_its_table_is_a_crash_named_as_such() -> None:
    from tuidebug.agent.crash import FailedModule, analyse

    table = nn.Embedding(30, 128)
    ids = torch.tensor([[3, 103]])
    with pytest.raises(IndexError) as raised:
        table(ids)
    crash = analyse(raised.value, FailedModule(table, "token_embedding_table", [ids], 600), None, 1, {})
    assert crash.kind == "other" and crash.cause == "exception"
    assert "after 599 training steps whose ids fit: an id picked from the model's own outputs, which are 128 wide" \
        in crash.findings[0]
    assert crash.fix.startswith("make the outputs the ids are picked from 30 wide")
    first = analyse(raised.value, FailedModule(table, "token_embedding_table", [ids], 1), None, 1, {})
    assert first.kind == "shape" and first.fix == "size the embedding for every index: nn.Embedding(104, 128)"


def test_an_embedding_fed_an_id_past_its_table_after_steps_whose_ids_fit_is_a_crash_of_the_data() -> None:
    from tuidebug.agent.crash import FailedModule, analyse

    table = nn.Embedding(924, 32, padding_idx=0)  # a vocabulary of 924 words; unknown words get id 924
    ids = torch.tensor([[5, 924, 17]])
    with pytest.raises(IndexError) as raised:
        table(ids)
    crash = analyse(raised.value, FailedModule(table, "embedding", [ids], 51), None, 1, {})

    assert (crash.kind, crash.cause) == ("other", "exception")
    assert "num_embeddings=924 but got index 924, after 50 steps whose ids fit" in crash.findings[0]
    assert crash.fix.startswith("give every id a row: nn.Embedding(925, 32)")


def test_an_operand_reshaped_just_before_a_pairwise_broadcast_is_the_line_to_change(tmp_path) -> None:
    script = tmp_path / "focal.py"
    script.write_text("def focal(input, target):\n"
                      "    probs = input.sigmoid()\n"
                      "    target = target.unsqueeze(dim=1)\n"
                      "    return -(target * probs.log())\n")
    assert source.reshaped_before(str(script), "target", 4).line == 3
    assert source.reshaped_before(str(script), "probs", 4) is None  # set from another tensor: not a reshape of itself


@pytest.mark.parametrize("args, idle", [((), True), (("fixed",), False)])
def test_an_optimizer_that_never_steps_while_its_parameters_get_gradients_is_a_finding(start_run, args, idle) -> None:
    """opt_d is made and never steps (the discriminator's phase steps opt_g): a finding naming where it was
    made; stepped where it belongs, nothing."""
    run, session = start_run(SCRIPTS / "gan_steps_the_wrong_optimizer.py", *args)
    wait_for(lambda: session.state == "ended", 60, "the script to end")
    found = [e.message for e in session.events if e.kind == "finding" and e.message.startswith("idle_optimizer")]

    assert bool(found) == idle, found
    if idle:
        assert "the Adam created at gan_steps_the_wrong_optimizer.py:14 `opt_d = " in found[0]
        assert "Adam steps at gan_steps_the_wrong_optimizer.py:" in found[0]


def inverse_dispersion(alpha: torch.Tensor) -> torch.Tensor:
    return 1.0 / alpha


def test_one_over_a_tensor_is_a_division_whose_divisor_is_named_and_made_safe() -> None:
    """``1.0 / alpha`` reaches a TorchFunctionMode as Tensor.__rdiv__: a division whose divisor is its first argument."""
    alpha = torch.tensor([0.5, 0.0, 2.0], requires_grad=True)
    watch = ForwardWatch()
    with watch:
        inverse_dispersion(alpha)
    culprit = watch.first
    safe = SafeOp(culprit)
    with safe:
        kept = inverse_dispersion(alpha)

    assert culprit is not None and culprit.kind == "divide" and culprit.site.text == "return 1.0 / alpha"
    assert "the denominator `alpha` = 0 at 1 of 3 entries" in culprit.detail
    assert len(safe.applied) == 1 and bool(torch.isfinite(kept).all())


class TokenPool(nn.Module):
    """Attention pooling of a conv's tokens by a learned query; ``fold`` puts the (batch, tokens, dim) tokens into
    the layer's (tokens, batch, dim) layout with a reshape instead of a transpose."""

    def __init__(self, fold: bool) -> None:
        super().__init__()
        self.fold = fold
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, stride=4, padding=1))
        self.query = nn.Parameter(torch.randn(1, 1, 8))
        self.attention = nn.MultiheadAttention(8, 2)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        tokens = self.stem(x).flatten(2).transpose(1, 2)
        tokens = tokens.reshape(tokens.shape[1], b, 8) if self.fold else tokens.transpose(0, 1)
        pooled, _ = self.attention(self.query.expand(1, b, 8), tokens, tokens)
        return self.head(pooled.view(b, 8))


@pytest.mark.parametrize("fold", [True, False])
def test_a_reshape_that_swaps_batch_and_tokens_mixes_the_samples_where_the_layer_reads_them(fold: bool) -> None:
    """16 tokens in a batch of 16: no shape tells the dims apart, the gradient of one sample's output does.
    The weights get no gradient and the modes are put back."""
    from tuidebug.probes.batch_mixing import chart
    torch.manual_seed(0)
    model = TokenPool(fold)
    found = chart(model, (torch.randn(16, 1, 16, 16),), {}, 16)

    assert found.samples == ("mixed" if fold else "apart")
    if fold:
        assert found.first_mixed.name == "multi_head_attention_forward"
        assert found.first_mixed.site.text == "pooled, _ = self.attention(self.query.expand(1, b, 8), tokens, tokens)"
        assert found.last_apart.site.text.startswith("tokens = tokens.reshape(tokens.shape[1], b, 8)")
    assert model.training and all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("loader_batch", [4, None])
def test_a_model_given_its_batch_sequence_first_by_the_scripts_collate_is_not_read_as_mixing_samples(
        loader_batch: int | None) -> None:
    """A switch transformer's collate transposes each batch to (seq, batch, features): dim 0 holds positions, and
    attention mixes positions by design. Where the DataLoader's batch_size sits in dim 1, or dim 0 holds more rows
    than its batches (the script's sampling loop after training calls the model on a (seq, 1) prompt), changing
    "sample 0" of dim 0 says nothing: the check leaves it (it used to call the run a fold); without a DataLoader
    to say which dim is the batch, it reads dim 0 as before."""
    from tuidebug.probes.batch_mixing import mixing
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    run = types.SimpleNamespace(model=model, model_inputs=lambda: ((torch.randn(12, 4, 8),), {}),
                                loader_batch_size=lambda: loader_batch)
    outcome = mixing(types.SimpleNamespace(run=run))

    run.model_inputs = lambda: ((torch.randn(12, 1, 8),), {})  # a sampling loop's prompt, after training
    prompt = mixing(types.SimpleNamespace(run=run))

    if loader_batch:
        assert (outcome.status, prompt.status) == ("inconclusive", "inconclusive")
        assert outcome.summary == ("the model's latest input is (12, 4, 8), sequence first, with the DataLoader's "
                                   "batch of 4 in dim 1: this check changes one sample along dim 0, which does not "
                                   "hold the samples here")
        assert prompt.summary.startswith("the model's latest input is (12, 1, 8), with 12 rows in dim 0, more than "
                                         "the DataLoader's batches of 4")
    else:
        assert (outcome.status, prompt.status) == ("fail", "fail")


class LayerInForward(nn.Module):
    """A point-cloud pooling block that builds its conv inside forward: new random weights at every call."""

    def __init__(self, drift: bool = False) -> None:
        super().__init__()
        self.mlp = nn.Linear(3, 8)
        self.drift, self.calls = drift, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = nn.Conv1d(8, 8, 1)
        self.calls += 1
        return conv(self.mlp(x).transpose(1, 2)).mean(2) + (self.calls if self.drift else 0)


@pytest.mark.parametrize("drift", [False, True])
def test_the_batch_mixing_chart_reads_a_random_forward_from_one_random_state(drift: bool) -> None:
    """Every run starts from the same random state (the conv built in forward gets the same weights each
    time): the samples stay apart. An output that changes between two runs on the same inputs for another
    reason (a counter) leaves nothing to read. The script's random state is put back."""
    from tuidebug.probes.batch_mixing import chart
    torch.manual_seed(0)
    model, points = LayerInForward(drift), torch.randn(6, 5, 3)
    state = torch.get_rng_state()
    found = chart(model, (points,), {}, 6)

    assert found.samples == ("unstable" if drift else "apart")
    assert torch.equal(torch.get_rng_state(), state)


def encode_all(model: nn.Module, kept: list) -> None:
    for _ in range(3):
        kept.append(model(torch.randn(4, 4)))


def test_a_list_of_outputs_that_keep_their_graphs_is_a_leak_named_with_its_line() -> None:
    """The outputs of a loop that caches them before any step: no earlier step's graph to date them, but each
    keeps one, so what fills the memory is activations, fixed by .detach()."""
    from tuidebug.probes.memory import _kept_state
    kept: list = []
    encode_all(Head(), kept)
    found = [h for h in holders.find([sys._getframe()], [], 1, min_tensors=1) if h.name == "kept"]

    run = types.SimpleNamespace(model=None, facts=types.SimpleNamespace(source_files=set()))
    outcome = _kept_state(types.SimpleNamespace(run=run), found, [])
    assert found[0].graphs == 3 and found[0].oldest is None
    assert outcome.data["cause"] == "memory_leak" and "append x.detach()" in outcome.fix


class Graph:
    """Stands for a step's loss and the graph behind it."""


def holds_after_reassigning(read: Callable[[Any], dict]) -> bool:
    loss = Graph()
    first = weakref.ref(loss)
    assert "loss" in read(sys._getframe())
    loss = Graph()  # the next step's: the first is the loop's no longer
    return first() is not None and loss is not None


def test_reading_a_running_frames_locals_keeps_no_value_alive() -> None:
    """Before Python 3.13 f_locals leaves a snapshot on the frame that holds every local until the next read:
    read once at a step, it kept that step's graph alive all run (a GAN's loss read at the generator's first
    step, reported as a leak). frame_locals copies it and empties the snapshot."""
    from tuidebug.sites import frame_locals

    assert not holds_after_reassigning(frame_locals)
    if sys.version_info < (3, 13):
        assert holds_after_reassigning(lambda frame: frame.f_locals)
    script: dict = {}
    exec(compile("import sys\nframe = sys._getframe()", "script.py", "exec"), script)
    assert frame_locals(script["frame"]) is script  # a module's locals are its globals: the scopes stay one


class SortedEncoder(nn.Module):
    """A caption encoder that sorts the batch by length for packing and returns it sorted (``restore`` puts the
    outputs back in the order of the inputs)."""

    def __init__(self, restore: bool) -> None:
        super().__init__()
        self.restore = restore
        self.embed = nn.Embedding(20, 8)
        self.rnn = nn.GRU(8, 8, batch_first=True)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        lengths, order = lengths.sort(descending=True)
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(tokens[order]), lengths, batch_first=True)
        _, hidden = self.rnn(packed)
        out = hidden[-1]
        return out[order.argsort()] if self.restore else out


@pytest.mark.parametrize("restore", [False, True])
def test_an_encoder_that_returns_its_batch_sorted_is_read_from_its_embeddings(restore: bool) -> None:
    """Token ids carry no gradient: the embedding's output is the chart's input. Each output then reads exactly
    one other sample: the batch came back in another order."""
    from tuidebug.probes.batch_mixing import chart
    torch.manual_seed(0)
    tokens, lengths = torch.randint(1, 20, (6, 5)), torch.tensor([2, 5, 3, 4, 1, 5])
    found = chart(SortedEncoder(restore), (tokens, lengths), {}, 6)

    assert found.samples == ("apart" if restore else "reordered")
    if not restore:
        assert found.first_mixed is not None


class PairClassifier(nn.Module):
    """A question-pair classifier whose shared encoder sorts each sentence of the pair by its own lengths and
    returns the batch sorted (corpus r52b): sample 0's two encodings land in two other rows."""

    def __init__(self, restore: bool) -> None:
        super().__init__()
        self.encoder = SortedEncoder(restore)
        self.head = nn.Linear(16, 2)

    def forward(self, a: torch.Tensor, a_lengths: torch.Tensor, b: torch.Tensor,
                b_lengths: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.encoder(a, a_lengths), self.encoder(b, b_lengths)], dim=1))


@pytest.mark.parametrize("restore", [False, True])
def test_a_pair_whose_two_inputs_are_each_sorted_apart_is_reordered_not_mixed(restore: bool) -> None:
    """Changing both sentences of sample 0 moves two other outputs, which reads as mixing; changed one input at a
    time, each moves exactly one: the batch came back in another order, its labels now meet other samples."""
    from tuidebug.probes.batch_mixing import chart
    torch.manual_seed(0)
    a, b = torch.randint(1, 20, (6, 5)), torch.randint(1, 20, (6, 5))
    a_lengths, b_lengths = torch.tensor([2, 5, 3, 4, 1, 5]), torch.tensor([5, 1, 4, 2, 3, 3])
    found = chart(PairClassifier(restore), (a, a_lengths, b, b_lengths), {}, 6)

    assert found.samples == ("apart" if restore else "reordered")


def test_a_jacobian_taken_over_the_whole_batch_is_an_intermediate_that_grows_with_its_square() -> None:
    from tuidebug.probes.memory import _batch_jacobian

    def crash(line: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(site=f"cae.py:51 `{line}`", operands=["model.encoder: Sequential", "x: (128, 784) float32"])

    assert _batch_jacobian(crash("J = jacobian(model.encoder, x, create_graph=True, vectorize=True)")) == ("jacobian", "x", 128)
    assert _batch_jacobian(crash("h = torch.func.jacrev(model.encoder)(x)")) == ("jacrev", "x", 128)
    assert _batch_jacobian(crash("h = model.encoder(x)")) is None


def test_a_matmul_whose_gradient_overflows_from_huge_values_is_a_divergence_not_unsafe_math() -> None:
    """Finite forward, an incoming gradient of 1e20 against activations of 1e19: the matmul's gradient passes
    float32's 3.4e38. No domain edge: the values were already running away."""
    from tuidebug.probes.unsafe_math import BackwardWatch
    x = torch.full((2, 2), 1e19)
    w = torch.full((2, 2), 1e-3, requires_grad=True)
    loss = (1e20 * (x @ w)).sum()
    watch = BackwardWatch()
    watch.attach(loss)
    loss.backward()
    watch.detach()

    assert bool(torch.isfinite(loss)) and not bool(torch.isfinite(w.grad).all())
    assert watch.first is None and watch.first_other is not None and watch.first_other.op == "mm"


def test_memory_that_grows_with_the_square_of_the_batch_is_told_from_its_activations() -> None:
    """A relation head over every pair of 640 boxes: twice the rows, four times the bytes."""
    from tuidebug.probes.memory import _grows_with_square

    mib = 2**20
    assert _grows_with_square([(80, 13 * mib), (160, 51 * mib)]) == pytest.approx(1.97, abs=0.01)
    assert _grows_with_square([(8, 3 * mib), (16, 6 * mib), (32, 12 * mib)]) is None  # activations: linear
    assert _grows_with_square([(8, mib // 10), (16, mib // 2)]) is None  # too few bytes to tell from noise


def test_a_resident_rise_that_the_allocator_hands_back_is_not_memory_growth():
    """The real malloc_trim and RSS: readings rising far above this process's resident memory are memory the
    allocator kept (trimmed, resident memory is below them all), so no growth and the readings restart;
    readings rising from far below it stand, since trimming cannot take the process under them."""
    from tuidebug.agent.memory import process_memory, release_free_heap

    if not release_free_heap():
        pytest.skip("no glibc malloc_trim here")
    rss, _ = process_memory()
    kept_by_allocator, held = Facts(), Facts()
    for step in range(60):
        kept_by_allocator.record_memory(step, rss + 2**30 + step * 2**21, None)
        held.record_memory(step, 2**20 + step * 2**21, None)

    assert kept_by_allocator.memory_growth() is not None and kept_by_allocator.kept_memory_growth() is None
    assert len(kept_by_allocator.memory) == 1
    # The heap fills again after the trim: a rise back up to the highest reading before it is no growth and
    # is not trimmed again; a rise past it is tried again (and trimmed away again, since these are synthetic).
    top = rss + 2**30 + 59 * 2**21
    assert kept_by_allocator.heap_refill == top
    for step in range(60, 120):
        kept_by_allocator.record_memory(step, top - (119 - step) * 2**21, None)
    assert kept_by_allocator.memory_growth() is not None and kept_by_allocator.kept_memory_growth() is None
    assert len(kept_by_allocator.memory) == 61
    kept_by_allocator.record_memory(120, top + 2**30, None)
    assert kept_by_allocator.kept_memory_growth() is None and kept_by_allocator.heap_refill == top + 2**30
    assert held.kept_memory_growth() == held.memory_growth() is not None


@pytest.mark.parametrize("kept", ["carried", "replaced", "buffered"])
def test_a_graph_the_script_extends_at_every_step_outside_any_loss_is_kept_and_a_replaced_or_buffered_one_is_not(kept):
    """An EMA updated with autograd on (its shadow built from the weights and its own last value, never from a
    loss): the held graphs tagged at steps 2-5 chain, so the graphs check finds them at step 25 and the search
    names the holder. A tensor made anew from the weights each step (its old graph freed) is not kept, nor are
    the tensors of a buffer of samples that keeps each one itself (an EBM's replay buffer), not a chain."""
    weight = nn.Parameter(torch.randn(4, 4))

    class EMA:
        def __init__(self) -> None:
            self.shadow = {"weight": weight.detach().clone()}
            self.buffer: list[torch.Tensor] = []

    def run() -> tuple[Facts, Any, list]:
        facts, ema = Facts(), EMA()
        frames = [sys._getframe()]
        for step in range(1, 26):
            with torch.no_grad():
                weight.add_(0.01)
            previous = ema.shadow["weight"] if kept == "carried" else weight.detach()
            if kept == "buffered":
                ema.buffer = [(2 * weight)[:2]] + ema.buffer[:63]
            else:
                ema.shadow["weight"] = 0.1 * weight + 0.9 * previous
            if 2 <= step <= 5:
                holders.tag_held(frames, [], step, lambda t, step=step: facts.tag_held(t, step))
            if step in (5, 25):
                found = facts._graphs(step)
        return facts, found, holders.find(frames, [], 26)

    _, found, holding = run()
    if kept == "carried":
        assert found is not None and "4 earlier steps (from step 2 on: held tensor)" in found[0]
        assert any(h.name == "ema.shadow" and h.oldest == 2 for h in holding)
    else:
        assert found is None


def test_a_reentrant_checkpoint_after_a_frozen_stem_is_named_as_the_cut(start_run) -> None:
    """torch warns from its own frame that no input of the checkpoint requires grad; the user's line is taken from
    the stack, and the blocks inside that never get a gradient are named with it."""
    result = check_at(start_run, "checkpoint_frozen_stem.py", "learning.graph", 20)

    assert result.status == "fail", (result.summary, result.evidence)
    assert result.summary.startswith("no gradient reaches blocks.0.bias, blocks.0.weight")
    assert "the checkpoint at checkpoint_frozen_stem.py:19 is reentrant" in result.summary
    assert "use_reentrant=False" in result.fix and result.data["cause"] == "no_gradient_to_weights"


def test_a_parameter_converted_after_it_was_wrapped_is_named_as_outside_the_optimizer(start_run) -> None:
    result = check_at(start_run, "parameter_copied_by_to.py", "learning.optimizer", 20)

    assert result.status == "fail", (result.summary, result.evidence)
    assert result.summary.startswith("`weight` is a copy of a Parameter, not the Parameter")
    assert "at parameter_copied_by_to.py:11" in result.fix and result.data["cause"] == "parameters_not_in_optimizer"
    assert any("a float64 copy of shape (8, 1) of a float32 Parameter, in Dense" in line for line in result.evidence)


def test_a_run_that_ends_inside_its_warm_up_is_a_rate_too_low_with_the_schedules_own_peak(start_run) -> None:
    """Only a run that ended by itself says so: its rate rose at every step and ended at 2.9% of the AdamW's 1e-3;
    the LambdaLR made by a helper is named at the user's call of it, with the step its function peaks at."""
    result, session = check_on_a_copy_after_end(start_run, "warmup_longer_than_run.py", "learning.rate")
    findings = [e.message for e in session.events if e.kind == "finding"]

    assert any(f.startswith("warmup_unfinished: the learning rate never fell in the run's 60 steps") and
               "from 0 to 2.95e-05 at its end (2.9% of the 0.001 the optimizer was given), 1.5% of it on average" in f
               for f in findings), findings
    assert result.status == "fail" and result.data["cause"] == "learning_rate_too_low", result.summary
    assert result.summary.endswith("LambdaLR (made at warmup_longer_than_run.py:17) peaks at step 2000")
    assert "shorten the warm-up" in result.fix


@pytest.mark.parametrize("warmup, training, sized_in_batches", [(19, 192, True), (50, 60, False)])
def test_a_warm_up_stepped_once_an_epoch_is_told_from_one_longer_than_the_run_by_where_its_schedule_ends(
        warmup: int, training: int, sized_in_batches: bool) -> None:
    """A linear warm-up and decay sized in batches (it ends at the run's 192 steps) stepped 3 times in 3 epochs of
    64 batches never leaves its warm-up: step it per batch. One sized in epochs (50 of warm-up, ending at 60)
    stepped as meant in a run of 3 epochs is a warm-up longer than the run: shorten it."""
    from tuidebug.agent.facts import SchedulerCalls
    from tuidebug.probes.learning import _unfinished_warmup

    optimizer = torch.optim.AdamW([nn.Parameter(torch.zeros(1))], lr=1e-3)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: step / warmup if step < warmup else max(
        0.0, (training - step) / (training - warmup)))
    facts = Facts()
    facts.schedulers[id(schedule)] = SchedulerCalls("LambdaLR", "train.py:91 `scheduler.step()`", calls=3,
                                                    scheduler=weakref.ref(schedule))
    outcome = _unfinished_warmup(facts, "the run ended inside its warm-up", 192, [])
    assert ("counts its warm-up in batches (it peaks at its call 19)" in outcome.summary) is sized_in_batches
    assert outcome.fix.startswith("call scheduler.step() after every optimizer.step()" if sized_in_batches else
                                  "shorten the warm-up")


def test_a_warm_up_that_ends_or_a_run_cut_short_is_no_unfinished_warm_up() -> None:
    def facts_seeing(rates: list[float], ended: bool) -> Facts:
        facts = Facts()
        for step, lr in enumerate(rates, 1):
            facts.observe_lr(step, lr, 1e-3)
        facts.script_ended = ended
        return facts

    rising = [1e-3 * step / 2000 for step in range(1, 61)]
    assert facts_seeing(rising, ended=True).unfinished_warmup() is not None
    assert facts_seeing(rising, ended=False).unfinished_warmup() is None  # diagnose's window cut it: it goes on
    warmed = [1e-3 * min(1.0, step / 20) for step in range(1, 61)]
    assert facts_seeing(warmed, ended=True).unfinished_warmup() is None  # reached the rate set
    assert facts_seeing(rising[:10], ended=True).unfinished_warmup() is None  # a smoke test of a few steps
    per_epoch = [1e-3 * (step // 64) / 19 for step in range(192)]  # a warm-up of 19 batches stepped once an epoch
    assert "5.3% of it on average" in facts_seeing(per_epoch, ended=True).unfinished_warmup()
    assert facts_seeing([1e-3 * (step // 64) / 4 for step in range(192)], ended=True).unfinished_warmup() is None


def test_a_top_level_local_is_named_with_its_top_level_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("total = 0\nfor step in range(3):\n    total += step\n\n\n"
                      "def evaluate(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n")
    assert holders._fed_at("total", str(script), "<module>()").startswith("train.py:3 ")
    assert holders._fed_at("total", str(script), "evaluate()").startswith("train.py:9 ")


def test_moved_rows_reads_a_one_dimensional_output_a_logit_per_sample() -> None:
    from tuidebug.probes.batch_mixing import moved_rows

    before = torch.zeros(6)
    after = before.clone()
    after[2] = 1.0
    assert moved_rows(before, after, 0) == [2]
    assert moved_rows(torch.zeros(()), torch.ones(()), 0) == []  # a scalar has no rows


def test_a_view_that_merges_a_feature_maps_dims_in_another_order_is_a_relabel_fixed_by_the_permute_meant() -> None:
    """A conv front end's (batch, channels, mels, frames) viewed as (batch, frames, channels * mels) without the
    permute: each "frame" of the result takes two frames of two mel bands. The same sizes after the permute, and
    views that split or merge dims in their own order (heads out of the features), are no relabelling."""
    conv_feat = torch.randn(4, 16, 8, 64, requires_grad=True)
    with SilentShapes(4) as swapped:
        conv_feat.contiguous().view(4, 64, 128)
    with SilentShapes(4) as permuted:
        conv_feat.permute(0, 3, 1, 2).reshape(4, 64, 128)
    with SilentShapes(4) as in_order:
        conv_feat.view(4, 128, 64).view(4, 128, 2, 32)
    with SilentShapes(16) as codebook_groups:  # rows of batch, time and 2 groups; 16 values a group, as many as the batch
        torch.randn(16, 15, 32, requires_grad=True).view(16 * 15 * 2, -1)

    found = swapped.relabel
    assert found is not None and found.order == [0, 3, 1, 2]
    assert permuted.relabel is None and in_order.relabel is None and codebook_groups.relabel is None
    outcome = _relabelled(found)
    assert outcome.data["cause"] == "batch_folded"
    assert "merges the dims of (4, 16, 8, 64) in the order (0, 3, 1, 2), not their own" in outcome.summary
    assert outcome.fix.endswith("x.permute(0, 3, 1, 2).reshape(4, 64, 128)")


@pytest.mark.parametrize("args, renumbered", [((), True), (("aligned",), False)])
def test_an_evaluation_whose_classes_are_numbered_otherwise_is_a_misalignment_proven_by_its_own_predictions(
        start_run, args, renumbered) -> None:
    """The training learns; the held-out split's labels are shifted by one class. Its predictions, matched
    one-to-one to the labels, score far above the labels as given: a finding as the run goes, and the
    evaluation check names the loss line. Numbered as the training's, nothing is found."""
    result, session = check_after_end(start_run, "evaluation_classes_renumbered.py", "learning.evaluation", *args)
    found = [e.message for e in session.events if e.kind == "finding" and e.message.startswith("evaluation_renumbered")]

    assert bool(found) == renumbered, found
    assert result.status == ("fail" if renumbered else "pass"), (result.summary, result.evidence)
    if renumbered:
        assert result.data == {"cause": "labels_misaligned", "confirmed": True}
        assert "0% with the labels as given and 100% with 5 classes renumbered" in result.summary, result.summary
        assert "the loss at evaluation_classes_renumbered.py:42 `val_loss = F.cross_entropy(scores, y)`" in \
            result.evidence[0], result.evidence
        assert any(line.startswith("labelled class 1 is predicted as class 0 ") for line in result.evidence)


def test_an_evaluation_of_a_model_that_has_not_learned_is_not_taken_for_renumbered_labels() -> None:
    """One class predicted for most examples, or noise: no one-to-one matching scores far above the labels. An
    evaluation before the first step is not judged (an untrained model's clusters match any classes), and a
    teacher's small no_grad loss at every step does not push a validation pass out before it is judged."""
    classes = EvaluationClasses()
    torch.manual_seed(0)
    labels = torch.randint(0, 5, (200,))
    shifted = nn.functional.one_hot((labels + 2) % 5, 5).float()  # renumbered by two
    one_class = torch.zeros(200, 5)
    one_class[:, 3] = 1
    classes.observe(0, shifted, labels, lambda: None)
    classes.observe(1, one_class, labels, lambda: None)
    assert classes.renumbered(2) is None
    classes.observe(2, torch.randn(200, 5), labels, lambda: None)
    assert classes.renumbered(3) is None and classes.judged == 2
    classes.observe(3, shifted, labels, lambda: None)
    for step in (4, 5, 6):  # a teacher's loss at each step: 8 examples a pass
        classes.observe(step, torch.randn(8, 5), labels[:8], lambda: None)

    found = classes.renumbered(7)
    assert found is not None and found.step == 3 and found.raw == 0 and found.mapped == 1 and len(found.moves) == 5


def test_a_bessel_function_past_its_float32_range_is_unsafe_math_made_safe_by_its_scaled_form() -> None:
    """log(I0(kappa)) of a von Mises likelihood: I0 grows as exp(|x|), and torch's float32 I0 is inf from about 89."""
    from tuidebug.probes.unsafe_math import FIXES, _risk, _safe, category
    large = torch.tensor([30.0, 95.0])

    assert category("special_i0") == category("i0") == category("cosh") == "growth"
    assert "grows as exp(|x|) and overflows torch.float32" in _risk("special_i0", (large,))
    assert _risk("special_i0", (torch.tensor([3.0]),)) is None
    assert not torch.isfinite(torch.special.i0(large)).all()
    assert torch.isfinite(_safe("growth", "special_i0", torch.special.i0, (large,), {})).all()
    assert "torch.special.i0e(x)" in FIXES["growth"]


@pytest.mark.parametrize("args, found", [((), True), (("sequence",), False)])
def test_a_softmax_over_a_dim_of_size_one_is_named_from_the_watched_iteration(start_run, args, found) -> None:
    """Scores folded to (seq * batch, 1) and normalised over dim 1 weigh every item by 1: found in the iteration
    watched op by op, named with its line and the dim that holds the items. Normalised over the sequence, nothing."""
    result, session = check_after_end(start_run, "attention_pool_softmax_over_one.py", "shape.operands", *args)
    findings = [e.message for e in session.events if e.kind == "finding" and e.message.startswith("softmax_over_one")]

    assert bool(findings) == found, findings
    if found:
        assert result.status == "fail" and result.data["cause"] == "batch_folded", (result.summary, result.evidence)
        assert result.summary.startswith("softmax at attention_pool_softmax_over_one.py:26 normalises over dim 1 of "
                                         "(768, 1), which has size 1"), result.summary
        assert "dim 0 (768)" in result.fix
    else:
        assert result.data.get("cause") != "batch_folded", result.summary


def test_a_top_one_routers_softmax_over_its_single_value_is_by_design() -> None:
    """And attention over a single key ((batch, queries, 1) scores) is over one element by design: only scores
    whose dim 0 folds the batch with another dim are a fold."""
    with SilentShapes(8) as over_one:
        torch.softmax(torch.randn(40, 1, requires_grad=True), dim=-1)
    with SilentShapes(8) as router:
        values, _ = torch.topk(torch.randn(40, 4, requires_grad=True), 1)
        torch.softmax(values, dim=-1)
    with SilentShapes(8) as single_key:
        torch.softmax(torch.randn(8, 5, 1, requires_grad=True), dim=-1)

    assert over_one.singleton_softmax is not None and over_one.singleton_softmax.dim == 1
    assert router.singleton_softmax is None and single_key.singleton_softmax is None


class _Flip:
    """A random horizontal flip with its own generator, as MONAI's Randomizable transforms keep one."""

    def __init__(self) -> None:
        self.generator = random.Random(0)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.flip(-1) if self.generator.random() < 0.5 else x


class _PairedSlices(torch.utils.data.Dataset):
    """Images and their 0/1 masks; ``joint`` flips both with one draw, ``seeded`` reseeds before each call."""

    def __init__(self, image_transform: Any, mask_transform: Any, joint: Any = None, seeded: bool = False) -> None:
        self.images, self.masks = torch.randn(8, 1, 12, 12), (torch.randn(8, 1, 12, 12) > 0).float()
        self.image_transform, self.mask_transform, self.joint, self.seeded = image_transform, mask_transform, joint, seeded

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image, mask = self.images[index], self.masks[index]
        if self.joint is not None:
            image, mask = self.joint(image, mask)
        seed = random.randrange(2**31)
        if self.seeded:
            self.image_transform.generator.seed(seed)
        image = self.image_transform(image)
        if self.seeded:
            self.mask_transform.generator.seed(seed)
        mask = self.mask_transform(mask)
        return image, mask


def _joint_flip(image: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (image.flip(-1), mask.flip(-1)) if random.random() < 0.5 else (image, mask)


def test_random_transforms_drawn_apart_for_an_image_and_its_mask_are_found_without_touching_the_runs_draws() -> None:
    """One random flip object applied to the image and to the mask in two calls: each call draws its own. A flip
    of the image alone (the mask left as it is), one joint flip followed by separate deterministic calls, and one
    seed given to both calls keep each image with its mask. Reading the items moves neither the global
    generators nor the transform's own."""
    from tuidebug.agent.sample_transforms import separate_random_transforms
    flip, same = _Flip(), (lambda part: part)
    apart, image_only = _PairedSlices(flip, flip), _PairedSlices(flip, same)
    joint, seeded = _PairedSlices(same, same, joint=_joint_flip), _PairedSlices(_Flip(), _Flip(), seeded=True)
    torch_state, python_state, own_state = torch.get_rng_state(), random.getstate(), flip.generator.getstate()

    found = separate_random_transforms(apart)
    assert [(attr, arg, site.function) for attr, arg, site in found] == [
        ("image_transform", "image", "__getitem__"), ("mask_transform", "mask", "__getitem__")]
    assert found[0][2].line == _PairedSlices.__getitem__.__code__.co_firstlineno + 7
    assert separate_random_transforms(image_only) == []
    assert separate_random_transforms(joint) == []
    assert separate_random_transforms(seeded) == []
    assert torch.equal(torch.get_rng_state(), torch_state) and random.getstate() == python_state
    assert flip.generator.getstate() == own_state


def test_a_head_run_on_the_bodys_output_is_part_of_its_forward_pass_not_another() -> None:
    """``model.classifier(model(x))``: two model outputs, one forward pass. An evaluation that gathers two
    passes' outputs with their graphs holds more than a training step makes."""
    facts, body, head = Facts(), nn.Linear(4, 4), nn.Linear(4, 2)
    hidden = body(torch.randn(3, 4))
    facts.tag_graph(hidden, 1, "model output")
    logits = head(hidden)
    facts.tag_graph(logits, 1, "model output", chained=True)
    facts.step_done()
    gathered = []
    for _ in range(2):
        gathered.append(body(torch.randn(3, 4)))
        facts.tag_graph(gathered[-1], 2, "model output")

    assert facts.outputs_per_step == 1
    assert holders._outputs_in_graph([logits.grad_fn], 1) == 1
    assert holders._outputs_in_graph([torch.cat(gathered).grad_fn], 2) == 2


@pytest.mark.parametrize("values, found", [(torch.softmax(torch.randn(4, 5), 1), True),
                                           (torch.log_softmax(torch.randn(4, 5), 1), False),
                                           (torch.log(torch.softmax(torch.randn(4, 5), 1) + 1e-8), False)])
def test_kl_div_given_values_above_zero_is_given_no_log_probabilities(values, found) -> None:
    """kl_div's input is a log-distribution, never above 0 (a log(p + eps) a hair above it at p = 1): a softmax
    in place of log_softmax is found, with the loss named."""
    facts = Facts()
    facts.observe_loss(0, "kl_div", values, torch.softmax(torch.randn(4, 5), 1), lambda tensor: None)
    facts.reads.flush()

    assert facts.loss_calls[0].positive_log_probabilities == found
    assert bool(facts._loss_input()) == found


class _TaggedImages(torch.utils.data.Dataset):
    """deep_imagen#7's dataset: a tag looked up per image, None for the one image without a tag file."""

    def __init__(self) -> None:
        self.tags = {i: [1.0, 0.0] for i in range(24) if i != 13}

    def __len__(self) -> int:
        return 24

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        tag = self.tags.get(index)
        return torch.zeros(3), torch.tensor(tag)


class _TaggedImagesOrNone(_TaggedImages):
    """The same, returning the missing tag as it is: torch's collate meets the None."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        tag = self.tags.get(index)
        return torch.zeros(3), torch.tensor(tag) if tag is not None else None


def test_an_exception_in_a_dataloader_worker_names_the_workers_line_and_the_sample_not_the_loop() -> None:
    """With num_workers > 0 the loop sees a copy raised at `for x, y in loader:`; the line to fix, its message
    and the failing sample (found by loading the dataset again here, with the values on that line) are the
    worker's."""
    from tuidebug.agent.crash import LoaderShape, analyse

    dataset = _TaggedImages()
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=1)
    with pytest.raises(RuntimeError) as raised:
        for _ in loader:
            pass
    crash = analyse(raised.value, None, None, 4, {})  # the dataset is the failing iterator's, from the traceback
    assert crash.exception.startswith("RuntimeError: Could not infer dtype of NoneType (raised in DataLoader worker "
                                      "process 0, loading one sample (the Dataset's __getitem__))")
    line = _TaggedImages.__getitem__.__code__.co_firstlineno + 2
    assert crash.site == f"test_findings.py:{line} `return torch.zeros(3), torch.tensor(tag)`"
    assert crash.findings == ["sample 13 of the dataset is one that fails: loading it again in the script's own "
                              "process raises the same error"]
    assert crash.operands == ["tag: None"]
    assert crash.frames[-1].endswith("in __getitem__ (worker 0)")
    assert "for sample 13 and those like it; with num_workers=0" in crash.fix

    dataset = _TaggedImagesOrNone()
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=1)
    with pytest.raises(AttributeError) as collated:
        for _ in loader:
            pass
    crash = analyse(collated.value, None, None, 4, {}, loader=LoaderShape(24, 4, False, None))
    assert "(raised in DataLoader worker process 0, putting the samples into a batch (collate_tensor_fn))" in crash.exception
    assert crash.findings == ["sample 13 of _TaggedImagesOrNone holds None (item 1 of what its __getitem__ returns): "
                              "the DataLoader's collate (collate_tensor_fn) cannot put None in a batch"]
    assert crash.fix.startswith("make _TaggedImagesOrNone.__getitem__ return a value for sample 13 and those like it")



class _Annotations(torch.utils.data.Dataset):
    """Sample 5's annotation file is not JSON: the worker's last line names json.decoder.JSONDecodeError."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> torch.Tensor:
        import json

        boxes = json.loads("{bad" if index == 5 else "[1, 2]")
        return torch.tensor(boxes)


def test_a_worker_exception_of_a_class_outside_builtins_is_matched_by_its_bare_name() -> None:
    from tuidebug.agent.crash import analyse

    with pytest.raises(Exception) as raised:
        for _ in torch.utils.data.DataLoader(_Annotations(), batch_size=4, num_workers=1):
            pass
    crash = analyse(raised.value, None, None, 4, {})
    assert crash.exception.startswith("json.decoder.JSONDecodeError: Expecting property name")
    assert crash.findings == ["sample 5 of the dataset is one that fails: loading it again in the script's own "
                              "process raises the same error"]
