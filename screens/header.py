"""The two lines at the top: what runs where, and how it is doing."""

from __future__ import annotations

import os
import re

from rich.text import Text
from textual.widgets import Static

from tuidebug.format import bytes_text, number, seconds_text
from tuidebug.session import Session, exit_text

_CODE = re.compile(r"code (-?\d+)")
SCRIPT_OVER = ("ended", "finished", "crashed")  # "ended": over, its process held for the post-mortem
STATE_STYLES = {"running": "bold green", "paused": "bold yellow", "finished": "bold", "crashed": "bold red"}


def state_text(session: Session) -> tuple[str, str]:
    """The state as a user reads it ("finished, code 0"), and what it means (why it paused)."""
    state, reason = session.state, session.reason
    if session.ended:
        return f"{state}, {exit_text(session.exit_code)}", ""
    if state == "ended":
        # The script is over but its process holds the last batch and model: the post-mortem.
        crashed = any(event.kind == "exception" for event in session.events)
        match = _CODE.search(reason)
        code = f", code {match.group(1)}" if match else ""
        return f"{'crashed' if crashed else 'finished'}{code}", "post-mortem: q quits"
    if state == "paused" and reason == "paused" and session.where:
        return state, f"at {session.where}"  # a plain pause: where it stopped is the news
    return state, reason


def device_text(session: Session) -> str:
    device = session.device
    if device is None:
        return "device ?"
    if device.kind == "cpu":
        return "CPU"
    total = f" ({bytes_text(device.total_bytes)})" if device.total_bytes else ""
    return f"{device.name}{total}"


class RunHeader(Static):
    """Three facts lines at most, fitted to the width: who runs where, how it is doing, and why it
    stopped; a fact that does not fit is left out whole or goes to the next line, never cut."""

    def __init__(self, script: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.script = script
        self._shown: Text | None = None

    def show(self, session: Session, break_on_nan: bool, own_cost: str | None = None) -> None:
        width = self.content_size.width or self.app.size.width - 2  # before the first layout
        with session.lock:
            text = header_text(session, self.script, break_on_nan, width, own_cost)
        if self._shown is not None and text == self._shown:
            return
        # The screen's layout is redone only when the header gains or loses a line: a layout repaints the
        # whole screen, a plain refresh only the header (most of the screen's cost at 4 frames a second).
        self.update(text, layout=self._shown is None or text.plain.count("\n") != self._shown.plain.count("\n"))
        self._shown = text


GAP = "  "


def header_text(session: Session, script: str, break_on_nan: bool, width: int = 200, own_cost: str | None = None) -> Text:
    """Line 1: tuidebug, pid, device, the NaN break, then the script (the one part that may be cut,
    from its end, after its folders went). Line 2: the state, the figures always shown, the state's
    detail (why it paused) if it fits, else on line 3, then the figures that fit, the screen's own
    cost first when asked for (``own_cost``)."""
    pid = session.pid if session.pid is not None else "-"
    facts = Text.assemble(("tuidebug", "bold"), GAP, f"pid {pid}", GAP, device_text(session),
                          GAP, f"NaN break {'on' if break_on_nan else 'off'}")
    first = facts + Text(GAP + script_text(script, width - facts.cell_len - len(GAP)))
    state, detail = state_text(session)
    needed, optional = progress_facts(session)
    optional = [own_cost, *optional] if own_cost else optional
    second = Text.assemble((state.upper(), STATE_STYLES.get(state.split(",")[0], "bold")))
    room = width - second.cell_len - len(GAP)
    lines = [first, second]
    if detail and len(GAP.join([*needed, detail])) <= room:
        facts = [*packed(needed, optional, room - len(GAP + detail)), detail]
    else:
        facts = packed(needed, optional, room)
        if detail:
            lines.append(Text(detail))  # not even beside the needed figures: a line of its own
    second.append("".join(GAP + fact for fact in facts))
    return Text("\n").join(lines)  # a line still too long is cut by the stylesheet


def progress_facts(session: Session) -> tuple[list[str], list[str]]:
    """The second line's figures: those always shown, and those shown where they fit."""
    rate, samples = session.steps_per_second(), session.samples_per_second()
    needed = [f"step {session.step}"]
    if session.epoch is not None:
        needed.append(f"epoch {session.epoch}")
    needed.append(f"{rate:.1f} steps/s" if rate is not None else "- steps/s")
    needed.append(f"lr {number(session.lr.latest)}")
    optional = []
    left = session.time_left_text()
    if left is not None:
        optional.append(left)
    optional.append(f"elapsed {seconds_text(session.elapsed)}")
    last = session.last_step
    if last is not None and last.epoch_batches is not None and last.epoch_batch is not None:
        optional.append(f"batch {last.epoch_batch}/{last.epoch_batches}")
    if samples is not None:
        optional.append(f"{samples:.0f} samples/s")
    if rate is not None:
        optional.append(f"{seconds_text(1 / rate) if rate < 1 else f'{1000 / rate:.0f} ms'}/step")
    optional.extend(fact for fact in (session.busy_text(), session.sampling_text()) if fact is not None)
    return needed, optional


def packed(needed: list[str], optional: list[str], room: int) -> list[str]:
    """The needed facts, then as many of the optional ones, in order, as fit in ``room`` columns."""
    facts = list(needed)
    for fact in optional:
        if len(GAP.join([*facts, fact])) > room:
            break
        facts.append(fact)
    return facts


def script_text(script: str, room: int) -> str:
    """The script and its arguments in ``room`` columns: whole if they fit, else without the script's
    folders, else cut at the end."""
    if len(script) <= room:
        return script
    short = " ".join(os.path.basename(word) if word.endswith(".py") else word for word in script.split(" "))
    return short if len(short) <= room else short[: max(room - 1, 0)] + "…"
