"""The three live charts, each with its latest figures in numbers beside it.

A chart redraws only when what it shows changed (a new point, a wider plot, the scale toggled):
plotext is the costly part of a frame. Points are copied under the session's lock and plotted
outside it, downsampled to about two per column.

Where the terminal is too short for three charts, a pane with the ``compact`` class is two lines
instead: its figures (latest, min, max) and a sparkline, on a log scale where the range calls for
it and with spikes drawn above it, so one 1e19 gradient norm does not flatten the history.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static
from textual_plotext import PlotextPlot

from tuidebug.format import bytes_text, number
from tuidebug.protocol import Memory
from tuidebug.screens import plotdata
from tuidebug.screens.plotdata import Points
from tuidebug.session import Series, Session

CUDA_SERIES = {"allocated": "cuda_allocated", "reserved": "cuda_reserved", "NVML": "nvml_used"}
# The agent's findings of memory kept across steps: the memory pane marks the leak's slope for them.
GROWTH_FINDINGS = ("memory_growth", "graphs_kept", "container_growth")
GROWTH_RATE = re.compile(r"grows ([\d.]+ \w+) a step")
# Distinct markers, not only distinct colours, so the lines stay apart under NO_COLOR; each with
# the character that stands for it in the chart's title.
MARKERS = (("braille", "⡇"), ("•", "•"), ("+", "+"), ("x", "x"))


@dataclass
class Chart:
    """What one chart draws, and the figures shown beside it."""

    title: str
    lines: list[tuple[str, Points]] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)
    xlabel: str = "step"
    ceiling: tuple[str, float] | None = None  # a labelled horizontal line: the device's total memory
    threshold: tuple[str, float] | None = None  # a labelled horizontal line within the data: the clip threshold
    log: bool = False
    brief: list[tuple[str, str]] = field(default_factory=list)  # the compact row's figures: latest first
    label: str = ""  # the compact row's title, where it differs from the chart's


ALL_RANKS = "all"


class ChartPane(Horizontal):
    """A plotext chart and a column of figures; subclasses say what to read and how to draw it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._key: Any = None
        # Which worker of a torchrun job the chart shows: None for the job as the session keeps it (rank
        # 0), a rank, or ALL_RANKS (one line per rank, up to the markers there are).
        self.rank: int | str | None = None

    def compose(self) -> ComposeResult:
        yield PlotextPlot(classes="plot")
        yield Static(classes="figures")
        yield Static(classes="spark")

    def refresh_from(self, session: Session) -> None:
        compact = self.has_class("compact")
        shown = self.query_one(".spark" if compact else ".plot")
        limit = max(20, 2 * shown.size.width)
        with session.lock:
            key = (self.key(session), limit, compact, self.rank)
            if key == self._key:
                return
            data = self.read(session)
        self._key = key
        chart = self.chart(data, limit)
        if compact:
            self.query_one(".spark", Static).update(compact_text(chart, shown.size.width), layout=False)
        else:
            self._draw(self.query_one(PlotextPlot), chart)

    def key(self, session: Session) -> Any:
        """Changes whenever the chart would: compared before anything is copied."""
        raise NotImplementedError

    def read(self, session: Session) -> Any:
        """Copies of what the chart needs, taken with the session's lock held."""
        raise NotImplementedError

    def chart(self, data: Any, limit: int) -> Chart:
        raise NotImplementedError

    def _draw(self, plot: PlotextPlot, chart: Chart) -> None:
        plt = plot.plt
        plt.clear_figure()  # no scale, limit or tick left over from the last frame (render sets size and theme)
        # The first line is the one that matters (raw loss): drawn last, it stays on top.
        for (_, points), (marker, _) in reversed(list(zip(chart.lines, MARKERS))):
            if points:
                plt.plot(*plotdata.columns(points), marker=marker)
        for rule in (chart.ceiling, chart.threshold):
            if rule is not None:
                plt.hline(rule[1])
        plt.yscale("log" if chart.log else "linear")
        _set_ticks(plt, chart, plot.size.width, plot.size.height)
        plt.title(legend(chart))
        plt.xlabel(chart.xlabel)
        plot.refresh()
        self.query_one(".figures", Static).update(figures_text(chart), layout=False)  # sized by the stylesheet


