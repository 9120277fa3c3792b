"""The log tail: coloured by level, filter, search, and follow that pauses while scrolled back."""

from __future__ import annotations

from math import ceil

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import Reactive
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widgets import Input, RichLog

from sgltui.tui.logbuffer import LogBuffer, LogLine
from sgltui.tui.widgets.colors import level_style, search_style

FILTER_DELAY_S = 0.25


class QuietScrollBar(ScrollBar):
    """A scrollbar that repaints only when what it draws changes.

    Textual's scrollbar repaints (through Rich, about a millisecond) whenever the log grows by
    a line, although the thumb of a long log moves by a cell only every few dozen lines.
    """

    window_virtual_size: Reactive[int] = Reactive(100, repaint=False)
    window_size: Reactive[int] = Reactive(0, repaint=False)
    position: Reactive[float] = Reactive(0, repaint=False)
    _drawn: tuple | None = None

    def _geometry(self) -> tuple:
        size = self.size.height if self.vertical else self.size.width
        virtual = ceil(self.window_virtual_size)
        window = ceil(self.window_size if self.window_size < self.window_virtual_size else 0)
        if not (window and size and virtual and size != virtual):
            return (size,)  # no thumb
        # The thumb's first and last eighth of a cell, as ScrollBarRender.render_bar draws it.
        thumb = max(1, window / (virtual / size))
        start = int((size - thumb) * (self.position / (virtual - window)) * 8)
        return (size, start, start + ceil(thumb * 8))

    def _repaint_if_moved(self) -> None:
        if self._geometry() != self._drawn:
            self.refresh()

    def watch_window_virtual_size(self) -> None:
        self._repaint_if_moved()

    def watch_window_size(self) -> None:
        self._repaint_if_moved()

    def watch_position(self) -> None:
        self._repaint_if_moved()

    _strips: list[Strip] = []
    _plain = False
    _strips_key: tuple | None = None

    def render(self):
        self._drawn = self._geometry()
        return super().render()

    def render_lines(self, crop: Region) -> list[Strip]:
        # Most frames find every line in the styles cache and never call render_line: the
        # strips are checked (and rebuilt if the bar changed) only on the first line asked for.
        self._checked = False
        return super().render_lines(crop)

    _checked = False

    def render_line(self, y: int) -> Strip:
        if not self._checked:
            self._checked = True
            self._plain = self.screen.styles.scrollbar_color.a == 0
            if not self._plain:
                self._build_strips()
        if self._plain:
            return super().render_line(y)
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width)

    def _build_strips(self) -> None:
        # The bar's segments straight into Strips (ScrollBarRender.render_bar, as the Rich
        # renderable would draw them) without a Rich console pass per repaint.
        parent = self.parent
        styles = parent.styles
        if self.grabbed:
            background, color = styles.scrollbar_background_active, styles.scrollbar_color_active
        elif self.mouse_over:
            background, color = styles.scrollbar_background_hover, styles.scrollbar_color_hover
        else:
            background, color = styles.scrollbar_background, styles.scrollbar_color
        if background.a < 1:
            background = parent.background_colors[0] + background
        color = background + color
        width, height = self.size
        geometry = self._geometry()
        key = (geometry, width, height, color, background, self.visual_style)
        if key != self._strips_key:
            self._drawn = geometry
            window = self.window_size if self.window_size < self.window_virtual_size else 0
            bar = self.renderer.render_bar(
                size=height if self.vertical else width,
                virtual_size=ceil(self.window_virtual_size),
                window_size=ceil(window),
                position=self.position,
                thickness=width if self.vertical else height,
                vertical=self.vertical,
                back_color=background.rich_color,
                bar_color=color.rich_color,
            )
            base = self.visual_style.rich_style
            if self.vertical:
                self._strips = [Strip([seg], width).apply_style(base) for seg in bar.segments]
            else:
                self._strips = [
                    Strip(line, width).apply_style(base)
                    for line in Segment.split_lines(bar.segments)
                ]
            self._strips_key = key


