"""The slots view: with several slots, one row per slot (GPUs, profile, state, tok/s,
running/queued, GPU memory) and a row per pool summing its slots. Moving onto a slot's row
picks the slot the rest of the screen follows (its details, logs and insight, and what a
profile key acts on); a pool's row shows every slot's logs, and a profile key there rolls the
pool. Hidden with one slot. A fleet's host that is down keeps its last slots here, dimmed, with
since when it is unreachable (`down`: host -> that line).

The rows are views.slot_row/pool_row; this widget only lists them and says which was picked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from sgltui import protocol
from sgltui.tui import views


class SlotsPane(OptionList):
    DEFAULT_CSS = """
    SlotsPane {
        height: auto; max-height: 12; padding: 0; display: none;
        text-wrap: nowrap; text-overflow: ellipsis; overflow-x: hidden;
        scrollbar-size-vertical: 1;
    }
    """

    class Picked(Message):
        """The operator moved onto a row: a slot's name, or None and the pool's name for a
        pool's row."""

        def __init__(self, slot: str | None, pool: str | None = None) -> None:
            super().__init__()
            self.slot, self.pool = slot, pool

    def show(
        self,
        slots: list[protocol.SlotStatus],
        pools: list[protocol.PoolStatus],
        figures: Mapping[str, views.SlotFigures],
        selected: str | None,
        down: Mapping[str, str] | None = None,
        unmanaged: Sequence[protocol.Unmanaged] = (),
    ) -> None:
        by_id = {s.id: s for s in slots}
        rows: list[tuple[str, str]] = []
        placed: set[str] = set()
        down = down or {}

        def gone(name: str) -> str | None:  # its host's "unreachable since" line
            return down.get(name.partition("/")[0]) if "/" in name else None

        def slot_row(s: protocol.SlotStatus) -> tuple[str, str]:
            return f"slot:{s.id}", views.slot_row(s, figures[s.id], s.id == selected, gone(s.id))

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
        ids = [o.id for o in self.options]
        if ids != [i for i, _ in rows]:
            self.set_options([Option(text, id=i) for i, text in rows])
        else:  # the same rows: only the prompts that read differently (no reset, no layout)
            for index, (option, (_, text)) in enumerate(zip(self.options, rows, strict=True)):
                if str(option.prompt) != text:
                    self.replace_option_prompt_at_index(index, text)
        want = f"slot:{selected}" if selected is not None else None
        names = [i for i, _ in rows]
        # The highlight follows the model until the operator moves it (the pane has focus).
        if not self.has_focus and want in names and self.highlighted != names.index(want):
            self.highlighted = names.index(want)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if not self.has_focus:  # the app moved the highlight to follow the model
            return
        kind, _, name = (event.option.id or "").partition(":")
        if kind == "found":  # not a slot: the screen stays on the one it showed
            return
        if kind == "slot":
            self.post_message(self.Picked(name))
        else:
            self.post_message(self.Picked(None, name))

    def found_pid(self) -> int | None:
        """The pid of the highlighted found server's row, if one is highlighted."""
        if self.highlighted is None or self.highlighted >= self.option_count:
            return None
        kind, _, name = (self.get_option_at_index(self.highlighted).id or "").partition(":")
        return int(name) if kind == "found" and name.isdigit() else None

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # enter on a row picks it (already done on the move); no profile start
