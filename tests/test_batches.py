"""Cutting a batch to its first examples, as the single-batch test does before it hands a batch to the
script's own loop: only a batch made of rows alone is cut."""

from __future__ import annotations

import torch

from tuidebug.batches import cut_whole, slice_batch


def test_a_batch_of_rows_is_cut_and_one_that_also_indexes_its_rows_is_not() -> None:
    rows = {"ids": torch.zeros(32, 12, dtype=torch.long), "mask": torch.ones(32, 12), "label": torch.zeros(32)}
    pairs = {**rows, "pairs": torch.randint(0, 32, (59, 2))}  # row indices into the batch: a cut breaks them
    graph = (torch.randn(32, 4), torch.randint(0, 32, (2, 80)))  # node features and edges

    assert cut_whole(rows, 32) and slice_batch(rows, 10, 32)["ids"].shape == (10, 12)
    assert not cut_whole(pairs, 32) and not cut_whole(graph, 32)
    assert not cut_whole((torch.randn(32, 3), torch.tensor(5)), 32)  # a count beside the rows
    assert not cut_whole(rows, None)
