"""The script's output, full screen: follows the tail until the user scrolls up, searches, wraps.

The lines come from the feed's history (the last HISTORY lines; the log file written on exit keeps
every one). The view draws only the rows on screen (a ScrollView's render_line), so a flood of
output costs the rows it adds to the row map, not a redraw of all of them.
"""

from __future__ import annotations

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.geometry import Size
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Static

from tuidebug.screens.feed import HISTORY, Feed, OutputLine
from tuidebug.screens.footer import KeysFooter
from tuidebug.screens.logs import FollowsTail

FRAME_SECONDS = 0.25
GUTTER = 2  # the line's mark (a probe printed it, or it went to stderr) and a space before each row
PROBE_GUTTER = Segment("┃ ", Style(color="magenta", bold=True))
# stderr: a different character, not only a different colour, so it stays apart under NO_COLOR.
STDERR_GUTTER = Segment("╎ ", Style(color="red"))
BLANK_GUTTER = Segment(" " * GUTTER)
MATCH = Style(color="black", bgcolor="yellow")
CURRENT_MATCH = Style(color="black", bgcolor="bright_green", bold=True)
PROBE_TEXT = Style(dim=True, italic=True)


class OutputView(FollowsTail, ScrollView, can_focus=True):
    """The output lines as rows: one per line, or, wrapped, as many as the line needs."""

    BINDINGS = [  # besides a scrolling widget's arrows, page keys and home
        # Not the inherited end: an animated scroll stops at the end it set out for, short of a flood's.
        Binding("end", "follow", "Follow", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("j", "scroll_down", "Down", show=False),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.lines: list[OutputLine] = []
        self.rows: list[tuple[int, int, int]] = []  # (line, first character, end character) per row
        self.wrap = False
        self.search = ""  # the text searched for: its matches are highlighted
        self.current: int | None = None  # the line of the match last gone to
        self.unseen = 0  # lines that came while the user was scrolled up
        self._widest = 0

    # --- content ----------------------------------------------------------------------------

    def add(self, lines: list[OutputLine]) -> None:
        if not lines:
            return
        first = len(self.lines)
        self.lines.extend(lines)
        for index in range(first, len(self.lines)):
            self.rows.extend(self._rows_of(index))
        if len(self.lines) > HISTORY + HISTORY // 10:  # trim in chunks: the row map is rebuilt then
            self._trim(len(self.lines) - HISTORY)
        if not self.following:
            self.unseen += len(lines)
        self._resize_virtual()
        self.keep_at_tail()

    def _trim(self, count: int) -> None:
        rows_before = len(self.rows)
        del self.lines[:count]
        self.current = None if self.current is None or self.current < count else self.current - count
        self._rebuild()
        if not self.following:  # the rows the user reads stay on screen
            self.scroll_to(y=max(0, self.scroll_y - (rows_before - len(self.rows))), animate=False, immediate=True)

    def _rows_of(self, index: int) -> list[tuple[int, int, int]]:
        text = self.lines[index].text
        self._widest = max(self._widest, cell_len(text))
        width = self.scrollable_content_region.width - GUTTER
        if not self.wrap or width < 1 or cell_len(text) <= width:
            return [(index, 0, len(text))]
        rows, start = [], 0
        for piece in chop_cells(text, width):
            rows.append((index, start, start + len(piece)))
            start += len(piece)
        return rows

    def _rebuild(self) -> None:
        self._widest = 0
        self.rows = [row for index in range(len(self.lines)) for row in self._rows_of(index)]
        self._resize_virtual()

    def _resize_virtual(self) -> None:
        width = self.scrollable_content_region.width if self.wrap else self._widest + GUTTER
        self.virtual_size = Size(width, len(self.rows))
        self.refresh()

    def on_resize(self) -> None:
        if self.wrap:
            self._rebuild()
        self.call_after_refresh(self.keep_at_tail)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self.following:
            self.unseen = 0

    # --- drawing ----------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        if row >= len(self.rows):
            return Strip.blank(width)
        index, start, end = self.rows[row]
        line = self.lines[index]
        text = Text(line.text[start:end], style=PROBE_TEXT if line.probe else "")
        self._highlight(text, self.lines[index].text, start, end, index == self.current)
        mark = PROBE_GUTTER if line.probe else STDERR_GUTTER if line.error else BLANK_GUTTER
        gutter = mark if start == 0 else BLANK_GUTTER  # a wrapped line's mark on its first row only
        segments = [gutter, *text.render(self.app.console)]
        strip = Strip(segments).crop(int(self.scroll_x), int(self.scroll_x) + width) if not self.wrap else Strip(segments)
        return strip.extend_cell_length(width).crop(0, width)

    def _highlight(self, text: Text, whole: str, start: int, end: int, current: bool) -> None:
        """Every match of the query on this row (a match cut by a wrap is marked on each side)."""
        if not self.search:
            return
        lowered, query = whole.lower(), self.search.lower()
        at = lowered.find(query)
        while at != -1:
            low, high = max(at, start), min(at + len(query), end)
            if low < high:
                text.stylize(CURRENT_MATCH if current else MATCH, low - start, high - start)
            at = lowered.find(query, at + 1)

    # --- moves ------------------------------------------------------------------------------

    def set_wrap(self, wrap: bool) -> None:
        self.wrap = wrap
        self._rebuild()
        self.scroll_x = 0
        self.call_after_refresh(self.keep_at_tail)

    def go_to_match(self, forward: bool) -> int | None:
        """The next (or previous) line holding the query, from the last match or the top of the view;
        scrolled into view. None when no line holds it."""
        query = self.search.lower()
        matches = [i for i, line in enumerate(self.lines) if query and query in line.text.lower()]
        if not matches:
            return None
        origin = self.current if self.current is not None else self._top_line()
        after = [i for i in matches if (i > origin if forward else i < origin)]
        self.current = (after[0] if forward else after[-1]) if after else (matches[0] if forward else matches[-1])
        row = next(r for r, (index, _, _) in enumerate(self.rows) if index == self.current)
        self.scroll_to(y=max(0, row - self.scrollable_content_region.height // 2), animate=False, immediate=True)
        self.refresh()
        return matches.index(self.current) + 1

    def _top_line(self) -> int:
        row = int(self.scroll_y)
        return self.rows[row][0] if row < len(self.rows) else 0

    def match_count(self) -> int:
        query = self.search.lower()
        return sum(query in line.text.lower() for line in self.lines) if query else 0

    def action_follow(self) -> None:
        self.following = True
        self.keep_at_tail()


class LogViewScreen(Screen[None]):
    TITLE = "script output"
    BINDINGS = [
        Binding("slash", "search", "Search", id="logview.search", tooltip="Find a line: / then text, enter"),
        Binding("n", "next_match", "Next", id="logview.next", tooltip="The next line that matches the search"),
        Binding("N", "previous_match", "Previous", id="logview.previous",
                tooltip="The previous line that matches the search"),
        Binding("end,G", "follow", "Follow", id="logview.follow", tooltip="Go to the end and follow new output"),
        Binding("w", "toggle_wrap", "Wrap", id="logview.wrap", tooltip="Wrap long lines, or cut them and scroll sideways"),
        Binding("escape", "back", "Back", id="logview.back", tooltip="Close the search, else back to the dashboard"),
        Binding("q", "app.quit", "Quit", id="logview.quit", tooltip="Quit (asks first while the script runs; ctrl+c too)"),
    ]

    def __init__(self, feed: Feed) -> None:
        super().__init__()
        self.feed = feed
        self._seen = 0
        self._found = ""

    def compose(self) -> ComposeResult:
        yield Static(id="logview-title")
        yield OutputView(id="logview")
        yield Static(id="logview-marker")
        yield Input(placeholder="search: enter finds, esc closes", id="logview-search")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(OutputView).focus()
        self.take_lines()
        self.set_interval(FRAME_SECONDS, self.take_lines)

    def take_lines(self) -> None:
        lines, self._seen = self.feed.history_since(self._seen)
        view = self.query_one(OutputView)
        view.add(lines)
        self._show_status(view)

    def _show_status(self, view: OutputView) -> None:
        where = "following" if view.following else f"row {int(view.scroll_y) + 1} of {len(view.rows)}"
        title = Text.assemble(("script output", "bold"), f"  {len(view.lines)} lines  {where}", self._found,
                              f"  wrap {'on' if view.wrap else 'off'}")
        if any(line.probe for line in view.lines):
            title.append_text(Text.assemble("  ", ("┃", "bold magenta"), " printed by a probe"))
        if any(line.error for line in view.lines):
            title.append_text(Text.assemble("  ", ("╎", "red"), " stderr"))
        self.query_one("#logview-title", Static).update(title)
        marker = self.query_one("#logview-marker", Static)
        marker.display = not view.following and view.unseen > 0
        marker.update(f"new output ↓ {view.unseen} line(s): End or G to follow")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("next_match", "previous_match"):
            return bool(self.query_one(OutputView).search)
        return True

    def action_search(self) -> None:
        search = self.query_one("#logview-search", Input)
        search.display = True
        search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        view = self.query_one(OutputView)
        view.search, view.current = event.value, None
        self._close_search(view)
        self._go(view, forward=True)
        self.refresh_bindings()  # n and N work now

    def _go(self, view: OutputView, forward: bool) -> None:
        number = view.go_to_match(forward)
        found = f"{number} of {view.match_count()}" if number is not None else "not found"
        self._found = f"  search {view.search!r}: {found}"
        self._show_status(view)

    def _close_search(self, view: OutputView) -> None:
        self.query_one("#logview-search", Input).display = False
        view.focus()

    def action_next_match(self) -> None:
        self._go(self.query_one(OutputView), forward=True)

    def action_previous_match(self) -> None:
        self._go(self.query_one(OutputView), forward=False)

    def action_follow(self) -> None:
        self.query_one(OutputView).action_follow()

    def action_toggle_wrap(self) -> None:
        view = self.query_one(OutputView)
        view.set_wrap(not view.wrap)
        self._show_status(view)

    def action_back(self) -> None:
        search = self.query_one("#logview-search", Input)
        if search.display:
            self._close_search(self.query_one(OutputView))
        else:
            self.app.pop_screen()
