"""The slots view: with several slots, one row per slot (GPUs, profile, state, tok/s,
running/queued, GPU memory) and a row per pool summing its slots. Moving onto a slot's row
picks the slot the rest of the screen follows (its details, logs and insight, and what a
profile key acts on); a pool's row shows every slot's logs, and a profile key there rolls the
pool. Hidden with one slot. A fleet's host that is down keeps its last slots here, dimmed, with
since when it is unreachable (`down`: host -> that line).

The rows are views.slot_row/pool_row, in parts (slotsheet.SlotSheet keeps their heads and
tails from one sample to the next); this widget only lists them and says which was picked.
It draws its own lines (the Line API), one cached Strip per row: a sample changes the figures
of a few rows, and only those rows are rebuilt and repainted. (An OptionList rebuilt and
repainted every row on any change of one: with 8 slots, the largest part of an idle TUI's CPU.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from textual.binding import Binding
from textual.content import Content
from textual.events import Click
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.visual import Visual
from textual.widgets.option_list import Option

from sgltui import protocol
from sgltui.tui import views
from sgltui.tui.widgets import strips
from sgltui.tui.widgets.slotsheet import SlotSheet

# What takes one cell a character (printable ASCII): a row's figures, counted by their length.
_ONE_CELL = frozenset(chr(c) for c in range(0x20, 0x7F))


class SlotsPane(ScrollView, can_focus=True):
    # The look of an OptionList's highlighted option (what this pane was), focused or not.
    DEFAULT_CSS = """
    SlotsPane {
        height: auto; max-height: 12; padding: 0; display: none;
        color: $foreground; text-wrap: nowrap; text-overflow: ellipsis;
        overflow-x: hidden; overflow-y: auto;
        scrollbar-size-vertical: 1;
        & > .slots--highlighted {
            color: $foreground;
            background: $block-cursor-blurred-background;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .slots--highlighted {
            color: $block-cursor-foreground;
            background: $block-cursor-background;
            text-style: $block-cursor-text-style;
        }
    }
    """
    COMPONENT_CLASSES = {"slots--row", "slots--highlighted"}
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-10)", "Page up", show=False),
        Binding("pagedown", "cursor(10)", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        # Enter on a row picks it, which the move has done: it must not start a profile.
        Binding("enter", "nothing", "Select", show=False),
    ]

    # The row under the cursor (index into `options`), None with no rows.
    highlighted: reactive[int | None] = reactive(None, always_update=False)

    class Picked(Message):
        """The operator moved onto a row: a slot's name, or None and the pool's name for a
        pool's row."""

        def __init__(self, slot: str | None, pool: str | None = None) -> None:
            super().__init__()
            self.slot, self.pool = slot, pool

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._ids: list[str] = []  # the rows' ids, in order
        self._parts: list[views.LineParts] = []  # the rows' (head, figures, tail)
        self._sheet: SlotSheet | None = None  # what the last STATUS, pick and hosts fixed
        # The slots and GPUs (views.slot_mem_key) each slot's memory was last made of, and
        # those (views.slot_mem, in the slots' order): see panes' _draw_slots.
        self.mems_read: (
            tuple[list[protocol.SlotStatus], list[tuple[object, ...]], list[views.SlotMem]] | None
        ) = None
        # row index -> (the key it was drawn for, its Strip)
        self._strips: dict[int, tuple[tuple[object, ...], Strip]] = {}
        # (part markup, look) and ("@", x, tail markup, look) -> (its segments, its cells)
        self._heads: dict[tuple[object, ...], tuple[tuple[Segment, ...], int]] = {}
        # (head markup, look) -> (its segments, its cells, the figures' style at the next cell)
        self._starts: dict[tuple[object, ...], tuple[tuple[Segment, ...], int, Any]] = {}
        # (cells, look) -> the padding
        self._fills: dict[tuple[object, ...], Any] = {}
        # What every line of a frame shares (render_lines): the top row shown, the width and
        # height of the rows' area, the two looks, focus.
        self._frame: tuple[int, int, int, Any, Any, bool] | None = None
        # `highlighted` as its watcher was last told (the reactive's value, read without it).
        self._lit: int | None = None
        # Where the last frame drew the rows: (top row, width, rows shown). See _refresh_rows.
        self._shown: tuple[int, int, int] | None = None

    @property
    def options(self) -> list[Option]:
        """The rows as Options (id "slot:NAME" or "pool:NAME", prompt the row's markup), made
        when asked: a busy sample changes every row, and nothing on screen reads them."""
        return [Option(views.joined(p), id=i) for i, p in zip(self._ids, self._parts, strict=True)]

    def show(
        self,
        slots: list[protocol.SlotStatus],
        pools: list[protocol.PoolStatus],
        figures: Mapping[str, views.SlotLine],
        selected: str | None,
        down: Mapping[str, str] | None = None,
        unmanaged: Sequence[protocol.Unmanaged] = (),
    ) -> bool:
        """Show these rows; True when there are more or fewer than before (the view's height
        changes with them)."""
        sheet = self._sheet
        if sheet is None or not sheet.fits(slots, pools, selected, down, unmanaged):
            sheet = self._sheet = SlotSheet(slots, pools, selected, down, unmanaged)
        rows = sheet.rows(figures)
        old, self._parts = self._parts, rows
        if self._ids != sheet.ids:
            self._ids = sheet.ids
            self._strips.clear()
            self.virtual_size = Size(self.scrollable_content_region.width, len(rows))
            self.refresh(layout=len(old) != len(rows))
        else:  # the same rows: repaint only those that read differently (no layout)
            self._refresh_rows([i for i in range(len(rows)) if rows[i] != old[i]])
        # The highlight follows the model until the operator moves it (the pane has focus).
        # (Where it is read from its watcher's note, not the reactive: a read is six calls, and
        # where the highlight already is, that is all this costs.)
        at, want = self._lit, sheet.picked
        if at is not None and at >= len(rows):
            self.highlighted = len(rows) - 1 if rows else None
            at = self.highlighted
        if want is not None and at != want and not self.operator_has_it:
            self.highlighted = want
        return len(old) != len(rows)

    @staticmethod
    def rows(
        slots: list[protocol.SlotStatus],
        pools: list[protocol.PoolStatus],
        figures: Mapping[str, views.SlotLine],
        selected: str | None,
        down: Mapping[str, str] | None = None,
        unmanaged: Sequence[protocol.Unmanaged] = (),
    ) -> list[tuple[str, str]]:
        """(row id, markup) of every row: each pool's slots, then the pool's own row, then the
        slots in no pool, then the servers found and not managed (dimmed)."""
        sheet = SlotSheet(slots, pools, selected, down, unmanaged)
        return [(i, views.joined(p)) for i, p in zip(sheet.ids, sheet.rows(figures), strict=True)]

    # -- the cursor --------------------------------------------------------------------------

    @property
    def operator_has_it(self) -> bool:
        """Focused as of now. `has_focus` turns true when the Focus event is handled, after
        the keys already queued: `o` and two downs typed at once moved the cursor, but the
        screen did not follow it."""
        return self.app.focused is self

    def validate_highlighted(self, value: int | None) -> int | None:
        if value is None or not self._ids:
            return None
        return max(0, min(value, len(self._ids) - 1))

    def watch_highlighted(self, was: int | None, now: int | None) -> None:
        self._lit = now
        for index in (was, now):
            if index is not None:
                self._refresh_row(index)
        if now is None:
            return
        self.scroll_to_region(Region(0, now, 1, 1), animate=False, immediate=True)
        if self.operator_has_it:  # the operator moved it (the app's own moves follow the model)
            kind, _, name = self._ids[now].partition(":")
            if kind == "found":  # not a slot: the screen stays on the one it showed
                return
            self.post_message(self.Picked(name) if kind == "slot" else self.Picked(None, name))

    def found_pid(self) -> int | None:
        """The pid of the highlighted found server's row, if one is highlighted."""
        if self.highlighted is None or self.highlighted >= len(self._ids):
            return None
        kind, _, name = self._ids[self.highlighted].partition(":")
        return int(name) if kind == "found" and name.isdigit() else None

    def action_cursor(self, step: int) -> None:
        if self._ids:
            at = self.highlighted
            self.highlighted = (0 if step > 0 else len(self._ids) - 1) if at is None else at + step

    def action_first(self) -> None:
        self.highlighted = 0

    def action_last(self) -> None:
        self.highlighted = len(self._ids) - 1

    def action_nothing(self) -> None:
        pass

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            index = offset.y + self.scroll_offset.y
            if 0 <= index < len(self._ids):
                self.highlighted = index

    # -- drawing -----------------------------------------------------------------------------

    def _refresh_row(self, index: int) -> None:
        """Repaint a row whose look changed (the highlight, the focus), drawn afresh."""
        self._strips.pop(index, None)
        self._refresh_rows([index])

    def _refresh_rows(self, indexes: list[int]) -> None:
        """Repaint these rows (ascending), in one refresh (a sample changes most rows of a
        busy pool). Their kept Strips stay: a row whose parts changed has another key, and
        is drawn afresh by render_line.

        The rows are placed where the last frame drew them: asking Textual for the pane's
        region and scroll offset cost ~50 calls a sample. Any change of those (a resize, a
        scroll, a scrollbar shown) repaints the whole pane in Textual's own refresh, and the
        frame that draws it is the next one read here; before a first frame there is nothing
        on screen to repaint (the first draws every row)."""
        if not indexes or self._shown is None:
            return
        top, width, height = self._shown
        rows = [index - top for index in indexes if 0 <= index - top < height]
        # A region per run of rows (strips.row_spans): a busy sample's 9 rows are one.
        regions = [Region(0, y, width, n) for y, n in strips.row_spans(rows)]
        if regions:
            self.refresh(*regions)

    def on_resize(self) -> None:
        self._strips.clear()
        self._heads.clear()
        self._starts.clear()
        self._fills.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, len(self._ids))

    def on_focus(self) -> None:
        if self.highlighted is not None:
            self._refresh_row(self.highlighted)

    def on_blur(self) -> None:
        if self.highlighted is not None:
            self._refresh_row(self.highlighted)

    @property
    def row_count(self) -> int:
        """Its rows as of the last show (its height, border aside, once laid out)."""
        return len(self._ids)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._ids)

    def render_lines(self, crop: Region) -> list[Strip]:
        # Per frame, not per line: the top row, the area, the rows' two looks and the focus
        # (each a walk over styles or reactives: most of a cached row's cost, 9 rows a frame).
        self._frame = frame = self._look()
        self._shown = frame[:3]
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def _look(self) -> tuple[int, int, int, Any, Any, bool]:
        """A frame's: the top row shown, the rows' area (width, height), their two looks, focus."""
        area = self.scrollable_content_region
        return (
            self.scroll_offset.y,
            area.width,
            area.height,
            self.get_visual_style("slots--row"),
            self.get_visual_style("slots--row", "slots--highlighted"),
            self.has_focus,
        )

    def render_line(self, y: int) -> Strip:
        # (outside a frame: asked afresh)
        top, width, _, plain, lit_style, focused = self._frame or self._look()
        index = y + top
        lit = index == self.highlighted
        style = lit_style if lit else plain
        if not 0 <= index < len(self._ids):
            return Strip.blank(width, style.rich_style)
        parts = self._parts[index]
        key = (parts, width, lit, focused, self.app.theme)
        hit = self._strips.get(index)
        if hit is not None and hit[0] == key:
            return hit[1]
        strip = self._row_strip(parts, width, key[2:], style)
        self._strips[index] = (key, strip)
        return strip

    def _row_strip(
        self, parts: views.LineParts, width: int, look: tuple[object, ...], style
    ) -> Strip:
        """A row's line. A row's figures are plain text between its styled parts (slot,
        profile, state before them; a pool's gateway after): the styled parts are drawn once
        and kept, and the figures, which change with every sample, are one plain segment
        (parsing and rendering the whole row's markup each second was most of this pane's
        cost). What a changed row costs is two look-ups: its head's segments kept with the
        figures' style at the cell after it, and the padding, per look."""
        head, plain, tail = parts
        drawn, x, at = self._starts.get((head, *look)) or self._kept_head(head, look, style)
        figures: tuple[Segment, ...] = ()
        if plain:
            figures = (Segment(plain, at),)
            # Figures are digits: as many cells as characters (what cell_len says of any
            # printable ASCII), counted without its calls; anything else is counted.
            x += len(plain) if _ONE_CELL.issuperset(plain) else cell_len(plain)
        placed: tuple[Segment, ...] = ()
        if tail:
            placed, cells = self._placed(tail, x, look, style)
            x += cells
        if x > width:  # too wide: cut with an ellipsis
            content = Content.from_markup(views.joined(parts))
            cut = Visual.to_strips(self, content, width, 1, style)
            strip = cut[0] if cut else Strip.blank(width, style.rich_style)
            return strip.extend_cell_length(width, style.rich_style)
        padding: tuple[Segment, ...] = ()
        if x < width:
            pad = self._fills.get((width - x, *look))
            if pad is None:
                pad = self._fill((width - x, *look), Segment(" " * (width - x), style.rich_style))
            padding = (pad,)
        # One Strip of the parts' segments and the padding (a Strip each for the figures,
        # the join and the padding cost more than the row's own work, 9 rows a second).
        return Strip([*drawn, *figures, *placed, *padding], width)

    def _kept_head(
        self, head: str, look: tuple[object, ...], style
    ) -> tuple[tuple[Segment, ...], int, Any]:
        """A row's head, kept with the style of the figures after it (the row's style and the
        cell offset Content gives a segment there: two Style calls and a hash)."""
        if len(self._starts) > 4 * max(8, len(self._ids)):
            self._starts.clear()  # bounded: the heads of rows that changed
        drawn, x = self._part(head, look, style)
        key = (head, *look)
        found = self._starts[key] = (drawn, x, style.rich_style + strips.at(x))
        return found

    def _placed(
        self, markup: str, x: int, look: tuple[object, ...], style
    ) -> tuple[tuple[Segment, ...], int]:
        """A styled tail (a pool's gateway) placed at cell `x`, kept: moving its segments'
        offsets makes a style per segment, and a pool's tail changes with its gateway's state,
        not with the figures before it (which move it only when their width changes)."""
        key = ("@", x, markup, *look)
        found = self._heads.get(key)
        if found is None:
            drawn, cells = self._part(markup, look, style)
            found = self._keep(key, strips.shifted(Strip(drawn, cells), x))
        return found

    def _part(
        self, markup: str, look: tuple[object, ...], style
    ) -> tuple[tuple[Segment, ...], int]:
        """A styled part of a row rendered at its own length, kept as its segments and cell
        length (a row's head changes only with its slot's state)."""
        key = (markup, *look)
        found = self._heads.get(key)
        if found is None:
            content = Content.from_markup(markup)
            rendered = Visual.to_strips(self, content, content.cell_length, 1, style)
            found = self._keep(key, rendered[0] if rendered else Strip([]))
        return found

    def _keep(self, key: tuple[object, ...], strip: Strip) -> tuple[tuple[Segment, ...], int]:
        if len(self._heads) > 4 * max(8, len(self._ids)):
            self._heads.clear()  # bounded: old parts of rows that changed
        # (A part of no cells adds no segment: Content's empty one, if any, is left out.)
        found = self._heads[key] = (tuple(strip) if strip.cell_count else (), strip.cell_length)
        return found

    def _fill(self, key: tuple[object, ...], value: Any) -> Any:
        if len(self._fills) > 8 * max(8, len(self._ids)):
            self._fills.clear()  # bounded: the paddings
        self._fills[key] = value
        return value
