"""The panes of the main screen, registered in one table.

Each row says where the pane sits (compose), which of the model's areas redraw it and how
(the app's one draw per tick), its focus key (bindings.py builds the key from it: the help
screen and the command palette list the keys in this table's order) and what that key focuses.
Adding a pane is one row here and its widget; the model names the data areas it reads.

The app is reached through PaneHost, the few things drawing and focusing need of it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from textual.markup import escape
from textual.screen import Screen
from textual.widget import Widget

from sgltui.tui import model as M
from sgltui.tui import views
from sgltui.tui.fleetsource import FleetSource, host_of
from sgltui.tui.logbuffer import LogBuffer
from sgltui.tui.logfeed import LogFeed
from sgltui.tui.notifies import Notifies
from sgltui.tui.widgets.activity import ActivityPane
from sgltui.tui.widgets.bench import BenchPane
from sgltui.tui.widgets.hostlist import HostListPane
from sgltui.tui.widgets.hosts import HostsPane
from sgltui.tui.widgets.insight import InsightPane
from sgltui.tui.widgets.jobs import JobsPane
from sgltui.tui.widgets.logs import LogPane
from sgltui.tui.widgets.memory import MemoryPane
from sgltui.tui.widgets.profiles import ProfilesPane
from sgltui.tui.widgets.slots import SlotsPane
from sgltui.tui.widgets.throughput import ThroughputPane


class PaneHost(Notifies, Protocol):
    """What drawing and focusing a pane need of the app."""

    model: M.TuiModel
    logbuf: LogBuffer
    logfeed: LogFeed
    fleet: FleetSource | None
    slots_seen: tuple[object, ...]  # the figures the slots view shows, and -short

    @property
    def main_screen(self) -> Screen[Any]: ...

    def pane(self, name: str) -> Widget: ...

    def key_of(self, binding_id: str) -> str: ...

    def mark(self, *areas: str) -> None: ...

    def show_tab(self, name: str) -> None: ...

    def call_after_refresh(
        self, callback: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> bool: ...


# Where a pane sits: the upper row's left, the column at its right, the row of slots (a
# fleet's hosts beside them), the tabs below.
LEFT, RIGHT, ROW, TAB = "left", "right", "row", "tab"


@dataclass(frozen=True)
class Pane:
    name: str  # the widget's id, and the focus key's: focus.NAME, focus_pane('NAME')
    place: tuple[str, int]  # where compose puts it, and its position there
    make: Callable[[PaneHost], Widget]
    areas: frozenset[str]  # the model's areas whose change redraws it
    draw: Callable[[PaneHost, Any, set[str]], None]  # (host, its widget, the dirty areas)
    key: str = ""  # its focus key (none: no key)
    label: str = ""  # the key's description
    tooltip: str = ""
    title: str = ""  # its border title
    tab: str = ""  # the tab's label (place TAB)
    focus_on: str = ""  # the widget in it that its key focuses (default: the pane)
    focus: Callable[[PaneHost, Any], None] | None = None  # a key that does more than focus
    when_shown: bool = False  # a tab drawn only while shown (a hidden RichLog still lays out)
    fleet_only: bool = False  # shown with several hosts only (fleet.toml)


# -- drawing (each pane's part of the app's one draw per tick) -------------------------------


def _draw_profiles(host: PaneHost, pane: ProfilesPane, dirty: set[str]) -> None:
    m = host.model
    pane.show(m.profiles, m.slots, m.current)
    # the agent endpoint's queue and leases, only while there are some (agent/endpoint/endpoint.py)
    note = views.endpoint_note(m.endpoint)
    if pane.border_subtitle != note:
        pane.border_subtitle = note


def _draw_memory(host: PaneHost, pane: MemoryPane, dirty: set[str]) -> None:
    # (SERVERS: a standby added or woken, its line)
    m = host.model
    if m.several and host.fleet is None and host.main_screen.has_class("-short"):
        # In the chart's place (m): the picked slot's GPUs, named in the title.
        sid = m.current_id
        pane.show(views.slot_memory(m.memory_view, m.current), m.slots)
        title = f"memory · slot {sid} (t: chart)" if sid else "memory"
        if pane.border_title != title:
            pane.border_title = title
    else:
        pane.show(m.memory_view, m.slots)


# Rows of the screen besides the upper row and the slots view: the top bar, the footer and
# the tabs' least height (app.tcss: #lower min-height); and the upper row's most (max-height:
# a share of the screen less the footer, which is docked).
OTHER_ROWS, UPPER_MOST, FOOTER = 1 + 1 + 6, 0.6, 1


def off_screen(active_tab: str) -> list[Pane]:
    """The panes drawn when their tab is shown (when_shown) whose tab is not `active_tab`."""
    return [p for p in PANES if p.when_shown and active_tab != tab_id(p.name)]


@functools.cache
def hidden_by(active_tab: str) -> tuple[tuple[Pane, ...], frozenset[str]]:
    """`off_screen`'s panes and their names, worked out once a tab: the app's flush asks each
    tick (a list, a set and a tab_id a pane were ~8 calls a flush)."""
    hidden = tuple(off_screen(active_tab))
    return hidden, frozenset(p.name for p in hidden)


def chart_room(host: PaneHost, pane: ThroughputPane | None = None) -> int | None:
    """Rows the chart may take (border included) with several slots on a screen that is not
    short: what the upper row may have once the slots view and the tabs' least height are
    placed, less the memory pane above it. None: one slot, or a short screen (app.tcss
    decides there). `pane`: the chart, whose room is kept with the rows and terminal size it
    was worked out from (the screen's size is a dozen calls, asked each sample)."""
    m = host.model
    # The screen and the panes it reads, looked up once for the chart (the panes are made
    # once with the screen): ~10 calls a sample.
    found = pane.room_panes if pane is not None else None
    if found is None:
        screen, slots, memory = host.main_screen, host.pane("slots"), host.pane("memory")
        assert isinstance(memory, MemoryPane) and isinstance(slots, SlotsPane)
        found = (screen, slots, memory)
        if pane is not None:
            pane.room_panes = found
    screen, slots, memory = found
    if not m.several or screen.has_class("-short"):
        return None
    # The slots view's rows as shown now (its size is the last layout's: a slot added since
    # is not in it yet); a fleet's row is the taller of it and the Hosts view beside it.
    below = slots.row_count + 2
    if host.fleet is not None and isinstance(slots.parent, Widget):
        below = max(below, slots.parent.outer_size.height)
    above = memory.wanted_height() + 2  # (its border)
    # (the screen's size follows the terminal's: the screen has no border or padding of its
    # own that changes while it shows)
    room_from = (below, above, screen.app.size)
    if pane is not None and pane.room is not None and pane.room_from == room_from:
        return pane.room
    height = screen.size.height
    upper = min(int((height - FOOTER) * UPPER_MOST), height - OTHER_ROWS - below)
    if pane is not None:
        pane.room_from = room_from
    return upper - above


def _draw_chart(host: PaneHost, pane: ThroughputPane, dirty: set[str]) -> None:
    # The row shows while the server serving now is speculative: its latest sample,
    # not the last five minutes (a swap to a plain profile drops the row at once).
    m = host.model
    accept = m.series["accept_length"]  # (the newest only: not a list of the whole history)
    has_spec = bool(accept) and accept[-1][1] > 0
    pane.room = chart_room(host, pane)
    # (the markers: the model's same list until a swap, which the pane copies only then)
    pane.show(m.series, has_spec, m.chart_marks(), m.chart_slots())


def _draw_logs(host: PaneHost, pane: LogPane, dirty: set[str]) -> None:
    feed = host.logfeed
    if feed.redraw:
        feed.redraw = False
        feed.new_lines = []
        pane.redraw()
    elif feed.new_lines:
        lines, feed.new_lines = feed.new_lines, []
        pane.append(lines)


def _draw_slots(host: PaneHost, pane: SlotsPane, dirty: set[str]) -> None:
    """The slots view, shown from the second slot on (a one-slot screen is unchanged).
    A sample (no SERVERS or HOSTS change) whose figures are those on screen changes no row."""
    m, screen = host.model, host.main_screen
    if not m.several:
        if M.SERVERS in dirty and screen.has_class("-slots"):
            screen.set_class(False, "-slots")  # back to one slot: the one-slot screen
            pane.display = False
        return
    slots = m.slots  # (kept by the model while its slots are the same)
    tel = m.telemetry
    # Each slot's GPU memory, made again only for other slots or GPUs that read differently
    # (views.slot_mem_key): a sample changes the engines' figures, seldom the servers' bytes,
    # and each slot's memory was a loop over every GPU.
    key, kept = views.slot_mem_key(tel.gpus), pane.mems_read
    if kept is None or kept[0] is not slots or kept[1] != key:
        # (one host: every slot's GPUs are all of them, as gpus_of says; a fleet's, its host's)
        gpus = None if m.fleet else tel.gpus
        mems = [views.slot_mem(s, m.gpus_of(s.id) if gpus is None else gpus) for s in slots]
        kept = pane.mems_read = (slots, key, mems)
    figures = views.slot_lines(slots, tel.engine, kept[2])
    short = screen.has_class("-short")
    seen, was = (figures, short), host.slots_seen
    if not dirty & {M.SERVERS, M.HOSTS} and seen == was:
        return
    host.slots_seen = seen
    if not screen.has_class("-slots"):  # (set with the pane's display: a class is cheaper read)
        pane.display = True
        screen.set_class(True, "-slots")
    # The column names in the border, over the rows: a round border's corner and the
    # title's own space take two cells, a short screen's top line one. (Set when -short
    # changes, not escaped again with every sample.)
    if was[1:] != (short,):
        title = escape(views.SLOT_COLUMNS[1 if short else 2 :])
        if pane.border_title != title:
            pane.border_title = title
    down = host.fleet.unreachable() if host.fleet is not None else None
    if pane.show(slots, m.pools, figures, m.current_id, down, m.unmanaged):
        host.mark(M.CHART)  # the chart's room changed with the slots view's height


def _draw_activity(host: PaneHost, pane: ActivityPane, dirty: set[str]) -> None:
    pane.show(list(host.model.activity), host.model.activity_total)


def _draw_bench(host: PaneHost, pane: BenchPane, dirty: set[str]) -> None:
    pane.show(host.model.bench)


def _draw_jobs(host: PaneHost, pane: JobsPane, dirty: set[str]) -> None:
    m = host.model
    pane.show(m.jobs, m.shown_job, m.jobs_error)


def _draw_insight(host: PaneHost, pane: InsightPane, dirty: set[str]) -> None:
    pane.show(host.model)


def _make_hosts(host: PaneHost) -> Widget:
    """A few hosts: every host's line (all their slots in the slots view); many: the list of
    summarised hosts, each opened on demand (widgets/hostlist.py)."""
    if host.fleet is not None and host.fleet.summarised:
        return HostListPane(id="hosts")
    return HostsPane(id="hosts")


def _draw_hosts(host: PaneHost, pane: HostsPane | HostListPane, dirty: set[str]) -> None:
    # (HOSTS: a host went down or came back; SERVERS: the followed slot's host changed)
    if host.fleet is None:
        return
    focus = host_of(host.model.current_id)
    if isinstance(pane, HostListPane):
        pane.show(host.fleet.hosts, host.fleet.opened, focus)
    else:
        pane.show(host.fleet.hosts, focus)
    title = f"memory · {focus}" if focus else "memory"
    memory = host.pane("memory")
    if memory.border_title != title:
        memory.border_title = title


# -- focus keys that do more than focus ------------------------------------------------------


def focus_now(widget: Widget) -> None:
    """Focus `widget` before the next key is handled. `Widget.focus()` defers the focus behind
    the events already queued, so a focus key and arrows typed (or pasted) in one burst, `o`
    then two downs, moved the cursor of the widget focused before."""
    widget.screen.set_focus(widget)


def _focus_memory_or_chart(host: PaneHost, pane: Widget) -> None:
    # A short screen with several slots has room for one of the two: the key picks which
    # (app.tcss, -memory); elsewhere both are shown and it only focuses.
    shown = pane.display and pane.region.height > 0
    host.main_screen.set_class(pane.id == "memory", "-memory")
    host.mark(M.MEMORY)
    if shown:
        focus_now(pane)
    else:  # it shows once the new class's styles apply
        host.call_after_refresh(pane.focus)


def _focus_slots(host: PaneHost, pane: SlotsPane) -> None:
    if pane.display:
        focus_now(pane)
    else:
        host.notify("one slot: no slots view (host.toml places servers on GPUs)")


def _log_pane(host: PaneHost) -> LogPane:
    return LogPane(host.logbuf, key_of=host.key_of, id="logs")


# The table. Its order is the focus keys' order in the help screen and the palette.
PANES: tuple[Pane, ...] = (
    Pane(
        "profiles",
        (LEFT, 0),
        lambda host: ProfilesPane(id="profiles"),
        frozenset({M.SERVERS}),
        _draw_profiles,
        key="p",
        label="Profiles",
        tooltip="Focus the profiles pane",
        title="profiles · server",
        focus_on="#profile-list",
    ),
    Pane(
        "memory",
        (RIGHT, 0),
        lambda host: MemoryPane(id="memory"),
        frozenset({M.MEMORY, M.SERVERS}),
        _draw_memory,
        key="m",
        label="Memory",
        tooltip="Focus the memory pane",
        title="memory",
        focus=_focus_memory_or_chart,
    ),
    Pane(
        "chart",
        (RIGHT, 1),
        lambda host: ThroughputPane(id="chart"),
        frozenset({M.CHART}),
        _draw_chart,
        key="t",
        label="Throughput",
        tooltip="Focus the throughput pane",
        title="throughput · last 5 min",
        focus=_focus_memory_or_chart,
    ),
    Pane(
        "logs",
        (TAB, 0),
        _log_pane,
        frozenset({M.LOGS}),
        _draw_logs,
        key="l",
        label="Logs",
        tooltip="Focus the log pane",
        tab="Logs",
        focus_on="#log-view",
        when_shown=True,  # (its new lines wait in the feed: LogFeed.keep)
    ),
    Pane(
        "slots",
        (ROW, 1),
        lambda host: SlotsPane(id="slots"),
        # (HOSTS: a fleet's host went down or came back, and its slots' rows say so)
        frozenset({M.SERVERS, M.MEMORY, M.CHART, M.HOSTS}),
        _draw_slots,
        key="o",
        label="Slots",
        tooltip="Focus the slots view (several slots): up/down picks the slot the screen follows",
        focus=_focus_slots,
    ),
    Pane(
        "bench",
        (TAB, 1),
        lambda host: BenchPane(id="bench"),
        frozenset({M.BENCH}),
        _draw_bench,
        key="c",
        label="Compare",
        tooltip="Focus the bench results and comparison",
        tab="Bench",
        focus_on="#bench-table",
    ),
    Pane(
        "jobs",
        (TAB, 3),
        lambda host: JobsPane(id="jobs"),
        frozenset({M.JOBS}),
        _draw_jobs,
        key="j",
        label="Jobs",
        tooltip="Focus the batch jobs (space pauses or resumes, + and - change the concurrency)",
        tab="Jobs",
        when_shown=True,
    ),
    Pane(
        "insight",
        (TAB, 4),
        lambda host: InsightPane(id="insight"),
        frozenset({M.MEMORY, M.SERVERS, M.BENCH}),
        _draw_insight,
        key="i",
        label="Insight",
        tooltip="Show whether MTP / HiCache pay off and what bounds max running requests",
        tab="Insight",
    ),
    Pane(
        "activity",
        (TAB, 2),
        lambda host: ActivityPane(id="activity"),
        frozenset({M.ACTIVITY}),
        _draw_activity,
        key="a",
        label="Activity",
        tooltip="Focus the activity pane (commands from all clients)",
        tab="Activity",
        when_shown=True,
    ),
    Pane(
        "hosts",
        (ROW, 0),
        _make_hosts,
        frozenset({M.HOSTS, M.SERVERS}),
        _draw_hosts,
        title="hosts",
        fleet_only=True,
    ),
)
BY_NAME: dict[str, Pane] = {p.name: p for p in PANES}


def placed(where: str, fleet: bool) -> Iterator[Pane]:
    """The panes of one place, in their order there (a fleet's panes only with a fleet)."""
    here = [p for p in PANES if p.place[0] == where and (fleet or not p.fleet_only)]
    yield from sorted(here, key=lambda p: p.place[1])


def focus(host: PaneHost, name: str) -> None:
    """A pane's focus key: its tab shown, then the pane (or the widget in it) focused."""
    spec = BY_NAME.get(name)
    if spec is None:
        return
    pane = host.pane(name)
    if spec.focus is not None:
        spec.focus(host, pane)
        return
    target = pane.query_one(spec.focus_on) if spec.focus_on else pane
    if spec.place[0] == TAB:
        host.show_tab(name)
    focus_now(target)


def tab_id(name: str) -> str:
    return f"tab-{name}"
