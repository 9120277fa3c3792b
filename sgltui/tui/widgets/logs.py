"""The log tail: coloured by level, filter, fold, wrap, search from the tail, follow that pauses.

`LogView` is a Line API widget (ScrollView + render_line, as Toolong does) on Textual's public
API only. It is tuned for a tail that grows every second while the TUI is otherwise idle:

- each line becomes a Strip once (segments built directly, no Rich console pass);
- appending changes the virtual size without a layout of the screen (the view's own size
  never depends on its content) and repaints only the rows that changed on screen;
- the scrollbar is drawn by the view itself in its last column, so a growing log never
  repaints a separate scrollbar widget through Rich.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import Input

from sgltui.tui.logbuffer import LogBuffer, LogLine
from sgltui.tui.widgets.colors import level_style, search_style

FILTER_DELAY_S = 0.25
# C0/C1 control characters (a server can print escape codes); tabs are expanded first.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


class LogView(ScrollView, can_focus=True):
    """The lines of the tail, one Strip each (several when wrapped), following the end
    only while the user is at the end (Toolong's rule)."""

    DEFAULT_CSS = """
    LogView { overflow-y: scroll; overflow-x: hidden;
              scrollbar-size-vertical: 0; scrollbar-size-horizontal: 0; }
    """
    BINDINGS = [
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
    ]

    # The content never sizes the view (height 1fr): a new virtual size needs no layout of the
    # screen, only a repaint of the rows it changes (appended() decides which).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=False)

    class FollowChanged(Message):
        def __init__(self, following: bool) -> None:
            super().__init__()
            self.following = following

    def __init__(self, max_lines: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self.wrap = False
        self.auto_scroll = True
        self.current_seq: int | None = None  # the line of the current search match
        # One dim line shown while there is no row: why the view is empty (lines hidden).
        self.placeholder = ""
        self._line_strips: list[Strip] = []  # one per shown line
        self._seqs: list[int] = []
        self._rows: list[Strip] = []  # display rows (a wrapped line has several)
        self._row_seq: list[int] = []  # the line (seq) of each row, ascending
        self._base = 0  # rows dropped from the front so far: cache keys stay valid
        self._widest = 0
        # rows by (row, scroll x, width, in the knob), and their text's segments by the first
        # three (a row leaving the knob needs only its cell again)
        self._cache: LRUCache[tuple[int, int, int, bool | None], Strip] = LRUCache(2048)
        self._texts: LRUCache[tuple[int, int, int], list[Segment]] = LRUCache(2048)
        self._cache_style: Style | None = None
        self._frame: tuple | None = None  # per-frame values computed in render_lines

    # -- content ----------------------------------------------------------------------------

    @property
    def lines(self) -> list[Strip]:
        """One Strip per shown line (unwrapped)."""
        return self._line_strips

    @property
    def seqs(self) -> list[int]:
        return self._seqs

    def clear(self) -> None:
        self._line_strips, self._seqs, self._rows, self._row_seq = [], [], [], []
        self._widest = 0
        self._base = 0
        self._forget_rows()
        self.virtual_size = Size(0, 0)
        self.scroll_to(0, 0, animate=False)
        self.refresh()

    def _forget_rows(self) -> None:
        """Drop the rows drawn (a new width, style or scrollbar, or new rows)."""
        self._cache.clear()
        self._texts.clear()

    def set_placeholder(self, text: str) -> None:
        if text != self.placeholder:
            self.placeholder = text
            if not self._rows:
                self.refresh(Region(0, 0, self.scrollable_content_region.width, 1))

    def _text_width(self) -> int:
        width = self.scrollable_content_region.width
        # The scrollbar column is there only while the rows overflow the view.
        return max(1, width - (1 if len(self._rows) > self.scrollable_content_region.height else 0))

    def _split(self, strip: Strip, width: int) -> list[Strip]:
        if not self.wrap or strip.cell_length <= width:
            return [strip]
        length = strip.cell_length
        return list(strip.divide([*range(width, length, width), length]))

    def append(self, items: Iterable[tuple[int, Strip]]) -> None:
        """Add lines (seq, strip) at the end, dropping the oldest past max_lines."""
        # The view's size: its scrollable content region's, Textual's scrollbars being of size
        # 0 (DEFAULT_CSS; the view draws its own), read without the scrollbars' gutter (the
        # styles and reactives it reads were half the calls of an append). A ScrollView's
        # container size is its own size less its gutter, set at each layout: `size` asks the
        # compositor for the region (a walk up the DOM to the screen, ~20 calls).
        region = self.container_size
        height = region.height
        old_rows = len(self._rows)
        scroll_y = self.scroll_y
        old_top = round(scroll_y)
        had_bar = old_rows > height
        # Wrap at the width the rows will have once the view overflows (its scrollbar column).
        wrap_width = max(1, region.width - 1) if self.wrap else 0
        for seq, strip in items:
            self._line_strips.append(strip)
            self._seqs.append(seq)
            if wrap_width:
                rows = self._split(strip, wrap_width)
                self._rows.extend(rows)
                self._row_seq.extend([seq] * len(rows))
            else:  # (a line is its row)
                self._rows.append(strip)
                self._row_seq.append(seq)
            length = strip.cell_length
            if length > self._widest:
                self._widest = length
        trimmed = 0
        if self.max_lines is not None and len(self._line_strips) > self.max_lines:
            drop = len(self._line_strips) - self.max_lines
            first_kept = self._seqs[drop]
            del self._line_strips[:drop], self._seqs[:drop]
            trimmed = bisect_left(self._row_seq, first_kept)
            del self._rows[:trimmed], self._row_seq[:trimmed]
            self._base += trimmed
        new_rows = len(self._rows)
        if new_rows == old_rows and not trimmed:
            return
        # (set_reactive: the view's virtual_size has no validator or watcher, and repaints
        # nothing itself; the reactive's set looked both up per append)
        self.set_reactive(
            _VIRTUAL_SIZE, Size(region.width if self.wrap else self._widest + 1, new_rows)
        )
        if not self.is_mounted or not height:
            return
        if (new_rows > height) != had_bar:  # the scrollbar column appears: every row is narrower
            self._forget_rows()
            self.refresh()
        if self.auto_scroll:
            top = new_rows - height if new_rows > height else 0
            if top != old_top:
                self._follow_to(top, scroll_y, new_rows, region)  # repaints the view
            elif trimmed:
                self.refresh()
            else:  # the view is not full yet: only the new rows
                self._refresh_rows(old_rows - top, new_rows - top)
            return
        # Scrolled back: keep the same lines on screen; only the scrollbar's thumb moves.
        if trimmed:
            if old_top >= trimmed:
                self.scroll_to(y=old_top - trimmed, animate=False)
            self.refresh()
            return
        self._refresh_rows(old_rows - old_top, new_rows - old_top)
        self.refresh(Region(region.width - 1, 0, 1, height))

    def _follow_to(self, top: int, scroll_y: float, rows: int, size: Size) -> None:
        """Move a following view's top row to `top` (the end): the scroll position set and the
        view repainted, what `scroll_to(animate=False)` comes to here. `scroll_to` also stops
        any scroll animation, releases an anchor, validates and runs the watchers, a third of
        a busy second's appends; a view that follows has none of those to do. An animated
        scroll still in flight (the target is not where the view is) goes Textual's way.
        (`scroll_y`: where the view is; `rows`: its virtual height, just set; `size`: the
        view's, its container size.)"""
        most = rows - size.height if rows > size.height else 0  # max_scroll_y (no scrollbar)
        if self.scroll_target_y != scroll_y or not 0 <= top <= most:
            self.scroll_to(y=top, animate=False)
            return
        self.set_reactive(_SCROLL_TARGET_Y, float(top))
        self.set_reactive(_SCROLL_Y, float(top))
        # (this view's watch_scroll_y: the rows all moved up) Its region, as ScrollView's own
        # watcher does: a refresh of no region works the view's size out twice (`size`,
        # `outer_size`: each a walk up the DOM to the screen).
        self.refresh(Region(0, 0, size.width, size.height))

    def _refresh_rows(self, first: int, last: int) -> None:
        region = self.scrollable_content_region
        first, last = max(0, first), min(region.height, last)
        if first < last:
            self.refresh(Region(0, first, region.width, last - first))

    def rewrap(self) -> None:
        """Rebuild the rows after a wrap toggle or a width change."""
        width = max(1, self.scrollable_content_region.width - 1)
        self._rows, self._row_seq = [], []
        for seq, strip in zip(self._seqs, self._line_strips, strict=True):
            rows = self._split(strip, width)
            self._rows.extend(rows)
            self._row_seq.extend([seq] * len(rows))
        self._forget_rows()
        self._base = 0
        region = self.scrollable_content_region
        self.virtual_size = Size(region.width if self.wrap else self._widest + 1, len(self._rows))
        if self.wrap:
            self.scroll_to(x=0, animate=False)
        if self.auto_scroll:
            self.scroll_to(y=self.max_scroll_y, animate=False)
        self.refresh()

    def row_of(self, seq: int) -> int:
        """The first display row of line `seq`."""
        return bisect_left(self._row_seq, seq)

    def show_row(self, row: int) -> None:
        """Scroll so that `row` is in the middle of the view."""
        height = self.scrollable_content_region.height
        self.scroll_to(y=max(0, min(self.max_scroll_y, row - height // 2)), animate=False)
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        if self.wrap:
            self.rewrap()
        else:
            self._forget_rows()
            if self.auto_scroll:
                self.scroll_to(y=self.max_scroll_y, animate=False)

    # -- drawing ----------------------------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        # Per frame: the widget's style (a walk over every ancestor's styles) and the
        # scrollbar's geometry and colours, not per line.
        style = self.rich_style
        if style != self._cache_style:
            self._forget_rows()
            self._cache_style = style
        region = self.scrollable_content_region
        height = region.height
        rows = len(self._rows)
        bar = None
        if rows > height and height > 0:
            thumb = max(1, round(height * height / rows))
            span = max(1, rows - height)
            start = round((height - thumb) * min(1.0, self.scroll_y / span))
            back = self.background_colors[1]
            track = Style(bgcolor=(back + self.styles.scrollbar_background).rich_color)
            knob = Style(
                color=(back + self.styles.scrollbar_color).rich_color,
                bgcolor=(back + self.styles.scrollbar_background).rich_color,
            )
            bar = (start, start + thumb, Segment(" ", track), Segment("█", knob))
        current = Style(underline=True, bold=True)
        self._frame = (style, bar, current)
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        style, bar, current = self._frame or (self.rich_style, None, None)
        width = self.scrollable_content_region.width - (1 if bar else 0)
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        in_knob = None if bar is None else bar[0] <= y < bar[1]
        if index < len(self._rows):
            is_current = current is not None and self._row_seq[index] == self.current_seq
            # A row is cached with its scrollbar cell: while following, every row moves up one
            # per new line, and this keeps the redraw of a row to one lookup. Its text's
            # segments are cached apart too (the key without the cell): the knob moves down a
            # row every few new lines, and a row leaving it needs only its cell again.
            key = (index + self._base, scroll_x, width, in_knob)
            line = None if is_current else self._cache.get(key)
            if line is None:
                if is_current or bar is None:
                    line = self._rows[index].crop_extend(scroll_x, scroll_x + width, style)
                    line = line.apply_style(style)
                    if is_current:
                        line = line.apply_style(current)
                    line = self._with_bar(line, bar, in_knob)
                else:
                    text_key = (index + self._base, scroll_x, width)
                    segments = self._texts.get(text_key)
                    if segments is None:
                        segments = _row_segments(self._rows[index], scroll_x, width, style)
                        self._texts[text_key] = segments
                    # (one Strip: the text's Strip and one with its cell made two more)
                    line = Strip([*segments, bar[3] if in_knob else bar[2]], width + 1)
                if not is_current:
                    self._cache[key] = line
            return line
        if index == 0 and self.placeholder:
            text = self.placeholder
            line = Strip([Segment(text, style + Style(dim=True))], cell_len(text))
            line = line.crop_extend(0, width, style)
        else:
            line = Strip.blank(width, style)
        return self._with_bar(line, bar, in_knob)

    @staticmethod
    def _with_bar(line: Strip, bar: tuple | None, in_knob: bool | None) -> Strip:
        if bar is None:
            return line
        _, _, track, knob = bar
        # (one Strip: Strip.join of the line and a Strip of the cell made two)
        return Strip([*line, knob if in_knob else track], line.cell_length + 1)

    def on_click(self, event: events.Click) -> None:
        # A click in the scrollbar column jumps there (the thumb cannot be dragged).
        region = self.scrollable_content_region
        if len(self._rows) > region.height and event.x >= region.width - 1:
            self.scroll_to(y=self.max_scroll_y * event.y / max(1, region.height - 1), animate=False)

    # -- follow -----------------------------------------------------------------------------

    def watch_scroll_y(self, old: float, new: float) -> None:
        # ScrollView's own watcher also moves Textual's scrollbar widget, which this view
        # keeps at size 0 (it draws its own): refreshing a widget the screen does not show
        # makes Textual lay out the whole screen again on the next frame, once per appended
        # line while following. So only the repaint ScrollView would do.
        if round(old) != round(new):
            self.refresh(self.size.region)
        # Only a move up pauses: following itself only ever scrolls down. A view that grows
        # (the pane above shrank) clamps scroll_y down to the new end: not a scroll back.
        if new < old and self.auto_scroll and new < self.max_scroll_y - 0.5:
            self.auto_scroll = False
            self.post_message(self.FollowChanged(False))
        elif new > old and not self.auto_scroll and new >= self.max_scroll_y - 0.5:
            self.auto_scroll = True
            self.post_message(self.FollowChanged(True))


# The reactives an append sets, read from the class once: each read of `LogView.x` is a call
# of the descriptor's (three an append).
_VIRTUAL_SIZE, _SCROLL_Y, _SCROLL_TARGET_Y = (
    LogView.virtual_size,
    LogView.scroll_y,
    LogView.scroll_target_y,
)


def _row_segments(row: Strip, scroll_x: int, width: int, style: Style) -> list[Segment]:
    """The segments of `row` seen from `scroll_x` in `width` cells, in the view's `style`:
    what `row.crop_extend(scroll_x, scroll_x + width, style).apply_style(style)` holds. A row
    that fits unscrolled (most: a line as wide as the view is rare) is styled and padded
    here, without the two Strips (and their seven caches each) that made it."""
    length = row.cell_length
    if scroll_x or length > width:
        return list(row.crop_extend(scroll_x, scroll_x + width, style).apply_style(style))
    # (Segment.apply_style's rule: the view's style under each segment's, none for a control)
    segments = [
        Segment(text, None if control else style + seg_style, control)
        for text, seg_style, control in row
    ]
    if length < width:  # the padding: crop_extend's, in the view's style
        segments.append(Segment(" " * (width - length), style))
    return segments


class LogPane(Vertical):
    DEFAULT_CSS = """
    LogPane LogView { height: 1fr; background: transparent; }
    LogPane #log-input { dock: bottom; display: none; height: 1; border: none; padding: 0 1; }
    LogPane #log-input.-open { display: block; }
    """
    BINDINGS = [Binding("escape", "close_input", "Close", show=False)]

    class StateChanged(Message):
        """The pane's title should change (filter, level, follow, search)."""

    def __init__(self, buffer: LogBuffer, key_of: Callable[[str], str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.buffer = buffer
        # The key bound to a binding id, as a person reads it (the app's, after the keymap).
        self.key_of = key_of
        self._shown: list[LogLine] = []
        self._input_mode: str | None = None  # "filter" | "search"
        self._match: int | None = None  # index in _shown of the current match
        self._matches = 0  # lines among _shown that contain the search text
        self._filter_timer: Timer | None = None
        self._styles: dict[str, Style] = {}
        self._hl: Style | None = None
        self._view: LogView | None = None

    def compose(self) -> ComposeResult:
        yield LogView(max_lines=self.buffer.lines.maxlen, id="log-view")
        yield Input(id="log-input")

    @property
    def view(self) -> LogView:
        # Looked up once: the view is composed with the pane and never replaced, and a DOM
        # query per use cost a tenth of a second's append.
        if self._view is None:
            self._view = self.query_one(LogView)
        return self._view

    @property
    def following(self) -> bool:
        return self.view.auto_scroll

    def describe(self) -> str:
        """The pane's title: what is shown, the search position and whether it follows."""
        buf = self.buffer
        parts = ["logs"]
        if buf.filter_text:
            parts.append(f"filter '{buf.filter_text}'")
        if buf.min_level != "info":
            parts.append("warnings+" if buf.min_level == "warning" else "errors only")
        if buf.search_text:
            if not self._matches:
                parts.append(f"'{buf.search_text}': no matches")
            elif self._match is None:
                parts.append(f"'{buf.search_text}' {self._matches} matches (n/N)")
            else:
                parts.append(f"'{buf.search_text}' {self.match_number()}/{self._matches}")
        if not buf.show_noise:
            parts.append(f"access/batch hidden ({self.key_of('logs.fold')})")
        if self.view.wrap:
            parts.append("wrap")
        parts.append("following" if self.following else "paused (G: follow)")
        return " · ".join(parts)

    def placeholder(self) -> str:
        """Why the view is empty although the buffer is not (and which key changes that),
        or "" when there is nothing to say."""
        buf = self.buffer
        if self._shown or not buf.lines:
            return ""
        folded = buf.folded_matches()
        lines = f"{folded} access/batch line{'s' if folded != 1 else ''}"
        fold = self.key_of("logs.fold")
        if buf.filter_text:
            if folded:
                verb = "does" if folded == 1 else "do"
                return (
                    f"no shown line matches '{buf.filter_text}'; {lines} {verb} "
                    f"({fold} shows them, esc clears)"
                )
            return f"no line matches '{buf.filter_text}' (esc clears)"
        if buf.min_level != "info":
            which = "warnings or errors" if buf.min_level == "warning" else "errors"
            level = self.key_of("logs.level")
            return f"no {which} in the last {len(buf.lines)} lines ({level}: next level)"
        if folded:
            return f"{lines} hidden ({fold} shows them)"
        return ""

    def match_number(self) -> int:
        """1-based position of the current match among all matches (1 = oldest)."""
        if self._match is None:
            return 0
        return sum(1 for line in self._shown[: self._match + 1] if self.buffer.contains(line.text))

    # -- lines ------------------------------------------------------------------------------

    def _strip(self, line: LogLine) -> Strip:
        text = self.buffer.shown_text(line)
        if "\t" in text:
            text = text.expandtabs(8)
        if not text.isprintable():
            text = _CONTROL.sub("", text)
        styles, level = self._styles, line.level
        if level in styles:  # (a subscript: no call per line)
            style = styles[level]
        else:
            style = styles[level] = Style.parse(level_style(self.app, level))
        offset = len(text) - len(line.text) if self.buffer.search_text else 0
        spans = list(self.buffer.search_spans(text[offset:])) if self.buffer.search_text else []
        if not spans:
            # (printable ASCII is a cell a character: what cell_len says, without its calls)
            cells = len(text) if text.isascii() else cell_len(text)
            return Strip([Segment(text, style)] if text else [], cells)
        if self._hl is None:
            self._hl = style + Style.parse(search_style(self.app))
        segments, pos = [], 0
        for a, b in spans:
            a, b = a + offset, b + offset
            if a > pos:
                segments.append(Segment(text[pos:a], style))
            segments.append(Segment(text[a:b], style + self._hl))
            pos = b
        if pos < len(text):
            segments.append(Segment(text[pos:], style))
        return Strip(segments, cell_len(text))

    def changed_by(self, lines: list[LogLine]) -> bool:
        """Whether appending `lines` changes what this pane shows: one of them passes the
        filter and fold, or the pane is empty (its placeholder counts the folded lines). An
        idle server's access lines (the agent's polls, the gateway's health checks) do not:
        with 8 servers they came several times a second, each a draw of the whole app."""
        return not self._shown or any(self.buffer.matches(line) for line in lines)

    def append(self, lines: list[LogLine]) -> None:
        shown = [line for line in lines if self.buffer.matches(line)]
        if not shown:
            if not self._shown:  # still empty: the placeholder's count grows
                self.view.set_placeholder(self.placeholder())
            return
        before = self._matches
        if self.buffer.search_text:
            self._matches += sum(1 for line in shown if self.buffer.contains(line.text))
        self._shown.extend(shown)
        cap = self.buffer.lines.maxlen or len(self._shown)
        if len(self._shown) > cap:
            drop = len(self._shown) - cap
            if self.buffer.search_text:
                gone = self._shown[:drop]
                self._matches -= sum(1 for line in gone if self.buffer.contains(line.text))
            del self._shown[:drop]
            if self._match is not None:
                self._match = self._match - drop if self._match >= drop else None
        view = self.view
        # (a list: a generator is a call a line)
        view.append([(line.seq, self._strip(line)) for line in shown])
        if view.placeholder:
            view.set_placeholder("")
        if self._matches != before:
            self.post_message(self.StateChanged())

    def redraw(self) -> None:
        """Re-render from the buffer (after a filter, level, fold, search or theme change)."""
        view = self.view
        following = view.auto_scroll
        self._styles, self._hl = {}, None
        view.clear()
        view.auto_scroll = following
        self._shown = self.buffer.visible()
        self._matches = (
            sum(1 for line in self._shown if self.buffer.contains(line.text))
            if self.buffer.search_text
            else 0
        )
        self._match = None
        view.current_seq = None
        view.append((line.seq, self._strip(line)) for line in self._shown)
        view.set_placeholder(self.placeholder())
        if following:
            view.scroll_to(y=view.max_scroll_y, animate=False)
        self.post_message(self.StateChanged())

    def toggle_wrap(self) -> None:
        view = self.view
        view.wrap = not view.wrap
        view.rewrap()
        if self._match is not None:
            view.show_row(view.row_of(self._shown[self._match].seq))
        self.post_message(self.StateChanged())

    # -- filter and search input ----------------------------------------------------------

    def open_input(self, mode: str) -> None:
        self._input_mode = mode
        box = self.query_one("#log-input", Input)
        box.placeholder = (
            "filter: show only lines containing... (enter: keep, esc: clear)"
            if mode == "filter"
            else "search from the newest line (enter: jump, n: older, N: newer, esc: clear)"
        )
        box.value = self.buffer.filter_text if mode == "filter" else self.buffer.search_text
        box.add_class("-open")
        box.focus()

    def action_close_input(self) -> None:
        box = self.query_one("#log-input", Input)
        if not box.has_class("-open"):
            if self.buffer.search_text:  # esc in the log clears the search, then the filter
                self.clear_search()
            elif self.buffer.filter_text:
                self.buffer.set_filter("")
                self.redraw()
            return
        if self._filter_timer is not None:
            self._filter_timer.stop()
            self._filter_timer = None
        mode = self._input_mode
        box.remove_class("-open")
        self._input_mode = None
        if mode == "filter":
            self.buffer.set_filter("")
            self.redraw()
        elif mode == "search":
            self.clear_search()
        self.view.focus()

    def clear_search(self) -> None:
        self.buffer.search_text = ""
        self.redraw()

    @on(Input.Changed, "#log-input")
    def _typed(self, event: Input.Changed) -> None:
        # The filter applies as you type, but only after a pause: redrawing a long tail on
        # every keystroke would make typing lag. Search applies on enter.
        event.stop()
        if self._input_mode != "filter":
            return
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(
            FILTER_DELAY_S, lambda v=event.value: self._apply_filter(v)
        )

    def _apply_filter(self, value: str) -> None:
        self._filter_timer = None
        if value.strip() != self.buffer.filter_text:
            self.buffer.set_filter(value)
            self.redraw()

    @on(Input.Submitted, "#log-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        mode = self._input_mode
        self.query_one("#log-input", Input).remove_class("-open")
        self._input_mode = None
        self.view.focus()
        if mode == "filter":
            if self._filter_timer is not None:
                self._filter_timer.stop()
            self._apply_filter(event.value)
        elif mode == "search":
            self.buffer.search_text = event.value.strip()
            self.redraw()
            if self.buffer.search_text:
                self.search(older=True)  # from the tail: the newest match first
        self.post_message(self.StateChanged())

    def search(self, older: bool) -> bool:
        """Move to the next match toward older (n) or newer (N) lines; the first search
        starts at the tail. Pauses following so the match stays put."""
        if not self.buffer.search_text or not self._matches:
            self.post_message(self.StateChanged())
            return False
        if self._match is None:
            start = len(self._shown) if older else -1
        else:
            start = self._match
        found = self.buffer.search(self._shown, start, backwards=older)
        if found is None:
            return False
        self._match = found
        view = self.view
        view.auto_scroll = False
        view.current_seq = self._shown[found].seq
        view.show_row(view.row_of(self._shown[found].seq))
        self.post_message(self.StateChanged())
        return True

    def follow(self) -> None:
        view = self.view
        view.auto_scroll = True
        self._match = None
        view.current_seq = None
        view.scroll_to(y=view.max_scroll_y, animate=False)
        view.refresh()
        self.post_message(self.StateChanged())

    @on(LogView.FollowChanged)
    def _follow_changed(self, event: LogView.FollowChanged) -> None:
        self.post_message(self.StateChanged())
