"""The classes an evaluation predicts, against the classes its labels give.

A class loss (cross_entropy, nll_loss) called with gradients off scores an evaluation. Counting, for
each evaluation pass, how often each labelled class is predicted as each class (a confusion matrix,
summed on the tensors' device and read once a pass) tells a model that has not learned from an
evaluation whose labels are numbered differently from the training's (class folders listed in another
order in each split, a label encoder fitted on each split, a class missing from one split): there the
examples of each labelled class are mostly predicted as one *other* class, a different one for each.
Nothing here runs on a training step.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass

import torch

from tuidebug.sites import Site

MAX_CLASSES = 256  # the counts of one pass: at most 256 x 256 numbers
# A pass is judged once it holds MIN_SAMPLES examples and PER_CLASS per class on average: fewer leave
# each class's most frequent prediction to chance.
MIN_SAMPLES = 30
PER_CLASS = 3
# Numbered differently: matching labelled classes one-to-one to predicted classes (the most frequent pairs
# first) moves at least two classes, scores at least MAPPED of the pass's examples, and the labels as given
# score at most RAW_SHARE of what the matching scores. A model that has not learned predicts one class for
# most examples (one pair holds them, the rest of the matching scores little) or noise (each pair near
# chance, far below MAPPED); a model that learned scores best with the labels as given. The corpus's one
# case (a class missing from the validation folder shifts every later class by one) scores 0.06-0.15 as
# given and 0.74-0.83 matched from its fourth evaluation on, with training accuracy 0.7-0.8.
MAPPED = 0.5
RAW_SHARE = 0.5
SHOWN_MOVES = 6


@dataclass
class EvaluationPass:
    """The counts of one evaluation pass: the evaluation calls made between two optimizer steps."""

    step: int  # the optimizer steps made before it
    classes: int
    device: torch.device
    counts: torch.Tensor  # (classes * classes + 1,) int64: labelled class * classes + predicted class, then the ignored
    site: Site | None  # the user's line of its loss call
    samples: int = 0  # examples counted, known without reading the counts
    judged: bool = False


@dataclass
class Renumbered:
    """An evaluation pass whose labels follow another numbering than its predictions."""

    step: int
    samples: int
    raw: float  # accuracy with the labels as given
    mapped: float  # accuracy with each labelled class read as the predicted class it is matched to
    moves: list[tuple[int, int, int, int]]  # (labelled class, predicted class, examples so predicted, examples)
    site: Site | None

    def text(self) -> str:
        shown = ", ".join(f"label {label} -> predicted {predicted} ({hits}/{total})"
                          for label, predicted, hits, total in self.moves[:SHOWN_MOVES])
        more = f" and {len(self.moves) - SHOWN_MOVES} more" if len(self.moves) > SHOWN_MOVES else ""
        where = f" (the loss at {self.site})" if self.site is not None else ""
        return (f"the evaluation after step {self.step}{where} scores {self.raw:.0%} of {self.samples} examples with its "
                f"labels as given and {self.mapped:.0%} with {len(self.moves)} classes renumbered: {shown}{more}")


class EvaluationClasses:
    """The evaluation passes of a run: the one in progress, and the last two finished ones large enough to judge
    (a no_grad class loss inside every training step, a teacher's or a logged metric's, makes a small pass a step:
    those do not push a validation pass out before it is judged)."""

    def __init__(self) -> None:
        self._current: EvaluationPass | None = None
        self._finished: collections.deque[EvaluationPass] = collections.deque(maxlen=2)
        self._count = 0
        self.judged = 0  # passes judged

    def observe(self, step: int, scores: torch.Tensor, target: torch.Tensor, site: Callable[[], Site | None]) -> None:
        """A class loss's (N, C) scores and (N,) class labels at an evaluation after ``step`` optimizer steps;
        ``site`` gives the user's line, asked once a pass."""
        classes = scores.shape[1]
        if classes < 2 or classes > MAX_CLASSES or target.shape != scores.shape[:1] or target.device != scores.device:
            return
        # no host read here: the counts stay on the device until a pass is judged. Counts made under inference
        # mode (Lightning's validation) are inference tensors, which no later update outside it may write to.
        with torch.no_grad(), torch.inference_mode(False):
            labels = target.detach().long()
            kept = (labels >= 0) & (labels < classes)  # an ignore_index (-100) is no class: counted past the end
            codes = torch.where(kept, labels.clamp(0, classes - 1) * classes + scores.detach().argmax(1),
                                classes * classes)
            current = self._current
            if current is None or (current.step, current.classes, current.device) != (step, classes, codes.device):
                self._finish()
                current = self._current = EvaluationPass(
                    step, classes, codes.device, torch.zeros(classes * classes + 1, dtype=torch.long,
                                                             device=codes.device), site())
                self._count += 1
            current.counts.scatter_add_(0, codes, torch.ones_like(codes))
        current.samples += int(target.shape[0])

    def _finish(self) -> None:
        if self._current is not None and self._current.samples >= MIN_SAMPLES:
            self._finished.append(self._current)
        self._current = None

    def passes(self) -> int:
        """How many evaluation passes were seen."""
        return self._count

    def renumbered(self, current_step: int, ended: bool = False) -> Renumbered | None:
        """The latest finished pass after training began (or, once the script ended, the one in progress too)
        if its labels are numbered differently from its predictions; each pass is read once. Asked only once the
        training loss has fallen (a model that has not learned yet may match its labels to anything)."""
        current = self._current
        if current is not None and (current.step < current_step or ended):
            self._finish()
        for seen in reversed(self._finished):
            if seen.judged or seen.step == 0:  # before any step, an untrained model's clusters match nothing
                continue
            seen.judged = True
            self.judged += 1
            found = _judge(seen)
            if found is not None:
                return found
        return None


def _judge(seen: EvaluationPass) -> Renumbered | None:
    classes = seen.classes
    flat = seen.counts.tolist()
    rows = [flat[label * classes:(label + 1) * classes] for label in range(classes)]
    samples = sum(map(sum, rows))
    labelled = sum(1 for row in rows if sum(row) > 0)
    if samples < max(MIN_SAMPLES, PER_CLASS * labelled):
        return None
    mapping = _one_to_one(rows)
    moves = [(label, predicted, rows[label][predicted], sum(rows[label]))
             for label, predicted in sorted(mapping.items()) if predicted != label]
    raw = sum(rows[label][label] for label in range(classes)) / samples
    mapped = sum(rows[label][predicted] for label, predicted in mapping.items()) / samples
    if len(moves) < 2 or mapped < MAPPED or raw > RAW_SHARE * mapped:
        return None
    return Renumbered(seen.step, samples, raw, mapped, moves, seen.site)


def _one_to_one(rows: list[list[int]]) -> dict[int, int]:
    """Each labelled class matched to one predicted class, no two to the same, the most frequent pairs first
    (greedy: a model that confuses two classes now and then leaves the rest of the matching as it is)."""
    cells = sorted(((count, label, predicted) for label, row in enumerate(rows) for predicted, count in enumerate(row)
                    if count > 0), reverse=True)
    mapping: dict[int, int] = {}
    taken: set[int] = set()
    for _, label, predicted in cells:
        if label not in mapping and predicted not in taken:
            mapping[label] = predicted
            taken.add(predicted)
    return mapping
