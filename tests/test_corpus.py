"""The quick subset of the bug corpus (``fast = true`` in corpus/*/manifest*.toml), one case a test:
``tuidebug diagnose`` must name each case's failure class and cause with the evidence its manifest
asks for, as ``make corpus`` scores the whole corpus."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("corpus_run", ROOT / "corpus" / "run.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules["corpus_run"] = corpus  # dataclasses look their module up while the class is built
_spec.loader.exec_module(corpus)

FAST = corpus.select(corpus.load_cases(), [], fast=True)


def test_the_quick_subset_spans_every_class():
    assert {case.expected_class for case in FAST} == set(corpus.CLASSES)


@pytest.mark.parametrize("case", FAST, ids=[case.id for case in FAST])
def test_corpus_case_is_diagnosed_right(case):
    outcome = corpus.run_case(case, [sys.executable, "-m", "tuidebug"])

    assert outcome.error == ""
    assert (outcome.failure_class, outcome.cause) == (case.expected_class, case.cause), outcome.summary
    assert outcome.missing_evidence == [], outcome.summary
