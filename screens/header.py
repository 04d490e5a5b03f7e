"""The two lines at the top: what runs where, and how it is doing."""

from __future__ import annotations

import re

from rich.text import Text
from textual.widgets import Static

from tuidebug.format import bytes_text, seconds_text
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
    """Script and arguments, pid, device; state, step, epoch, elapsed time and speed."""

    def __init__(self, script: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.script = script

    def show(self, session: Session, break_on_nan: bool) -> None:
        with session.lock:
            text = header_text(session, self.script, break_on_nan)
        self.update(text)


def header_text(session: Session, script: str, break_on_nan: bool) -> Text:
    pid = session.pid if session.pid is not None else "-"
    first = Text.assemble(("tuidebug ", "bold"), script, f"   pid {pid}   ", device_text(session),
                          f"   NaN break {'on' if break_on_nan else 'off'}")
    state, detail = state_text(session)
    rate = session.steps_per_second()
    parts = [f"step {session.step}"]
    if session.epoch is not None:
        parts.append(f"epoch {session.epoch}")
    parts.append(f"elapsed {seconds_text(session.elapsed)}")
    parts.append(f"{rate:.1f} steps/s" if rate is not None else "- steps/s")
    # The detail (why it paused, the exit code) goes last: it is the part that may be cut off.
    style = STATE_STYLES.get(state.split(",")[0], "bold")
    second = Text.assemble((state.upper(), style), "   ", "   ".join(parts),
                           f"   {detail}" if detail else "")
    return Text("\n").join([first, second])  # cut, not wrapped, by the stylesheet