class LogView(RichLog):
    """A RichLog that follows the end only while the user is at the end (toolong's rule).

    Tuned for a tail that grows every second (an idle TUI must stay cheap): lines are turned
    into Strips once, each visible line is a cache hit, the widget's style is looked up once
    per frame instead of once per line, and scrollbars repaint only when their thumb moves.
    """

    # Appending lines grows the virtual size. As a plain Widget reactive that costs a layout of
    # the whole screen per batch of lines (most of an idle TUI's CPU) and a repaint of the whole
    # view; the view's own size never changes with it (height 1fr, both scrollbars always
    # shown), so the watcher updates the scrollbars and repaints only the rows that changed.
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=False)

    _frame_style: Style | None = None

    def watch_virtual_size(self, old: Size, size: Size) -> None:
        if not self.is_mounted:
            return
        self._update_scrollbars(size)
        # Repaint only the rows that can change: lines arriving below a view scrolled back
        # change nothing on screen, lines arriving while the view is not yet full change only
        # their own rows (following scrolls once the view is full, and the scroll repaints).
        if old.width != size.width:
            self.refresh()
            return
        region = self.scrollable_content_region
        top = self.scroll_offset.y
        first = max(0, min(old.height, size.height) - top)
        last = min(region.height, max(old.height, size.height) - top)  # rows past both are blank
        if first < last:
            self.refresh(Region(0, first, region.width, last - first))

    def _update_scrollbars(self, virtual_size: Size) -> None:
        # Widget._scroll_update without its unconditional scrollbar repaints.
        self._refresh_scrollbars()
        width, height = self.container_size
        if self.show_vertical_scrollbar and self.styles.scrollbar_size_vertical:
            bar = self.vertical_scrollbar
            bar.window_virtual_size = virtual_size.height
            bar.window_size = height - self.scrollbar_size_horizontal
        if self.show_horizontal_scrollbar and self.styles.scrollbar_size_horizontal:
            bar = self.horizontal_scrollbar
            bar.window_virtual_size = virtual_size.width
            bar.window_size = width - self.scrollbar_size_vertical
        self.scroll_x = self.validate_scroll_x(self.scroll_x)
        self.scroll_y = self.validate_scroll_y(self.scroll_y)

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        if self._vertical_scrollbar is None:
            self._vertical_scrollbar = bar = QuietScrollBar(
                vertical=True, name="vertical", thickness=self.scrollbar_size_vertical
            )
            bar.display = False
            self.app._start_widget(self, bar)
        return self._vertical_scrollbar

    @property
    def horizontal_scrollbar(self) -> ScrollBar:
        if self._horizontal_scrollbar is None:
            self._horizontal_scrollbar = bar = QuietScrollBar(
                vertical=False, name="horizontal", thickness=self.scrollbar_size_horizontal
            )
            bar.display = False
            self.app._start_widget(self, bar)
        return self._horizontal_scrollbar

    def write_text(self, text: Text, scroll_end: bool | None = None) -> None:
        """Append one unwrapped line of Rich Text: RichLog.write without measuring and
        rendering through the console (the same Strip, for a tenth of the cost)."""
        if not self._size_known or self.wrap or "\t" in text.plain:  # tabs: let Rich expand them
            self.write(text, scroll_end=scroll_end)
            return
        console = self.app.console
        if text.spans:
            segments = list(text.render(console))
        else:  # Text.render ignores the text's own style when it has no spans
            segments = (
                [Segment(text.plain, console.get_style(text.style) if text.style else None)]
                if text.plain
                else []
            )
        strip = Strip(segments, text.cell_len)
        self.lines.append(strip)
        if self.max_lines is not None and len(self.lines) > self.max_lines:
            self._start_line += len(self.lines) - self.max_lines
            self.refresh()
            self.lines = self.lines[-self.max_lines :]
        self._widest_line_width = max(self._widest_line_width, strip.cell_length, self.min_width)
        self.virtual_size = Size(self._widest_line_width, len(self.lines))
        if self.auto_scroll if scroll_end is None else scroll_end:
            self.scroll_end(animate=False, immediate=False, x_axis=False)

    def render_lines(self, crop: Region) -> list[Strip]:
        # Looked up once per frame: rich_style walks every ancestor's styles.
        self._frame_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def render_line(self, y: int) -> Strip:
        style = self._frame_style or self.rich_style
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        index = scroll_y + y
        if index >= len(self.lines):
            return Strip.blank(width, style)
        key = (index + self._start_line, scroll_x, width, self._widest_line_width)
        line = self._line_cache.get(key)
        if line is None:
            line = self._line_cache[key] = self.lines[index].crop_extend(
                scroll_x, scroll_x + width, style
            )
        return line.apply_style(style)

    class FollowChanged(Message):
        def __init__(self, following: bool) -> None:
            super().__init__()
            self.following = following

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        # Only a move up pauses: following itself only ever scrolls down, and it can briefly
        # lag the end while lines arrive, which must not read as "the user scrolled back".
        # A view that grows (the pane above shrank) clamps scroll_y down to the new end: that
        # is not a scroll back either.
        if new < old and self.auto_scroll and new < self.max_scroll_y - 0.5:
            self.auto_scroll = False
            self.post_message(self.FollowChanged(False))
        elif new > old and not self.auto_scroll and new >= self.max_scroll_y - 0.5:
            self.auto_scroll = True
            self.post_message(self.FollowChanged(True))


