"""The evaluation's labels: numbered as the training's?

A run can train well while its evaluation scores at chance or below: the evaluation set's classes are
numbered differently (each split's class folders listed in the file system's order, a class missing from
one split, a label encoder fitted on each split). The agent counts, per evaluation pass, which class the
model predicts for each labelled class (``tuidebug.agent.evaluation_classes``). The proof is the
evaluation's own predictions: read with each labelled class renumbered as the class it is most often
predicted as, they score far above the labels as given.
"""

from __future__ import annotations

from tuidebug.probe_api import FAIL, INCONCLUSIVE, PASS, ProbeContext, ProbeOutcome, probe
from tuidebug.probes.source import in_files, unsorted_listings


@probe("learning.evaluation")
def evaluation(ctx: ProbeContext) -> ProbeOutcome:
    facts = ctx.run.facts
    step = ctx.history[-1].step if ctx.history else 0
    facts.renumbered_evaluation(step, [s.loss for s in ctx.history])
    found = facts.renumbered
    if found is None:
        seen = facts.evaluation_classes.passes()
        if not seen:
            return ProbeOutcome(INCONCLUSIVE, "no evaluation with a class loss (cross_entropy, nll_loss) under "
                                "torch.no_grad() was seen")
        judged = facts.evaluation_classes.judged
        if judged:
            return ProbeOutcome(PASS, f"the evaluation's labels follow its predictions' numbering ({judged} of {seen} "
                                "passes judged, once the training loss had fallen)")
        return ProbeOutcome(INCONCLUSIVE, f"{seen} evaluation pass(es) seen, none judged: too few examples, or the "
                            "training loss had not fallen yet")
    evidence = [found.text()]
    evidence += [f"labelled class {label} is predicted as class {predicted} for {hits} of its {total} examples"
                 for label, predicted, hits, total in found.moves[:3]]
    listed = in_files(facts.source_files, unsorted_listings)
    evidence += [f"file names are listed in the file system's order at {site}: each split's folders may come in "
                 "another order" for site in listed]
    if listed:
        fix = (f"sort the listing at {listed[0].short} (`sorted(os.listdir(...))`) and build the class list once, "
               "from the training split, for every split")
    else:
        fix = ("number the evaluation's classes as the training's: build the class-to-index mapping (or the label "
               "encoder) once, on the training split, and give the same one to every split")
    return ProbeOutcome(
        FAIL, f"the evaluation's labels are numbered differently from the training's: its predictions score "
        f"{found.raw:.0%} with the labels as given and {found.mapped:.0%} with {len(found.moves)} classes renumbered "
        f"(after step {found.step})", evidence, fix, data={"cause": "labels_misaligned", "confirmed": True})
