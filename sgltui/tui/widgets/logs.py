"""The log tail: coloured by level, filter, search, and follow that pauses while scrolled back."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.reactive import Reactive
from textual.widgets import Input, RichLog
from rich.text import Text

from sgltui.tui.logbuffer import LogBuffer, LogLine
from sgltui.tui.widgets.colors import level_style, search_style


FILTER_DELAY_S = 0.25


class LogView(RichLog):
    """A RichLog that follows the end only while the user is at the end (toolong's rule)."""

    # Appending lines grows the virtual size. As a plain Widget reactive that costs a layout of
    # the whole screen per batch of lines (most of an idle TUI's CPU); the view's own size never
    # changes with it (height 1fr, both scrollbars always shown), so only its scrollbars need
    # updating.
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        if self.is_mounted:
            self._scroll_update(size)
            self.refresh()

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
        yield LogView(max_lines=self.buffer.lines.maxlen, wrap=False, markup=False, highlight=False, id="log-view")
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
            parts.append(f"{self.buffer.min_level}s+" if self.buffer.min_level == "warning" else "errors only")
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
        text = Text(line.text if line.slot == "0" else f"[{line.slot}] {line.text}",
                    style=level_style(self.app, line.level), no_wrap=True)
        offset = 0 if line.slot == "0" else len(line.slot) + 3
        for a, b in self.buffer.search_spans(line.text):
            text.stylize(search_style(self.app), a + offset, b + offset)
        self.view.write(text, scroll_end=scroll)
        self._shown.append(line)

    # -- filter and search input ----------------------------------------------------------

    def open_input(self, mode: str) -> None:
        self._input_mode = mode
        box = self.query_one("#log-input", Input)
        box.placeholder = ("filter: show only lines containing... (enter: keep, esc: clear)" if mode == "filter"
                           else "search: highlight and jump (enter: next, n/N later, esc: clear)")
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
        self._filter_timer = self.set_timer(FILTER_DELAY_S, lambda v=event.value: self._apply_filter(v))

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
        start = self._match if self._match is not None else (len(self._shown) if not backwards else 0)
        if self._match is None and not backwards:
            start = self._current_top() - 1
        found = self.buffer.search(self._shown, start, backwards=backwards)
        if found is None:
            return False
        self._match = found
        view = self.view
        view.auto_scroll = False
        # After the refresh: a redraw just before may still have a scroll pending.
        view.call_after_refresh(view.scroll_to, y=max(0, found - view.scrollable_content_region.height // 2),
                                animate=False)
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
