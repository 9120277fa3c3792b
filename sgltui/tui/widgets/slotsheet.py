"""The slots view's rows as a sheet: what a STATUS fixes, kept; what a sample changes, made.

A row of the slots view is a styled head and tail (a slot's name, GPUs, profile and state; a
pool's name, profile, ready count and gateway) around plain figures (tok/s, running/queued,
GPU memory). The head and tail change with a STATUS, a pick or a host going down; the figures
with every sample. With 8 busy slots the view drew every row's head and the pool's row afresh
each second (its members found, its slots' states counted, its text escaped) to change only
their figures: a `SlotSheet` is made when its inputs change and fills in the figures of a
sample, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sgltui import protocol
from sgltui.tui import views


class SlotSheet:
    """Every row of the slots view for one set of inputs (see `fits`): each pool's slots, then
    the pool's own row, then the slots in no pool, then the servers found and not managed."""

    def __init__(
        self,
        slots: Sequence[protocol.SlotStatus],
        pools: Sequence[protocol.PoolStatus],
        selected: str | None,
        down: Mapping[str, str] | None = None,
        unmanaged: Sequence[protocol.Unmanaged] = (),
    ) -> None:
        # The inputs, copied: `fits` compares them with the next draw's (the model replaces
        # its lists and Structs, never changes one in place; copies keep that true here).
        self.slots, self.pools, self.selected = tuple(slots), tuple(pools), selected
        self.down, self.unmanaged = dict(down or {}), tuple(unmanaged)
        self.ids: list[str] = []  # row ids: "slot:NAME", "pool:NAME", "found:PID"
        # Each row as it reads with no figures: final for a slot whose host is down and for
        # a server found and not managed; the others' figures are filled in by `rows`.
        self.blank: list[views.LineParts] = []
        self._slot_rows: list[tuple[int, str, str]] = []  # (row, head, slot id)
        # (row, head, gap, tail, its slots' ids)
        self._pool_rows: list[tuple[int, str, str, str, tuple[str, ...]]] = []
        self._build()
        # The row the model's pick is on, if shown (the highlight follows it).
        want = f"slot:{selected}" if selected is not None else None
        self.picked: int | None = self.ids.index(want) if want in self.ids else None

    def fits(
        self,
        slots: Sequence[protocol.SlotStatus],
        pools: Sequence[protocol.PoolStatus],
        selected: str | None,
        down: Mapping[str, str] | None,
        unmanaged: Sequence[protocol.Unmanaged],
    ) -> bool:
        """These inputs draw the same heads and tails. Compared by value (a STATUS polled
        again makes equal Structs anew), which costs no Python call: Structs, lists and
        dicts compare in C."""
        return (
            selected == self.selected
            and self.slots == tuple(slots)
            and self.pools == tuple(pools)
            and self.down == dict(down or {})
            and self.unmanaged == tuple(unmanaged)
        )

    def rows(self, figures: Mapping[str, views.SlotLine]) -> list[views.LineParts]:
        """Each row's (head, figures, tail) for a sample's figures (slot id -> its
        `views.slot_lines`' line: its row's text, made with the numbers)."""
        rows = list(self.blank)
        for index, head, sid in self._slot_rows:
            rows[index] = (head, figures[sid][0], "")
        for index, head, gap, tail, members in self._pool_rows:
            plain = views.pool_figures_text([figures[s] for s in members]) + gap
            rows[index] = (head, plain, tail)
        return rows

    def _build(self) -> None:
        by_id = {s.id: s for s in self.slots}
        placed: set[str] = set()
        down = self.down

        def gone(name: str) -> str | None:  # its host's "unreachable since" line
            return down.get(name.partition("/")[0]) if "/" in name else None

        def slot_row(s: protocol.SlotStatus) -> None:
            away = gone(s.id)
            head = views.slot_head(s, s.id == self.selected, away)
            if away is None:
                self._slot_rows.append((len(self.ids), head, s.id))
            self.ids.append(f"slot:{s.id}")
            self.blank.append((head, "", ""))

        for pool in self.pools:
            members = [by_id[sid] for sid in pool.slots if sid in by_id]
            for s in members:
                # A slot in two pools (its host's `all` and a fleet.toml pool across hosts) is
                # listed once, above the first; the second pool's row still counts it.
                if s.id not in placed:
                    slot_row(s)
                    placed.add(s.id)
            if members:
                away = {s.id for s in members if gone(s.id)}
                head, tail = views.pool_head_tail(pool, members, gone(pool.name), away)
                gap = views.POOL_GAP if tail else ""  # (the figures end with it: see views)
                sids = tuple(s.id for s in members)
                self._pool_rows.append((len(self.ids), head, gap, tail, sids))
                self.ids.append(f"pool:{pool.name}")
                self.blank.append((head, gap, tail))
        for s in self.slots:
            if s.id not in placed:
                slot_row(s)
        for u in self.unmanaged:  # servers the user started, dimmed: `A` attaches the highlighted
            self.ids.append(f"found:{u.pid}")
            self.blank.append((views.unmanaged_row(u, False), "", ""))
