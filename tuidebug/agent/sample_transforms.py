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

READS = 12  # reads of one item: enough that an image's rotation or flip repeats while its mask's differs
MASK_VALUES = 64  # a dense label (a mask, a label map) holds a few distinct values


def separate_random_transforms(dataset: Any) -> list[tuple[str, str, Site]]:
    """(attribute, argument, line) of the transforms ``__getitem__`` applies to an image and its dense label
    (two parts of one height and width, one of them with few distinct values) in separate calls, when their
    draws are independent: over READS reads of item 0, one read repeats the image of an earlier read while
    its label differs. A shared seed or a joint transform keeps each image with its one label; a random
    transform of the image alone (colour jitter) leaves the label as it is. Nothing found if anything raises."""
    try:
        calls = [(attr, arg, line) for attr, arg, line in attribute_calls(type(dataset))
                 if callable(value := getattr(dataset, attr, None)) and not inspect.ismethod(value)
                 and not isinstance(value, torch.nn.Module)]
        if len({arg for _, arg, _ in calls}) < 2:
            return []
        reads = _reads_of_a_copy(dataset, {attr for attr, _, _ in calls})
        if not reads or not all(isinstance(read, (tuple, list)) and len(read) == len(reads[0]) for read in reads):
            return []
        if not _drawn_apart(reads):
            return []
        path = inspect.getsourcefile(type(dataset).__getitem__)
    except Exception:  # the script's own dataset: whatever its attributes or items raise, nothing is found
        return []
    return [(attr, arg, Site(path, line, "__getitem__")) for attr, arg, line in calls]


def _drawn_apart(reads: list[Any]) -> bool:
    """Whether some image part, repeated across reads, comes with a different label part."""
    parts = range(len(reads[0]))
    for image in parts:
        for label in parts:
            if image == label or not _image_and_label(reads[0][image], reads[0][label]):
                continue
            for later, read in enumerate(reads[1:], 1):
                if any(_equal_parts(read[image], earlier[image]) and not _equal_parts(read[label], earlier[label])
                       for earlier in reads[:later]):
                    return True
    return False


def _image_and_label(image: Any, label: Any) -> bool:
    """An image and its dense label: tensors (or arrays) of one height and width, the label with few distinct
    values."""
    numpy = sys.modules.get("numpy")
    image, label = (torch.as_tensor(part) if numpy is not None and isinstance(part, numpy.ndarray) else part
                    for part in (image, label))
    return isinstance(image, torch.Tensor) and isinstance(label, torch.Tensor) and image.dim() >= 2 \
        and label.dim() >= 2 and image.shape[-2:] == label.shape[-2:] and image.numel() > label.numel() // 2 \
        and len(torch.unique(label)) <= MASK_VALUES < len(torch.unique(image))


def _reads_of_a_copy(dataset: Any, transforms: set[str]) -> list[Any]:
    """Item 0 read READS times from a shallow copy of ``dataset`` holding copies of ``transforms`` (their own
    generators advance there, not in the run), the global generators restored afterwards."""
    state = rng_state()
    try:
        trial = copy.copy(dataset)
        # copied together: one object under two names (the same transform for the image and the mask) stays one
        for attr, value in copy.deepcopy({attr: getattr(dataset, attr) for attr in transforms}).items():
            setattr(trial, attr, value)
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
