"""The live dashboard: header, three charts, the event log and the script's output.

Below NARROW_COLUMNS the logs go under the charts; below SHORT_ROWS three charts do not fit, so one
chart is drawn in full and the other two as two-line rows (figures and a sparkline): all three
figures are on screen at 80x24, and `c` picks the chart drawn in full.

Nothing here reacts to single messages. A timer at 4 Hz looks at ``session.version`` and redraws,
inside one ``batch_update()``, only when something changed; the header's clock ticks once a second.
"""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen

from tuidebug.launcher import ChildRun
from tuidebug.screens.charts import ALL_RANKS, ChartPane, GradPane, LossPane, MemoryPane
from tuidebug.screens.dialogs import RunToStepScreen
from tuidebug.screens.feed import Feed
from tuidebug.screens.footer import KeysFooter
from tuidebug.screens.framerate import FramePacer
from tuidebug.screens.header import SCRIPT_OVER, RunHeader
from tuidebug.screens.layers import LayerTableScreen
from tuidebug.screens.inspector import InspectorScreen
from tuidebug.screens.logs import EventLog, OutputPane
from tuidebug.screens.logview import LogViewScreen
from tuidebug.screens.tree import TreeScreen
from tuidebug.triage import start_walk

FRAME_SECONDS = 0.25
NARROW_COLUMNS = 81
SHORT_ROWS = 30  # three charts need about 9 rows each, below a header of two and a footer of one
NONFINITE_EVENTS = {"nonfinite_loss", "nonfinite_grad"}


