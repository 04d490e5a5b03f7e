"""The quick subset of the bug corpus (``fast = true`` in corpus/*/manifest*.toml), one case a test:
``tuidebug diagnose`` must name each case's failure class and cause with the evidence its manifest
asks for, as ``make corpus`` scores the whole corpus. The cases are diagnosed two at a time, as
``make corpus`` runs them, ahead of the tests that read them."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("corpus_run", ROOT / "corpus" / "run.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules["corpus_run"] = corpus  # dataclasses look their module up while the class is built
_spec.loader.exec_module(corpus)

FAST = corpus.select(corpus.load_cases(), [], fast=True)
# One worker runs them all: each worker that ran some would start the module's pool for every case (the
# fixture reads the session's items), doubling the diagnoses and loading the box under the other tests.
pytestmark = pytest.mark.xdist_group("corpus")


def test_the_quick_subset_spans_every_class():
    assert {case.expected_class for case in FAST} == set(corpus.CLASSES)


@pytest.fixture(scope="module")
def diagnosed(request: pytest.FixtureRequest) -> Iterator[dict[str, Future]]:
    """The selected cases' diagnoses, started at once, two at a time; the pool is drained before the
    next module starts (no case's process outlives this one)."""
    selected = [item.callspec.params["case"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {case.id: pool.submit(corpus.run_case, case, [sys.executable, "-m", "tuidebug"]) for case in selected}


@pytest.mark.parametrize("case", FAST, ids=[case.id for case in FAST])
def test_corpus_case_is_diagnosed_right(case, diagnosed):
    outcome = diagnosed[case.id].result()

    assert outcome.error == ""
    assert (outcome.failure_class, outcome.cause) == (case.expected_class, case.cause), outcome.summary
    assert outcome.missing_evidence == [], outcome.summary
