"""The Textual app: wiring between a ChildRun, its Session and the screens.

The app draws its first frame before it starts the child, so the screen is up while the child is
still importing torch.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from importlib.resources import files
from typing import Any

from textual.app import App
from textual.binding import Binding

from tuidebug.attach import AttachedRun, ListenedRun
from tuidebug.launcher import ChildRun, Target, exit_status
from tuidebug.screens.dashboard import DashboardScreen
from tuidebug.screens.dialogs import QuitScreen
from tuidebug.screens.feed import Feed
from tuidebug.screens.header import SCRIPT_OVER
from tuidebug.screens.help import HelpScreen
from tuidebug.screens.savedoutput import OutputFile
from tuidebug.session import Session

Run = ChildRun | AttachedRun | ListenedRun  # started here, attached to, or listened for
QUIT_GRACE_SECONDS = 5.0  # for the child to leave its post-mortem hold and exit with the script's code


class TuidebugApp(App[None]):
    CSS = "\n".join(files("tuidebug.assets").joinpath(name).read_text(encoding="utf-8")
                     for name in ("dashboard.tcss", "diagnosis.tcss"))
    TITLE = "tuidebug"
    # The keys every screen shares: help, and quit (which asks first while the script runs). ctrl+c
    # means quit here too, instead of Textual's notice that points at ctrl+q.
    BINDINGS = [
        Binding("question_mark,f1", "help", "Help", id="app.help", tooltip="Every key of this screen"),
        Binding("q", "quit", "Quit", id="app.quit", tooltip="Quit (asks first while the script runs; ctrl+c too)",
                show=False),
        Binding("ctrl+c", "quit", "Quit", id="app.interrupt", show=False),
    ]

    def __init__(self, run: Run, break_on_nan: bool = True) -> None:
        super().__init__()
        self.child = run
        self.feed = Feed(run.session)
        self.break_on_nan = break_on_nan
        self.detached_by: int | None = None  # the signal that closed the screen, leaving the run to train on

    def on_mount(self) -> None:
        self.push_screen(DashboardScreen(self.child, self.feed, self.break_on_nan))
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGHUP, signal.SIGTERM):
            loop.add_signal_handler(signum, self._detach, signum)

    def _detach(self, signum: int) -> None:
        """The terminal closed (SIGHUP) or tuidebug was told to stop (SIGTERM): the screen goes, the run
        trains on (its output into its log file; ``--stop-on-disconnect`` makes it stop instead)."""
        self.detached_by = signum
        self.exit()

    def on_ready(self) -> None:
        if self.child.process is None:
            self.child.start()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.screen))

    def action_quit(self) -> None:
        """Ask first only when quitting would stop a script that is still training."""
        if isinstance(self.screen, QuitScreen):
            return
        if self.child.running and self.child.session.state not in SCRIPT_OVER:
            self.push_screen(QuitScreen(), self._confirmed)
        else:
            self._leave()

    def _confirmed(self, stop: bool | None) -> None:
        if stop:
            self._leave()

    def _leave(self) -> None:
        if self.child.session.state in SCRIPT_OVER:
            self.child.command("quit")  # ends the post-mortem hold; the child then exits with the script's code
        # A script still running is stopped on the way out (_finish): told "quit" while paused, it would
        # leave its pause and train on until then.
        self.exit()


def run_app(target: Target, agent_options: dict[str, Any], mouse: bool = True) -> int:
    """Run the dashboard until the user quits; tuidebug's exit code, from the child's."""
    session = Session(target.name, target.args)
    run = ChildRun(target, session, agent_options, capture_output=True)
    return show(run, agent_options.get("break_on_nan", True), mouse)


def show(run: Run, break_on_nan: bool = True, mouse: bool = True) -> int:
    """The dashboard of a run, started here or attached to, until the user quits or the screen goes;
    then one line on stderr says where the script's whole output went."""
    app = TuidebugApp(run, break_on_nan=break_on_nan)
    try:
        saved: OutputFile | str = OutputFile.create(run.session, run.target.name)
    except OSError as exc:
        saved = f"not written: {exc}"
    try:
        app.run(mouse=mouse)
    finally:
        if app.detached_by is not None:
            run.server.close()  # the private socket folder goes; the child is left to train
        else:
            code = _finish(run)
        if isinstance(saved, OutputFile):
            saved.close()
            saved = str(saved.path)
    if app.detached_by != signal.SIGHUP:  # no terminal left to read it after a hang-up
        sys.stderr.write(f"tuidebug: the script's output: {saved}\n")
    if app.detached_by is not None:
        return 128 + app.detached_by
    return app.return_code or exit_status(code)  # Textual's 1 if the app itself failed


def _finish(run: Run) -> int:
    """Let a child whose script is over exit by itself, with the script's code, then stop whatever is
    left. A script still running when the user quit was stopped on the user's word: a clean quit, 0,
    not the 143 of the SIGTERM that stopped it."""
    script_over = run.session.state in SCRIPT_OVER
    if script_over:
        run.wait(QUIT_GRACE_SECONDS)
    run.close()
    code = run.process.returncode if run.process is not None else None
    return code if script_over and code is not None else 0