class DashboardScreen(Screen[None]):
    TITLE = "dashboard"
    # In the order a narrow footer gives them room (the footer leaves out what does not fit; ? lists it).
    BINDINGS = [
        Binding("space,p", "pause", "Pause", id="dashboard.pause", tooltip="Pause at the next safe point"),
        Binding("space,p", "resume", "Resume", id="dashboard.resume", tooltip="Let the paused run go on"),
        Binding("s", "step", "Step", id="dashboard.step", tooltip="Run one optimizer step, then pause"),
        Binding("g", "run_to", "Run to", id="dashboard.run_to", tooltip="Run until after step N, then pause"),
        Binding("d", "diagnose", "Diagnose", id="dashboard.diagnose",
                tooltip="The decision tree: run the protocol's checks on the paused run"),
        Binding("i", "inspect", "Inspect", id="dashboard.inspect", tooltip="The paused batch, tensor by tensor"),
        Binding("c", "next_chart", "Chart", id="dashboard.chart",
                tooltip="Short terminal: draw the next chart in full (the others as sparklines)"),
        Binding("l", "toggle_log", "Log", id="dashboard.log", tooltip="Loss chart: log or linear scale"),
        Binding("r", "next_rank", "Rank", id="dashboard.rank",
                tooltip="torchrun job: the loss and gradient charts of every rank, then of each rank in turn"),
        Binding("t", "layers", "Layers", id="dashboard.layers", tooltip="Per-layer gradient norms"),
        Binding("o", "output", "Output", id="dashboard.output",
                tooltip="The script's output, full screen: follow, search (/), wrap (w)"),
        Binding("n", "toggle_nan", "NaN", id="dashboard.nan", tooltip="Pause at the first NaN/Inf loss or gradient"),
        Binding("f", "toggle_frame_cost", "Frames", id="dashboard.frames", show=False,
                tooltip="The screen's own CPU use and frame rate, in the header"),
        Binding("q", "app.quit", "Quit", id="dashboard.quit",
                tooltip="Quit (asks first while the script runs; ctrl+c too)"),
    ]

    def __init__(self, run: ChildRun, feed: Feed, break_on_nan: bool) -> None:
        super().__init__()
        self.child = run
        self.session = run.session
        self.feed = feed
        self.break_on_nan = break_on_nan
        self._version = -1
        self._state = ""
        self._clock = ""
        self._tree_opened = False
        self._pacer = FramePacer(FRAME_SECONDS)
        self._show_cost = False

    def compose(self) -> ComposeResult:
        yield RunHeader(self.child.target.display, id="header")
        with Horizontal(id="main"):
            with Vertical(id="charts"):
                yield LossPane(id="loss", classes="chart shown")
                yield GradPane(id="grad", classes="chart")
                yield MemoryPane(id="memory", classes="chart")
            with Vertical(id="logs"):
                yield EventLog(id="events")
                yield OutputPane(id="output")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#events").border_title = "events"
        self.query_one("#output").border_title = "script output (o: full screen)"
        self.set_interval(FRAME_SECONDS, self.redraw)
        self.redraw()

    def on_resize(self, event: events.Resize) -> None:
        self._version = -1  # redraw at the new size, with as many points as it has columns, even if idle
        self.set_class(event.size.width < NARROW_COLUMNS, "narrow")
        short = event.size.height < SHORT_ROWS
        if short != self.has_class("short"):
            self.set_class(short, "short")
            self._compact_charts()
            self.refresh_bindings()  # the chart key exists only when short

    def _compact_charts(self) -> None:
        """On a short screen every chart but the one shown in full is a compact row."""
        short = self.has_class("short")
        for pane in self.query(ChartPane):
            pane.set_class(short and not pane.has_class("shown"), "compact")

    # --- drawing ----------------------------------------------------------------------------

    def redraw(self) -> None:
        version = self.session.version
        waits = self._version != -1 and self.session.state == self._state and not self._pacer.due()
        if version == self._version or waits:
            self._tick_clock()  # new figures (not a new state: a pause shows at once) wait for the budget's next frame
            return
        self._version = version
        with self.app.batch_update():
            self._take_events()
            self.query_one(OutputPane).add(self.feed.take_output())
            for pane in self.query(ChartPane):
                pane.refresh_from(self.session)
            self._show_header()
        self._pacer.drawn()
        if self.session.state != self._state:
            self._state = self.session.state
            self.refresh_bindings()  # pause or resume, step or not
            self._open_tree_on_failure()

    def _open_tree_on_failure(self) -> None:
        """The first break on a non-finite value opens the decision tree on the NaN branch (d opens it
        again); a crash only says so, so the traceback stays in view."""
        if self._tree_opened or self.app.screen is not self:
            return
        if self._state == "paused" and self.session.reason.startswith("non-finite"):
            self._tree_opened = True
            self.action_diagnose()
        elif self._state in ("ended", "crashed") and any(e.kind == "exception" for e in self.session.events):
            self._tree_opened = True
            self.notify("The script raised: press d to walk the decision tree")

    def _take_events(self) -> None:
        taken = self.feed.take_events()
        if any(event.kind in NONFINITE_EVENTS for event in taken):
            # The agent pauses at the first non-finite value only, then turns the break off itself.
            self.break_on_nan = False
        self.query_one(EventLog).add(taken)

    def _tick_clock(self) -> None:
        """Elapsed time moves while nothing else does (a paused run): once a second is enough."""
        clock = f"{self.session.elapsed:.0f}"
        if clock != self._clock:
            self._show_header()

    def _show_header(self) -> None:
        self._clock = f"{self.session.elapsed:.0f}"
        self.query_one(RunHeader).show(self.session, self.break_on_nan, self._pacer.text() if self._show_cost else None)

    # --- keys -------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only the keys that do something now: the footer and the help list no others."""
        state = self.session.state
        if action == "pause":
            return state in ("starting", "running")
        if action == "resume":
            return state == "paused"
        if action == "next_chart":
            return self.has_class("short")
        if action == "next_rank":
            return len(self.session.ranks) > 1
        if action in ("step", "run_to", "toggle_nan"):
            return state not in SCRIPT_OVER
        if action == "inspect":  # the batches are read on the paused (or post-mortem) process
            return state in ("paused", "ended")
        return True

    def action_next_rank(self) -> None:
        """Job (rank 0, as the header), every rank overlaid, then each rank alone, and round again."""
        views: list[int | str | None] = [None, ALL_RANKS, *sorted(self.session.ranks)]
        panes = [pane for pane in self.query(ChartPane) if not isinstance(pane, MemoryPane)]
        current = panes[0].rank if panes else None
        shown = views[(views.index(current) + 1) % len(views)] if current in views else None
        for pane in panes:
            pane.rank = shown
        self._version = -1  # redraw now, even while the run is paused
        self.notify("charts: " + ("the job (rank 0)" if shown is None else "every rank" if shown == ALL_RANKS
                                  else f"rank {shown}"), timeout=2)

    def action_pause(self) -> None:
        self._command("pause")

    def action_resume(self) -> None:
        self._command("resume")

    def action_step(self) -> None:
        self._command("step")

    def action_run_to(self) -> None:
        self.app.push_screen(RunToStepScreen(self.session.step), self._run_to)

    def _run_to(self, step: int | None) -> None:
        if step is None:
            return
        self._command("break_at", step=step)
        if self.session.state == "paused":
            self._command("resume")

    def action_toggle_nan(self) -> None:
        if self._command("break_on_nan", enabled=not self.break_on_nan):
            self.break_on_nan = not self.break_on_nan
            self._show_header()
            self.notify(f"Break on NaN/Inf {'on' if self.break_on_nan else 'off'}")  # the header may be cut off

    def action_toggle_frame_cost(self) -> None:
        self._show_cost = not self._show_cost
        self._show_header()

    def action_toggle_log(self) -> None:
        pane = self.query_one(LossPane)
        pane.log = not pane.log
        pane.refresh_from(self.session)

    def action_next_chart(self) -> None:
        """On a short screen one chart is drawn in full: the next one takes its place."""
        charts = list(self.query(ChartPane))
        current = next(i for i, pane in enumerate(charts) if pane.has_class("shown"))
        charts[current].remove_class("shown")
        charts[(current + 1) % len(charts)].add_class("shown")
        self._compact_charts()
        self._version = -1  # the panes that changed form redraw in their new one

    def action_output(self) -> None:
        self.app.push_screen(LogViewScreen(self.feed))

    def action_layers(self) -> None:
        self.app.push_screen(LayerTableScreen(self.session))

    def action_diagnose(self) -> None:
        if self.session.walk is None or self.session.walk.verdict is None and not self.session.walk.results:
            start_walk(self.session)  # on the branch the run points to now
        self.app.push_screen(TreeScreen(self.child))

    def action_inspect(self) -> None:
        self.app.push_screen(InspectorScreen(self.child))

    def _command(self, name: str, **args: object) -> bool:
        sent = self.child.command(name, **args)
        if not sent:
            self.notify(f"not connected to the script: {name} not sent", severity="warning")
        return sent
