"""Big batches: the batches kept for replays stay within a byte budget, and say so when it cut them;
the inspector's figures are accumulated in chunks and equal the ones computed directly in float64."""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import EXAMPLES, wait_for
from tuidebug.agent import inspector
from tuidebug.agent.kept_batches import DEFAULT_BUDGET, KEPT_AT_LEAST, KeptBatches

BATCH_BYTES = 64 * 9 * 4  # nan_after_warmup.py: 64 rows of 8 features and 1 target, float32
KEPT = 16  # AgentConfig.keep_batches


def _break_on_nan(start_run, **options):
    run, session = start_run(EXAMPLES / "nan_after_warmup.py", "--sleep", "0", break_on_nan=True, **options)
    try:
        wait_for(lambda: session.state == "paused", 60, "the NaN break")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: state {session.state}, step {session.step}, "
                             f"events {[e.message for e in session.events][-4:]}, output {list(session.output)[-3:]}")
    return run, session


def _inspect(run, session):
    session.batch_report = None
    run.command("inspect")
    wait_for(lambda: session.batch_report is not None, what="the batch report")
    return session.batch_report


def _bundle(run, session, folder) -> dict:
    run.command("save_bundle", path=str(folder), meta={})
    wait_for(lambda: (folder / "bundle.json").is_file() or any(e.kind == "bundle_error" for e in session.events),
             60, "the bundle")
    return json.loads((folder / "bundle.json").read_text())


def test_a_small_budget_keeps_the_latest_batches_says_so_and_the_probes_still_replay(start_run, tmp_path):
    run, session = _break_on_nan(start_run, batch_bytes=int(2.5 * BATCH_BYTES))

    report = _inspect(run, session)
    assert len(report.available) == KEPT_AT_LEAST
    assert report.step == max(report.available)  # the latest, the failing one, is kept
    assert f"batches up to step {min(report.available) - 1} not kept" in report.note
    assert "budget for batches held for replays" in report.note

    meta = _bundle(run, session, tmp_path / "bundle")
    assert meta["batches"] <= KEPT_AT_LEAST and "not kept" in meta["not_kept"]

    run.command("probe", name="nan.lr", params={})
    wait_for(lambda: "nan.lr" in session.probe_results, 120, "the learning-rate check")
    result = session.probe_results["nan.lr"]
    assert result.status in ("pass", "fail"), (result.status, result.summary, result.evidence)
    assert result.method == "replay through the script's own loop"


def test_the_default_budget_keeps_every_small_batch_and_says_nothing(start_run, tmp_path):
    run, session = _break_on_nan(start_run)

    report = _inspect(run, session)
    assert len(report.available) == KEPT and report.note == ""
    assert _bundle(run, session, tmp_path / "bundle")["not_kept"] == ""


class _Item:
    def __init__(self, step: int) -> None:
        self.step = step


def test_the_window_cuts_for_the_budget_only_and_never_below_its_floor():
    kept = KeptBatches(4, budget=3 * 400)
    for step in range(1, 4):
        kept.append(_Item(step), [torch.zeros(100)])  # 400 bytes each: three fit
    assert [c.step for c in kept] == [1, 2, 3] and kept.not_kept == ""
    kept.append(_Item(4), [torch.zeros(100)])
    assert [c.step for c in kept] == [2, 3, 4] and "up to step 1 not kept" in kept.not_kept
    kept.append(_Item(5), [torch.zeros(10_000)])  # one batch over the whole budget: the floor holds
    assert [c.step for c in kept] == [4, 5]
    for step in range(6, 10):  # small again: the window fills up to its count, and the note goes
        kept.append(_Item(step), [torch.zeros(1)])
    assert [c.step for c in kept] == [6, 7, 8, 9] and kept.not_kept == ""
    assert kept.held() == 4 * 4  # the running total follows both ways out: the count's and the budget's


def test_the_default_budget_keeps_two_big_batches_and_sixteen_small_ones():
    big, small = KeptBatches(16, None), KeptBatches(16, None)
    for step in range(20):
        big.append(_Item(step), [torch.zeros(DEFAULT_BUDGET // 4 // 2)])  # half the budget each (float32)
        small.append(_Item(step), [torch.zeros(2**20 // 4)])  # 1 MiB each
    assert len(list(big)) == KEPT_AT_LEAST and "not kept" in big.not_kept
    assert len(list(small)) == 16 and small.not_kept == ""


def _reference(t: torch.Tensor) -> dict:
    values = t.double()
    finite = values[torch.isfinite(values)]
    return {"nan": int(torch.isnan(values).sum()), "inf": int(torch.isinf(values).sum()),
            "nan_at": torch.isnan(values).nonzero()[:inspector.MAX_LOCATIONS].tolist(),
            "inf_at": torch.isinf(values).nonzero()[:inspector.MAX_LOCATIONS].tolist(),
            "min": float(finite.min()), "max": float(finite.max()), "mean": float(finite.mean()),
            "std": float(finite.std())}


def _with_nonfinite(t: torch.Tensor) -> torch.Tensor:
    flat = t.view(-1)
    flat[3], flat[flat.numel() // 2], flat[-1] = math.nan, math.inf, -math.inf
    flat[7::97] = math.nan  # more than MAX_LOCATIONS, spread over many chunks
    return t


@pytest.mark.parametrize("name, tensor", [
    ("float32", _with_nonfinite(torch.randn(300, 7))),
    ("not contiguous", _with_nonfinite(torch.randn(7, 300)).t()),
    ("float16", _with_nonfinite(torch.randn(40, 50).half())),
    ("offset mean", 1000 + torch.randn(200, 10)),
    ("large", torch.randn(500) * 1e25),
    ("integers", torch.randint(-5, 5, (64, 9))),
])
def test_chunked_figures_equal_the_float64_ones(monkeypatch, name, tensor):
    monkeypatch.setattr(inspector, "CHUNK_ELEMENTS", 64)  # many chunks, the NaN and Inf in several
    info, expected = inspector.summarise("batch", tensor, 0), _reference(tensor)

    for key in ("nan", "inf", "nan_at", "inf_at"):
        assert info[key] == expected[key], key
    for key in ("min", "max", "mean", "std"):
        assert info[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6 * expected["std"]), key
    assert info["example"] == pytest.approx(tensor[0].double().flatten()[:inspector.EXAMPLE_VALUES].tolist(),
                                            nan_ok=True)


def test_chunked_label_counts_equal_the_direct_ones(monkeypatch):
    monkeypatch.setattr(inspector, "CHUNK_ELEMENTS", 10)
    labels = torch.randint(0, 7, (257,))
    classes, counts = torch.unique(labels, return_counts=True)

    assert inspector.summarise("batch", labels, 0)["labels"] == dict(zip(map(str, classes.tolist()), counts.tolist()))
    assert inspector.summarise("batch", torch.arange(200), 0)["labels"] is None  # past MAX_CLASSES
