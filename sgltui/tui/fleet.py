"""The fleet's view (`sgltui fleet tui`, or a bare `sgltui` when fleet.toml exists): a Hosts
table (host, reachable or "unreachable since 14:02, retrying", GPUs, slots, tok/s) beside the
slots of every host, listed as host/slot.

Each host's link (sgltui/fleet/link.py) is its own asyncio task whose only waits are on ssh's
pipes and timers, so a slow or dead host never holds up the loop or another host. Links report
changes into the model; the tables are redrawn at most once a second and only when a row
changed (the idle cost grows with the hosts' changes, not with their number). `x` stops and
`R` restarts the host/slot under the cursor, through that host's own connection.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Header, Static

from sgltui.agent.client import AgentError
from sgltui.fleet.config import Fleet
from sgltui.fleet.link import HostLink
from sgltui.fleet.view import HostState, host_row

REDRAW_S = 1.0


def host_cells(h: HostState) -> tuple[str, ...]:
    r = host_row(h)
    if not r.reachable:
        return (r.name, r.state, "-", "-", "-")
    tok = f"{r.tok_s:,.0f}" if r.tok_s is not None else "-"
    return (r.name, "reachable", str(r.gpus), f"{r.running}/{r.slots}", tok)


def slot_rows(h: HostState) -> list[tuple[str, ...]]:
    r = host_row(h)
    if not r.reachable:
        return [(f"{h.name}/*", "-", "unreachable")]
    return [(s["id"], s["profile"] or "-", s["state"]) for s in r.slot_rows]


class FleetApp(App[None]):
    TITLE = "sgltui fleet"
    CSS = """
    #hosts-pane { width: 3fr; }
    #slots-pane { width: 2fr; }
    .pane-title { text-style: bold; padding: 0 1; }
    #note { height: 1; padding: 0 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding("R", "slot_op('restart')", "Restart slot"),
        Binding("x", "slot_op('stop')", "Stop slot"),
        Binding("r", "retry", "Retry now"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, fleet: Fleet, interval_s: float = 2.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.fleet = fleet
        self.links = [
            HostLink(fleet, h, interval_s=interval_s, on_change=self._changed, client_name="tui")
            for h in fleet.hosts
        ]
        self._tasks: list[asyncio.Task] = []
        self._dirty = True
        self._shown: tuple = ()

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            with Vertical(id="hosts-pane"):
                yield Static("Hosts", classes="pane-title")
                yield DataTable(id="hosts", cursor_type="row", zebra_stripes=True)
            with Vertical(id="slots-pane"):
                yield Static("Slots", classes="pane-title")
                yield DataTable(id="slots", cursor_type="row", zebra_stripes=True)
        yield Static("", id="note")
        yield Footer()

    def on_mount(self) -> None:
        hosts = self.query_one("#hosts", DataTable)
        hosts.add_columns("host", "state", "GPUs", "slots", "tok/s")
        slots = self.query_one("#slots", DataTable)
        slots.add_columns("slot", "profile", "state")
        self._tasks = [asyncio.get_running_loop().create_task(lk.run()) for lk in self.links]
        self._redraw()
        self.set_interval(REDRAW_S, self._redraw)

    async def on_unmount(self) -> None:
        for t in self._tasks:
            t.cancel()
        # Each link stops its ssh (process group) and reaps it as it is cancelled.
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _changed(self, _state: HostState) -> None:
        self._dirty = True

    def rows(self) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
        states = [lk.state for lk in self.links]
        return [host_cells(h) for h in states], [r for h in states for r in slot_rows(h)]

    def _redraw(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        hosts, slots = self.rows()
        errors = [lk.state.error for lk in self.links if not lk.state.reachable and lk.state.error]
        shown = (hosts, slots, errors)
        if shown == self._shown:
            return
        self._shown = shown
        for table_id, rows in (("#hosts", hosts), ("#slots", slots)):
            table = self.query_one(table_id, DataTable)
            cursor = table.cursor_row
            table.clear()
            for row in rows:
                table.add_row(*row, key=row[0])
            if rows:
                table.move_cursor(row=min(cursor, len(rows) - 1))
        note = errors[0] if errors else f"{len(self.links)} hosts · {time.strftime('%H:%M:%S')}"
        self.query_one("#note", Static).update(note)

    def selected_slot(self) -> str | None:
        """The host/slot under the slots table's cursor."""
        table = self.query_one("#slots", DataTable)
        if table.row_count == 0:
            return None
        row = table.get_row_at(table.cursor_row)
        return str(row[0]) if row and "/" in str(row[0]) else None

    def action_slot_op(self, op: str) -> None:
        """stop or restart the selected host/slot: sent to that host's agent (accepted at once;
        the host's next poll shows the slot's way)."""
        target = self.selected_slot()
        if target is None:
            return
        host, _, slot = target.partition("/")
        link = next((lk for lk in self.links if lk.host.name == host), None)
        if link is None or link.client is None or not link.state.reachable or slot == "*":
            self.note(f"{target}: {host} is unreachable; nothing sent")
            return
        self.run_worker(self._send(link, op, slot, target), group="slot-op")

    async def _send(self, link: HostLink, op: str, slot: str, target: str) -> None:
        client = link.client
        if client is None:
            self.note(f"{target}: {link.host.name} went away; nothing sent")
            return
        try:
            await client.call(op, slot=slot, wait=False)
        except AgentError as exc:
            self.note(f"{target}: {op} refused: {exc}")
            return
        self.note(f"{target}: {op} accepted")
        link.poke()  # poll now: the change shows without waiting for the interval

    def note(self, text: str) -> None:
        self.query_one("#note", Static).update(text)

    def action_retry(self) -> None:
        for lk in self.links:
            if not lk.state.reachable:
                lk.poke()
