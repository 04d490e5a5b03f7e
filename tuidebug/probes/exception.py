"""The crash check: an exception outside the protocol's classes, explained in the user's terms.

The agent analysed the exception when the script raised it (``tuidebug.agent.crash``): the
innermost line of the user's code and the values named on it. This check reports that analysis.
"""

from __future__ import annotations

from tuidebug.probe_api import FAIL, PASS, ProbeContext, ProbeOutcome, probe


@probe("crash.exception", on_training_thread=True)
def exception(ctx: ProbeContext) -> ProbeOutcome:
    crash = ctx.run.crash
    if crash is None:
        return ProbeOutcome(PASS, "the script raised no exception")
    where = f" at {crash.site}" if crash.site else ""
    fix = crash.fix or (f"the script raised {crash.exception.split(':', 1)[0]}{where}: fix the line, with the values "
                        "the evidence lists")
    # What the analysis found is the news (the batch of 1 at the epoch's end), the exception its symptom.
    cause = "".join(f"{finding}; " for finding in crash.findings[:2])
    return ProbeOutcome(FAIL, f"{cause}{crash.exception}{where}", crash.lines(), fix)