class LogPane(Vertical):
    DEFAULT_CSS = """
    /* The horizontal scrollbar is always there: if it appeared with the first long line it
       would shrink the view after the scroll to the end and hide the newest lines. */
    LogPane LogView { height: 1fr; background: transparent; overflow-x: scroll; overflow-y: scroll;
                      scrollbar-size-horizontal: 1; }
    LogPane #log-input { dock: bottom; display: none; height: 1; border: none; padding: 0 1; }
    LogPane #log-input.-open { display: block; }
    """
    BINDINGS = [Binding("escape", "close_input", "Close", show=False)]

    class StateChanged(Message):
        """The pane's title should change (filter, level, follow)."""

    def __init__(self, buffer: LogBuffer, **kwargs) -> None:
        super().__init__(**kwargs)
        self.buffer = buffer
        self._shown: list[LogLine] = []
        self._input_mode: str | None = None  # "filter" | "search"
        self._match: int | None = None
        self._filter_timer = None

    def compose(self) -> ComposeResult:
        yield LogView(
            max_lines=self.buffer.lines.maxlen,
            wrap=False,
            markup=False,
            highlight=False,
            id="log-view",
        )
        yield Input(id="log-input")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    @property
    def following(self) -> bool:
        return self.view.auto_scroll

    def describe(self) -> str:
        """The pane's title: what is shown and whether it follows."""
        parts = ["logs"]
        if self.buffer.filter_text:
            parts.append(f"filter '{self.buffer.filter_text}'")
        if self.buffer.min_level != "info":
            parts.append(
                f"{self.buffer.min_level}s+"
                if self.buffer.min_level == "warning"
                else "errors only"
            )
        if self.buffer.search_text:
            parts.append(f"search '{self.buffer.search_text}'")
        parts.append("following" if self.following else "paused (G: follow)")
        return " · ".join(parts)

    def append(self, lines: list[LogLine]) -> None:
        for line in lines:
            if self.buffer.matches(line):
                self._write(line)
        cap = self.buffer.lines.maxlen or len(self._shown)
        if len(self._shown) > cap:
            del self._shown[: len(self._shown) - cap]

    def redraw(self) -> None:
        """Re-render from the buffer (after a filter, level, search or theme change)."""
        view = self.view
        following = view.auto_scroll
        view.clear()
        self._shown = []
        for line in self.buffer.visible():
            self._write(line, scroll=False)
        if following:
            view.scroll_end(animate=False, immediate=False)
        self.post_message(self.StateChanged())

    def _write(self, line: LogLine, scroll: bool | None = None) -> None:
        text = Text(
            line.text if line.slot == "0" else f"[{line.slot}] {line.text}",
            style=level_style(self.app, line.level),
            no_wrap=True,
        )
        offset = 0 if line.slot == "0" else len(line.slot) + 3
        for a, b in self.buffer.search_spans(line.text):
            text.stylize(search_style(self.app), a + offset, b + offset)
        self.view.write_text(text, scroll_end=scroll)
        self._shown.append(line)

    # -- filter and search input ----------------------------------------------------------

    def open_input(self, mode: str) -> None:
        self._input_mode = mode
        box = self.query_one("#log-input", Input)
        box.placeholder = (
            "filter: show only lines containing... (enter: keep, esc: clear)"
            if mode == "filter"
            else "search: highlight and jump (enter: next, n/N later, esc: clear)"
        )
        box.value = self.buffer.filter_text if mode == "filter" else self.buffer.search_text
        box.add_class("-open")
        box.focus()

    def action_close_input(self) -> None:
        box = self.query_one("#log-input", Input)
        if not box.has_class("-open"):
            return
        if self._filter_timer is not None:
            self._filter_timer.stop()
            self._filter_timer = None
        if self._input_mode == "filter":
            self.buffer.set_filter("")
        elif self._input_mode == "search":
            self.buffer.search_text = ""
        box.remove_class("-open")
        self._input_mode = None
        self.redraw()
        self.view.focus()

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
            self._match = None
            self.view.auto_scroll = False  # stay on the match, not on the end
            self.redraw()
            self.search(backwards=False)
        self.post_message(self.StateChanged())

    def search(self, backwards: bool) -> bool:
        """Scroll to the next (or previous) match; pauses following so the match stays put."""
        start = (
            self._match if self._match is not None else (len(self._shown) if not backwards else 0)
        )
        if self._match is None and not backwards:
            start = self._current_top() - 1
        found = self.buffer.search(self._shown, start, backwards=backwards)
        if found is None:
            return False
        self._match = found
        view = self.view
        view.auto_scroll = False
        # After the refresh: a redraw just before may still have a scroll pending.
        view.call_after_refresh(
            view.scroll_to,
            y=max(0, found - view.scrollable_content_region.height // 2),
            animate=False,
        )
        self.post_message(self.StateChanged())
        return True

    def _current_top(self) -> int:
        return int(self.view.scroll_y)

    def follow(self) -> None:
        view = self.view
        view.auto_scroll = True
        self._match = None
        view.scroll_end(animate=False)
        self.post_message(self.StateChanged())

    @on(LogView.FollowChanged)
    def _follow_changed(self, event: LogView.FollowChanged) -> None:
        self.post_message(self.StateChanged())