def legend(chart: Chart) -> str:
    """The title names each line by its marker: "loss  ⡇ raw  • smoothed"."""
    rules = [rule[0] for rule in (chart.ceiling, chart.threshold) if rule is not None]
    if len(chart.lines) < 2 and not rules:
        return chart.title
    names = [f"{symbol} {label}" for (label, _), (_, symbol) in zip(chart.lines, MARKERS)]
    names += [f"─ {label}" for label in rules]
    return "  ".join([chart.title, *names])


def _set_ticks(plt: Any, chart: Chart, width: int, height: int) -> None:
    """Ticks with short labels: plotext's own print every digit of a large value."""
    ys = [y for _, points in chart.lines for _, y in points]
    xs = [x for _, points in chart.lines for x, _ in points]
    if chart.ceiling is not None:  # memory against the device total: the whole card, from zero
        ys += [0.0, chart.ceiling[1]]
        plt.ylim(0.0, chart.ceiling[1])
    if chart.threshold is not None:
        ys.append(chart.threshold[1])
    if not xs:
        return
    rows = max(2, min(5, (height - 4) // 2))
    if chart.log:
        yticks = plotdata.log_ticks(min(ys), max(ys), rows)
    else:
        yticks = plotdata.linear_ticks(min(ys), max(ys), rows)
    plt.yticks(yticks, [number(y) for y in yticks])
    xticks = plotdata.linear_ticks(min(xs), max(xs), max(2, min(6, width // 12)))
    plt.xticks(xticks, [f"{x:.0f}" if max(xs) - min(xs) >= 10 else number(x) for x in xticks])


def compact_text(chart: Chart, width: int) -> Text:
    """Two lines: the title and the brief figures that fit (left out whole, the least needed last),
    then the first line's sparkline with its spikes marked above the scale."""
    spark = plotdata.sparkline(chart.lines[0][1] if chart.lines else [], width)
    notes = [(f"{plotdata.SPIKE} off scale", "bold red")] if spark.spikes else []
    notes += [("log scale", "")] if spark.log else []
    line = Text(chart.label or chart.title, style="bold")
    for part in [*_brief_parts(chart.brief), *(Text(note, style=style) for note, style in notes)]:
        if line.cell_len + 2 + part.cell_len > width:
            break
        line.append_text(Text("  ") + part)
    bars = Text(spark.line, style="cyan")
    for column in spark.spikes:
        bars.stylize("bold red", column, column + 1)
    return Text("\n").join([line, bars])


def _brief_parts(brief: list[tuple[str, str]]) -> list[Text]:
    """"9.953e+15" for the latest value (named by the row's title), "min 0.2639" for the others."""
    return [Text.assemble(f"{name} ", value) if name else Text(value, style="bold") for name, value in brief]


def figures_text(chart: Chart) -> Text:
    width = max((len(name) for name, _ in chart.figures), default=0)
    lines = [Text.assemble((f"{name:<{width}} ", "bold"), value) for name, value in chart.figures]
    return Text("\n").join(lines)


def last_point(series: Series) -> tuple[tuple[float, float] | None, int]:
    """The newest point and the bucket count: together they change whenever the series does."""
    return (series.recent[-1] if series.recent else None, len(series.coarse.points))


def rank_series(session: Session, rank: int | str | None, name: str) -> list[tuple[str, Series]]:
    """The series ``name`` (``loss``, ``grad_norm``) a chart shows: the session's, one rank's, or every
    rank's (at most as many as there are markers)."""
    if rank == ALL_RANKS:
        return [(session.rank_label(r), getattr(view, name)) for r, view in sorted(session.ranks.items())][:len(MARKERS)]
    if isinstance(rank, int) and rank in session.ranks:
        return [(session.rank_label(rank), getattr(session.ranks[rank], name))]
    return [("", getattr(session, name))]


def every_rank(ranks: list[tuple[str, Points]], limit: int, positive: bool = False
               ) -> tuple[list[tuple[str, Points]], list[tuple[str, str]]]:
    """One line per rank, and each rank's latest value as a figure: a chart of every rank overlaid."""
    lines = [(label, plotdata.downsample(plotdata.finite(points, positive=positive), limit)) for label, points in ranks]
    return lines, [(label, number(points[-1][1] if points else None)) for label, points in ranks]


def ranked(title: str, lines: list[tuple[str, Points]]) -> str:
    """The chart's title, with the rank it shows when it shows one."""
    return f"{title} ({lines[0][0]})" if len(lines) == 1 and lines[0][0] else title


class LossPane(ChartPane):
    log = False

    def key(self, session: Session) -> Any:
        return [last_point(s) for _, s in rank_series(session, self.rank, "loss")], \
            nonfinite(session, "nonfinite_loss"), self.log

    def read(self, session: Session) -> dict[str, Any]:
        ranks = [(label, plotdata.whole_run(s)) for label, s in rank_series(session, self.rank, "loss")]
        return {"ranks": ranks, "points": ranks[0][1], "lr": session.lr.latest,
                "nonfinite": nonfinite(session, "nonfinite_loss")}

    def chart(self, data: dict[str, Any], limit: int) -> Chart:
        if len(data["ranks"]) > 1:
            return self._overlay(data, limit)
        points = data["points"]
        shown = plotdata.downsample(plotdata.finite(points, positive=self.log), limit)
        smoothed = plotdata.smooth(shown)
        latest = points[-1][1] if points else None
        finite = [y for _, y in points if math.isfinite(y)]
        figures = [("loss", number(latest)), ("smoothed", number(smoothed[-1][1] if smoothed else None)),
                   ("lowest", number(min(finite, default=None))), ("lr", number(data["lr"])),
                   ("NaN/Inf", nonfinite_text(*data["nonfinite"])),
                   ("scale", "log" if self.log else "linear")]
        brief = [("", number(latest)), *extremes(finite), *nonfinite_brief(data["nonfinite"])]
        return Chart(ranked("loss", data["ranks"]), lines=[("raw", shown), ("smoothed", smoothed)], figures=figures,
                     log=self.log, brief=brief)

    def _overlay(self, data: dict[str, Any], limit: int) -> Chart:
        lines, latest = every_rank(data["ranks"], limit, positive=self.log)
        figures = [*latest, ("NaN/Inf", nonfinite_text(*data["nonfinite"])), ("scale", "log" if self.log else "linear")]
        return Chart("loss", lines=lines, figures=figures, log=self.log, brief=latest)


class GradPane(ChartPane):
    """The norm before the script's own clipping (what clip_grad_norm_ returned), with its threshold."""

    def key(self, session: Session) -> Any:
        return [last_point(s) for _, s in rank_series(session, self.rank, "grad_norm")], \
            nonfinite(session, "nonfinite_grad"), session.clip_at

    def read(self, session: Session) -> dict[str, Any]:
        ranks = [(label, plotdata.whole_run(s)) for label, s in rank_series(session, self.rank, "grad_norm")]
        return {"ranks": ranks, "points": ranks[0][1], "clip_at": session.clip_at,
                "nonfinite": nonfinite(session, "nonfinite_grad"), "skipped": session.counters.skipped_steps}

    def chart(self, data: dict[str, Any], limit: int) -> Chart:
        if len(data["ranks"]) > 1:
            lines, latest = every_rank(data["ranks"], limit)
            return Chart("gradient norm", lines=lines, figures=latest, brief=latest)
        points = data["points"]
        finite = [y for _, y in points if math.isfinite(y)]
        figures = [("norm", number(points[-1][1] if points else None)),
                   ("largest", number(max(finite, default=None))),
                   ("NaN/Inf", nonfinite_text(*data["nonfinite"])), ("AMP skips", str(data["skipped"]))]
        shown = plotdata.downsample(plotdata.finite(points), limit)
        brief = [("", figures[0][1]), *extremes(finite), *nonfinite_brief(data["nonfinite"])]
        if data["skipped"]:
            brief.append(("AMP skips", str(data["skipped"])))
        clip = data["clip_at"]
        if clip is not None:
            figures.append(("clipped at", number(clip)))
            brief.append(("clip", number(clip)))
        return Chart(ranked("gradient norm", data["ranks"]), lines=[("norm", shown)], figures=figures, brief=brief,
                     threshold=(f"clip {number(clip)}", clip) if clip is not None else None)


class MemoryPane(ChartPane):
    """CUDA allocated / reserved (and NVML used) against the device total; RSS on a CPU run."""

    def key(self, session: Session) -> Any:
        return session.memory

    def read(self, session: Session) -> dict[str, Any]:
        memory = session.memory
        cuda = memory is not None and memory.cuda_allocated is not None
        names = CUDA_SERIES if cuda else {"RSS": "rss"}
        total = memory.nvml_total if memory is not None else None
        if cuda and total is None and session.device is not None:
            total = session.device.total_bytes
        growth = next((e.message for e in reversed(session.events)
                       if e.kind == "finding" and e.message.split(":", 1)[0] in GROWTH_FINDINGS), None)
        return {"memory": memory, "total": total, "growth": growth,
                "series": {label: plotdata.whole_run(getattr(session, name)) for label, name in names.items()}}

    def chart(self, data: dict[str, Any], limit: int) -> Chart:
        memory, total, series = data["memory"], data["total"], data["series"]
        values = [y for points in series.values() for _, y in points] + ([total] if total else [])
        unit, size = plotdata.byte_unit(values)
        origin = min((points[0][0] for points in series.values() if points), default=0.0)
        lines = [(label, plotdata.scale(plotdata.shift(plotdata.downsample(points, limit), origin), size))
                 for label, points in series.items() if points]
        title = f"RSS (CPU), {unit}" if "RSS" in series else f"CUDA memory, {unit}"
        first = next(iter(series.values()), [])
        figures = memory_figures(memory, total)
        if data["growth"] and lines:
            # The leak's slope over the second half of the run (where the growth check looks), drawn as a line.
            measured = lines[0][1]
            slope = plotdata.trend(measured[len(measured) // 2:])
            if slope:
                lines.append(("leak", slope))
            rate = GROWTH_RATE.search(data["growth"])
            figures.append(("leak/step", f"+{rate.group(1)}") if rate else
                           ("leak", data["growth"].split(":", 1)[0].replace("_", " ")))
        return Chart(title, lines=lines, figures=figures, xlabel="seconds",
                     ceiling=("total", total / size) if total else None,
                     label="RSS (CPU)" if "RSS" in series else "CUDA allocated",
                     brief=memory_brief(memory, total, [y for _, y in first]))


def memory_brief(memory: Memory | None, total: int | None, values: list[float]) -> list[tuple[str, str]]:
    """The compact row's memory figures: the latest reading of the line its sparkline draws, its
    range, and on a GPU what is reserved of the device's total."""
    if memory is None:
        return [("", "-")]
    latest = memory.rss if memory.cuda_allocated is None else memory.cuda_allocated
    brief = [("", bytes_text(latest)), ("min", bytes_text(min(values, default=None))),
             ("max", bytes_text(max(values, default=None)))]
    if memory.cuda_allocated is not None:
        brief += [("reserved", bytes_text(memory.cuda_reserved)), ("of", bytes_text(total))]
    return brief


def extremes(values: list[float]) -> list[tuple[str, str]]:
    return [("min", number(min(values, default=None))), ("max", number(max(values, default=None)))]


def nonfinite_brief(counted: tuple[int, int | None]) -> list[tuple[str, str]]:
    """NaN/Inf in a compact row only when there were some: the row has no room for a zero."""
    return [("NaN/Inf", nonfinite_text(*counted))] if counted[0] else []


def memory_figures(memory: Memory | None, total: int | None) -> list[tuple[str, str]]:
    if memory is None:
        return [("memory", "-")]
    if memory.cuda_allocated is None:
        return [("RSS (CPU)", bytes_text(memory.rss))]
    figures = [("allocated", bytes_text(memory.cuda_allocated)), ("reserved", bytes_text(memory.cuda_reserved)),
               ("peak", bytes_text(memory.cuda_peak))]
    if memory.nvml_used is not None:
        figures.append(("NVML used", bytes_text(memory.nvml_used)))
    figures.append(("device total", bytes_text(total)))
    figures.append(("RSS (CPU)", bytes_text(memory.rss)))
    return figures


def nonfinite(session: Session, kind: str) -> tuple[int, int | None]:
    """How many steps had a non-finite loss (or gradient norm), and the step of the first.

    The step the agent paused on is not counted by the session yet (its record comes after the
    pause), but its event is in the log: it counts as one.
    """
    first = next((event.step for event in session.events if event.kind == kind), None)
    count = getattr(session.counters, kind)
    return (max(count, 1) if first is not None else count), first


def nonfinite_text(count: int, first: int | None) -> str:
    return f"{count} (step {first})" if count and first is not None else str(count)
