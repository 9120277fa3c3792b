"""The slots view: with several slots, one row per slot (GPUs, profile, state, tok/s,
running/queued, GPU memory) and a row per pool summing its slots. Moving onto a slot's row
picks the slot the rest of the screen follows (its details, logs and insight, and what a
profile key acts on); a pool's row shows every slot's logs, and a profile key there rolls the
pool. Hidden with one slot. A fleet's host that is down keeps its last slots here, dimmed, with
since when it is unreachable (`down`: host -> that line).

The rows are views.slot_row/pool_row; this widget only lists them and says which was picked.
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
        self._rows: list[tuple[str, str]] = []  # (row id, markup), in order
        # row index -> (the key it was drawn for, its Strip)
        self._strips: dict[int, tuple[tuple[object, ...], Strip]] = {}
        # (part markup, look) -> its Strip
        self._heads: dict[tuple[object, ...], Strip] = {}
        # slot -> (its SlotStatus, picked, down, its row's head): see rows
        self._slot_heads: dict[str, tuple[object, bool, str | None, str]] = {}
        # What every line of a frame shares (render_lines): the width, the two looks, focus.
        self._frame: tuple[int, Any, Any, bool] | None = None

    @property
    def options(self) -> list[Option]:
        """The rows as Options (id "slot:NAME" or "pool:NAME", prompt the row's markup), made
        when asked: a busy sample changes every row, and nothing on screen reads them."""
        return [Option(text, id=i) for i, text in self._rows]

    def show(
        self,
        slots: list[protocol.SlotStatus],
        pools: list[protocol.PoolStatus],
        figures: Mapping[str, views.SlotFigures],
        selected: str | None,
        down: Mapping[str, str] | None = None,
        unmanaged: Sequence[protocol.Unmanaged] = (),
    ) -> None:
        rows = self.rows(slots, pools, figures, selected, down, unmanaged, self._slot_heads)
        old = self._rows
        self._rows = rows
        if [i for i, _ in old] != [i for i, _ in rows]:
            self._strips.clear()
            self.virtual_size = Size(self.scrollable_content_region.width, len(rows))
            self.refresh(layout=len(old) != len(rows))
        else:  # the same rows: repaint only those that read differently (no layout)
            changed = []
            for index, ((_, was), (_, now)) in enumerate(zip(old, rows, strict=True)):
                if was != now:
                    changed.append(index)
            self._refresh_rows(changed)
        want = f"slot:{selected}" if selected is not None else None
        names = [i for i, _ in rows]
        if self.highlighted is not None and self.highlighted >= len(rows):
            self.highlighted = len(rows) - 1 if rows else None
        # The highlight follows the model until the operator moves it (the pane has focus).
        if not self.operator_has_it and want in names and self.highlighted != names.index(want):
            self.highlighted = names.index(want)

    @staticmethod
    def rows(
        slots: list[protocol.SlotStatus],
        pools: list[protocol.PoolStatus],
        figures: Mapping[str, views.SlotFigures],
        selected: str | None,
        down: Mapping[str, str] | None = None,
        unmanaged: Sequence[protocol.Unmanaged] = (),
        heads: dict[str, tuple[object, bool, str | None, str]] | None = None,
    ) -> list[tuple[str, str]]:
        """(row id, markup) of every row: each pool's slots, then the pool's own row, then the
        slots in no pool, then the servers found and not managed (dimmed). `heads` keeps
        each slot's head from one call to the next: it changes with a STATUS (a new
        SlotStatus), a pick or a host going down, not with a sample's figures."""
        by_id = {s.id: s for s in slots}
        rows: list[tuple[str, str]] = []
        placed: set[str] = set()
        down = down or {}

        def gone(name: str) -> str | None:  # its host's "unreachable since" line
            return down.get(name.partition("/")[0]) if "/" in name else None

        def slot_row(s: protocol.SlotStatus) -> tuple[str, str]:
            picked, away = s.id == selected, gone(s.id)
            kept = heads.get(s.id) if heads is not None else None
            if kept is not None and kept[0] is s and kept[1:3] == (picked, away):
                head = kept[3]
            else:
                head = views.slot_head(s, picked, away)
                if heads is not None:
                    heads[s.id] = (s, picked, away, head)
            plain = "" if away is not None else views.slot_figures_text(figures[s.id])
            return f"slot:{s.id}", views.joined((head, plain, ""))

        for pool in pools:
            members = [by_id[sid] for sid in pool.slots if sid in by_id]
            for s in members:
                # A slot in two pools (its host's `all` and a fleet.toml pool across hosts) is
                # listed once, above the first; the second pool's row still counts it.
                if s.id not in placed:
                    rows.append(slot_row(s))
                    placed.add(s.id)
            if members:
                figs = [figures[s.id] for s in members]
                away = {s.id for s in members if gone(s.id)}
                row = views.pool_row(pool, members, figs, gone(pool.name), away)
                rows.append((f"pool:{pool.name}", row))
        for s in slots:
            if s.id not in placed:
                rows.append(slot_row(s))
        for u in unmanaged:  # servers the user started, dimmed: `A` attaches the highlighted
            rows.append((f"found:{u.pid}", views.unmanaged_row(u, False)))
        if heads is not None and len(heads) > len(by_id):
            for sid in set(heads) - set(by_id):  # slots gone
                del heads[sid]
        return rows

    # -- the cursor --------------------------------------------------------------------------

    @property
    def operator_has_it(self) -> bool:
        """Focused as of now. `has_focus` turns true when the Focus event is handled, after
        the keys already queued: `o` and two downs typed at once moved the cursor, but the
        screen did not follow it."""
        return self.app.focused is self

    def validate_highlighted(self, value: int | None) -> int | None:
        if value is None or not self._rows:
            return None
        return max(0, min(value, len(self._rows) - 1))

    def watch_highlighted(self, was: int | None, now: int | None) -> None:
        for index in (was, now):
            if index is not None:
                self._refresh_row(index)
        if now is None:
            return
        self.scroll_to_region(Region(0, now, 1, 1), animate=False, immediate=True)
        if self.operator_has_it:  # the operator moved it (the app's own moves follow the model)
            kind, _, name = self._rows[now][0].partition(":")
            if kind == "found":  # not a slot: the screen stays on the one it showed
                return
            self.post_message(self.Picked(name) if kind == "slot" else self.Picked(None, name))

    def found_pid(self) -> int | None:
        """The pid of the highlighted found server's row, if one is highlighted."""
        if self.highlighted is None or self.highlighted >= len(self._rows):
            return None
        kind, _, name = self._rows[self.highlighted][0].partition(":")
        return int(name) if kind == "found" and name.isdigit() else None

    def action_cursor(self, step: int) -> None:
        if self._rows:
            at = self.highlighted
            self.highlighted = (0 if step > 0 else len(self._rows) - 1) if at is None else at + step

    def action_first(self) -> None:
        self.highlighted = 0

    def action_last(self) -> None:
        self.highlighted = len(self._rows) - 1

    def action_nothing(self) -> None:
        pass

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            index = offset.y + self.scroll_offset.y
            if 0 <= index < len(self._rows):
                self.highlighted = index

    # -- drawing -----------------------------------------------------------------------------

    def _refresh_row(self, index: int) -> None:
        self._refresh_rows([index])

    def _refresh_rows(self, indexes: list[int]) -> None:
        """Repaint these rows, in one refresh (a sample changes most rows of a busy pool)."""
        if not indexes:
            return
        area, top = self.scrollable_content_region, self.scroll_offset.y
        shown = []
        for index in indexes:
            self._strips.pop(index, None)
            if 0 <= index - top < area.height:
                shown.append(index - top)
        # A region per run of rows (strips.row_spans): a busy sample's 9 rows are one.
        regions = [Region(0, y, area.width, n) for y, n in strips.row_spans(sorted(shown))]
        if regions:
            self.refresh(*regions)

    def on_resize(self) -> None:
        self._strips.clear()
        self._heads.clear()
        self.virtual_size = Size(self.scrollable_content_region.width, len(self._rows))

    def on_focus(self) -> None:
        if self.highlighted is not None:
            self._refresh_row(self.highlighted)

    def on_blur(self) -> None:
        if self.highlighted is not None:
            self._refresh_row(self.highlighted)

    @property
    def row_count(self) -> int:
        """Its rows as of the last show (its height, border aside, once laid out)."""
        return len(self._rows)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._rows)

    def render_lines(self, crop: Region) -> list[Strip]:
        # Per frame, not per line: the width, the rows' two looks and the focus (each a walk
        # over styles or reactives: most of a cached row's cost, 9 rows a frame).
        self._frame = (
            self.scrollable_content_region.width,
            self.get_visual_style("slots--row"),
            self.get_visual_style("slots--row", "slots--highlighted"),
            self.has_focus,
        )
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        index = y + self.scroll_offset.y
        frame = self._frame
        if frame is None:  # (called outside a frame)
            width, plain, lit_style, focused = (
                self.scrollable_content_region.width,
                self.get_visual_style("slots--row"),
                self.get_visual_style("slots--row", "slots--highlighted"),
                self.has_focus,
            )
        else:
            width, plain, lit_style, focused = frame
        lit = index == self.highlighted
        style = lit_style if lit else plain
        if not 0 <= index < len(self._rows):
            return Strip.blank(width, style.rich_style)
        key = (self._rows[index][1], width, lit, focused, self.app.theme)
        hit = self._strips.get(index)
        if hit is not None and hit[0] == key:
            return hit[1]
        strip = self._row_strip(self._rows[index][1], width, key[2:], style)
        self._strips[index] = (key, strip)
        return strip

    def _row_strip(self, markup: str, width: int, look: tuple[object, ...], style) -> Strip:
        """A row's line. A row's figures are plain text between its styled parts (slot,
        profile, state before them; a pool's gateway after): the styled parts are drawn once
        and kept, and the figures, which change with every sample, are one plain segment
        (parsing and rendering the whole row's markup each second was most of this pane's
        cost)."""
        head, plain, tail = strips.split_plain(markup)
        drawn = self._part(head, look, style)
        # One Strip of the parts' segments and the padding (a Strip each for the figures,
        # the join and the padding cost more than the row's own work, 9 rows a second).
        segments = list(drawn) if drawn.cell_count else []
        x = drawn.cell_length
        if plain:
            segments.append(Segment(plain, style.rich_style + strips.at(x)))
            x += cell_len(plain)
        if tail:
            placed = self._placed(tail, x, look, style)
            if placed.cell_count:
                segments.extend(placed)
            x += placed.cell_length
        if x > width:  # too wide: cut with an ellipsis
            content = Content.from_markup(markup)
            cut = Visual.to_strips(self, content, width, 1, style)
            strip = cut[0] if cut else Strip.blank(width, style.rich_style)
            return strip.extend_cell_length(width, style.rich_style)
        if x < width:
            segments.append(Segment(" " * (width - x), style.rich_style))
        return Strip(segments, max(x, width))

    def _placed(self, markup: str, x: int, look: tuple[object, ...], style) -> Strip:
        """A styled tail (a pool's gateway) placed at cell `x`, kept: moving its segments'
        offsets makes a style per segment, and a pool's tail changes with its gateway's state,
        not with the figures before it (which move it only when their width changes)."""
        key = ("@", x, markup, *look)
        found = self._heads.get(key)
        if found is None:
            found = self._keep(key, strips.shifted(self._part(markup, look, style), x))
        return found

    def _part(self, markup: str, look: tuple[object, ...], style) -> Strip:
        """A styled part of a row rendered at its own length, kept (a row's head changes only
        with its slot's state)."""
        key = (markup, *look)
        found = self._heads.get(key)
        if found is None:
            content = Content.from_markup(markup)
            rendered = Visual.to_strips(self, content, content.cell_length, 1, style)
            found = self._keep(key, rendered[0] if rendered else Strip([]))
        return found

    def _keep(self, key: tuple[object, ...], strip: Strip) -> Strip:
        if len(self._heads) > 4 * max(8, len(self._rows)):
            self._heads.clear()  # bounded: old parts of rows that changed
        self._heads[key] = strip
        return strip
