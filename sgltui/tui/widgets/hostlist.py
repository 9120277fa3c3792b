"""The Hosts view of a fleet of many hosts (more than fleetsource.OPEN_ALL_MAX): one line per
host, the failing first (down, then a failed slot), then the busiest; a host's slots are shown
in the slots view only while it is opened (Enter), and only then are its pushes followed.

`/` types a filter (words matched against each host's name, state, profiles and slot states:
`down`, `failed`, `demo-mtp`, `h1`), Enter or Escape ends the typing, Escape again clears it.
The border title counts the hosts shown, down and failing.

Like the slots view it draws its own lines, one cached Strip per row: a poll that changes one
host's figures repaints that row only; a host whose line reads the same costs nothing.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Region, Size
from textual.markup import escape
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.visual import Visual

from sgltui.core import units
from sgltui.fleet import view
from sgltui.fleet.view import HostState, HostSummary


def summary_line(s: HostSummary, opened: bool, focused: bool) -> str:
    """A host's line: ▸ (closed) or ▾ (opened), its name (in the accent colour: the host the
    screen follows), then its figures or why it is down."""
    fold = "▾" if opened else "▸"
    name = escape(f"{s.name[:10]:<10}")
    if focused:
        name = f"[b $accent]{name}[/]"
    if not s.reachable:
        return f"{fold} {name} [$error]○ {escape(s.state)}[/]"
    tok = units.sig3(s.tok_s) if s.tok_s is not None else "-"
    fail = f"  [$error]{s.failing} failed[/]" if s.failing else ""
    figures = f"{s.gpus} GPU  {s.running}/{s.slots} slots  {tok:>5} tok/s"
    return f"{fold} {name} [$success]●[/] {figures}{fail}"


class HostListPane(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    HostListPane {
        height: auto; max-height: 12; width: 60; max-width: 50%; padding: 0;
        overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1;
        & > .hostlist--highlighted {
            background: $block-cursor-blurred-background;
        }
        &:focus > .hostlist--highlighted {
            color: $block-cursor-foreground;
            background: $block-cursor-background;
            text-style: $block-cursor-text-style;
        }
    }
    """
    COMPONENT_CLASSES = {"hostlist--row", "hostlist--highlighted"}
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-10)", "Page up", show=False),
        Binding("pagedown", "cursor(10)", "Page down", show=False),
        Binding("home", "cursor(-100000)", "First", show=False),
        Binding("end", "cursor(100000)", "Last", show=False),
        Binding("enter", "open_host", "Open host", show=False),
        Binding("slash", "type_filter", "Filter hosts", show=False),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    highlighted: reactive[int] = reactive(0, always_update=False)

    class Toggled(Message):
        """Enter on a host's row: open it (its slots shown) or close it."""

        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[tuple[str, str]] = []  # (host, markup) shown, in order
        self.words = ""  # the filter
        self.typing = False  # keys go into the filter
        self.counts = (0, 0, 0, 0)  # (shown, all, down, failing)
        self._strips: dict[int, tuple[tuple[object, ...], Strip]] = {}
        self._last: tuple[list[HostState], set[str], str | None] | None = None
        self.repainted = 0  # rows repainted since mounted (tests and benches read it)
        # host -> (what its line was read from, its summary): a host whose link has no new
        # STATUS since is not summarised again (64 hosts, a draw or more a second)
        self._read: dict[str, tuple[tuple[object, ...], HostSummary]] = {}
        self.moved = False  # the operator moved the cursor: it stays on its host from then on

    @property
    def text(self) -> str:
        """The rows' markup (tests read it)."""
        return "\n".join(m for _, m in self.rows)

    def show(self, hosts: list[HostState], opened: set[str], focus: str | None) -> None:
        self._last = (hosts, opened, focus)
        summaries = sorted((self._summary(h) for h in hosts), key=view.rank)
        shown = [s for s in summaries if view.matches(s, self.words)]
        rows = [(s.name, summary_line(s, s.name in opened, s.name == focus)) for s in shown]
        down = sum(1 for s in summaries if not s.reachable)
        failing = sum(1 for s in summaries if s.failing)
        self.counts = (len(shown), len(summaries), down, failing)
        self._list_title()
        at = self.rows[self.highlighted][0] if 0 <= self.highlighted < len(self.rows) else None
        old, self.rows = self.rows, rows
        if [h for h, _ in old] != [h for h, _ in rows]:
            self._strips.clear()
            self.virtual_size = Size(self.scrollable_content_region.width, len(rows))
            self.refresh(layout=len(old) != len(rows))
            self.repainted += min(len(rows), self.scrollable_content_region.height)
            names = [h for h, _ in rows]
            # Once moved, the cursor stays on its host when the order changes (a host got
            # busier); until then on the first row, the worst or the busiest host.
            self.highlighted = names.index(at) if self.moved and at in names else 0
        else:
            self._refresh_rows([i for i, (a, b) in enumerate(zip(old, rows)) if a != b])

    def _summary(self, h: HostState) -> HostSummary:
        # (the STATUS object itself, held: a poll's answer is a new one; its id could be reused)
        key = (h.status, h.reachable, h.since, h.error)
        hit = self._read.get(h.name)
        if hit is not None and hit[0][0] is h.status and hit[0][1:] == key[1:]:
            return hit[1]
        s = view.summary(h)
        self._read[h.name] = (key, s)
        return s

    def _list_title(self) -> str:
        shown, total, down, failing = self.counts
        parts = [f"hosts {shown}/{total}" if shown != total else f"hosts {total}"]
        if down:
            parts.append(f"{down} down")
        if failing:
            parts.append(f"{failing} failing")
        if self.words or self.typing:
            parts.append(f"/{self.words}" + ("▏" if self.typing else ""))
        else:
            parts.append("/: filter ⏎: open")
        title = escape(" · ".join(parts))
        if self.border_title != title:
            self.border_title = title
        return title

    def highlighted_host(self) -> str | None:
        return self.rows[self.highlighted][0] if 0 <= self.highlighted < len(self.rows) else None

    # -- keys --------------------------------------------------------------------------------

    def action_cursor(self, step: int) -> None:
        if self.rows:
            self.moved = True
            self.highlighted = max(0, min(len(self.rows) - 1, self.highlighted + step))

    def action_open_host(self) -> None:
        if self.typing:
            self.typing = False
            self._list_title()
            return
        host = self.highlighted_host()
        if host is not None:
            self.post_message(self.Toggled(host))

    def action_type_filter(self) -> None:
        self.typing = True
        self._list_title()

    def action_clear_filter(self) -> None:
        if self.typing:
            self.typing = False
        elif self.words:
            self.words = ""
            self._reshow()
        self._list_title()

    def on_key(self, event: events.Key) -> None:
        """While typing the filter, characters and backspace edit it (the app's keys wait)."""
        if not self.typing:
            return
        if event.key == "backspace":
            self.words = self.words[:-1]
        elif event.character and event.character.isprintable() and event.key != "slash":
            self.words += event.character
        elif event.key == "slash":
            self.words += "/"
        else:
            return
        event.stop()
        event.prevent_default()
        self._reshow()

    def _reshow(self) -> None:
        if self._last is not None:
            self.show(*self._last)

    # -- drawing -----------------------------------------------------------------------------

    def watch_highlighted(self, was: int, now: int) -> None:
        self._refresh_rows([was, now])
        self.scroll_to_region(Region(0, now, 1, 1), animate=False, immediate=True)

    def _refresh_rows(self, indexes: list[int]) -> None:
        area, top = self.scrollable_content_region, self.scroll_offset.y
        regions = []
        for index in indexes:
            self._strips.pop(index, None)
            if 0 <= index - top < area.height:
                regions.append(Region(0, index - top, area.width, 1))
        if regions:
            self.repainted += len(regions)
            self.refresh(*regions)

    def on_resize(self) -> None:
        self._strips.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.rows))

    def on_focus(self) -> None:
        self._refresh_rows([self.highlighted])

    def on_blur(self) -> None:
        self._refresh_rows([self.highlighted])

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self.rows))

    def render_line(self, y: int) -> Strip:
        index = y + self.scroll_offset.y
        width = self.scrollable_content_region.width
        lit = index == self.highlighted
        names = ("hostlist--row", "hostlist--highlighted") if lit else ("hostlist--row",)
        style = self.get_visual_style(*names)
        if not 0 <= index < len(self.rows):
            if index == 0:  # nothing matches the filter
                content = Content.from_markup("[dim]no host matches[/]")
                return Visual.to_strips(self, content, width, 1, style)[0]
            return Strip.blank(width, style.rich_style)
        key = (self.rows[index][1], width, lit, self.has_focus, self.app.theme)
        hit = self._strips.get(index)
        if hit is not None and hit[0] == key:
            return hit[1]
        content = Content.from_markup(self.rows[index][1])
        strips = Visual.to_strips(self, content, width, 1, style)
        strip = (strips[0] if strips else Strip.blank(width)).extend_cell_length(
            width, style.rich_style
        )
        self._strips[index] = (key, strip)
        return strip
