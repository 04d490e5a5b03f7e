"""Random transforms a Dataset applies to a sample's parts in separate calls.

``img = self.img_transform(img)`` then ``seg = self.seg_transform(seg)``: each call draws its own rotation or
flip, so the mask stops matching its image, a misalignment by construction (MONAI's ArrayDataset before it
shared one seed, torchvision's v1 transforms applied to an image and its mask). Read once a run, from a copy of
the dataset whose transforms are copies too, with the random generators put back: the run's own draws stay
as they were.
"""

from __future__ import annotations

import copy
import inspect
import sys
from typing import Any

import torch

from tuidebug.agent.snapshot import rng_state, set_rng_state
from tuidebug.probes.source import attribute_calls
from tuidebug.sites import Site

READS = 6  # reads of one item: two parts drawn alike in all six, (1/3 x 1/2)^5 for a rotation and a flip


def separate_random_transforms(dataset: Any) -> list[tuple[str, str, Site]]:
    """(attribute, argument, line) of the transforms ``__getitem__`` applies to two or more parts of a sample in
    separate calls, when they draw at random: READS reads of item 0 differ in two parts or more. A random
    transform of the input alone (colour jitter) changes one part only."""
    calls = [(attr, arg, line) for attr, arg, line in attribute_calls(type(dataset))
             if callable(value := getattr(dataset, attr, None)) and not inspect.ismethod(value)
             and not isinstance(value, torch.nn.Module)]
    if len({arg for _, arg, _ in calls}) < 2:
        return []
    reads = _reads_of_a_copy(dataset, {attr for attr, _, _ in calls})
    if not reads or not all(isinstance(read, (tuple, list)) and len(read) == len(reads[0]) for read in reads):
        return []
    varying = [any(not _equal_parts(part, read[index]) for read in reads[1:]) for index, part in enumerate(reads[0])]
    if sum(varying) < 2:
        return []
    path = inspect.getsourcefile(type(dataset).__getitem__)
    return [(attr, arg, Site(path, line, "__getitem__")) for attr, arg, line in calls]


def _reads_of_a_copy(dataset: Any, transforms: set[str]) -> list[Any]:
    """Item 0 read READS times from a shallow copy of ``dataset`` holding copies of ``transforms`` (their own
    generators advance there, not in the run), the global generators restored afterwards."""
    state = rng_state()
    try:
        trial = copy.copy(dataset)
        for attr in transforms:
            setattr(trial, attr, copy.deepcopy(getattr(dataset, attr)))
        return [trial[0] for _ in range(READS)]
    except Exception:  # the script's own dataset and transforms: whatever they raise, nothing is found
        return []
    finally:
        set_rng_state(state)


def _equal_parts(a: Any, b: Any) -> bool:
    """Whether two reads of one part of a sample (a tensor, an array, a number) are the same."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(a, numpy.ndarray) and isinstance(b, numpy.ndarray):
        return a.shape == b.shape and bool(numpy.array_equal(a, b))
    try:
        return bool(a == b)
    except Exception:  # a type whose comparison gives no single answer: taken as unchanged
        return True
