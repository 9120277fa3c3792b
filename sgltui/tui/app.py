"""The sgltui Textual app: a client of the agent (or of a replayed session).

All state comes from the source (STATUS on connect, pushes after). One app-lifetime worker
consumes pushes and applies them to the model; panes are redrawn in one batch per tick, only
those whose data changed. Commands go to the source in workers, so no handler waits on I/O.

The panes are panes.py's table (compose, drawing, focus keys); a swap is swap.py's one flow.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.events import Key, Resize
from textual.markup import escape
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Footer, Input, OptionList, Static, TabbedContent, TabPane

from sgltui import protocol
from sgltui.client.errors import Pinned
from sgltui.core import retry
from sgltui.session.layout import SCREENSHOTS_DIR
from sgltui.tui import (
    advise_key,
    appparts,
    catchup,
    collector,
    palette,
    panes,
    quitnote,
    screenshot,
    serverkeys,
    sessionfiles,
    swap,
    topbar,
)
from sgltui.tui import model as M
from sgltui.tui.bindings import ALL_KEYS, KEYS, key_for
from sgltui.tui.config import TuiConfig
from sgltui.tui.fleetsource import FleetSource, host_of
from sgltui.tui.fmt import one_line
from sgltui.tui.logbuffer import LogBuffer, LogLine
from sgltui.tui.logfeed import LogFeed
from sgltui.tui.model import ACTIVE, TuiModel
from sgltui.tui.screens import Confirm, HelpScreen
from sgltui.tui.screenshot import offline_svg as offline_svg  # (tools/gpucheck imports it here)
from sgltui.tui.source import (
    SOURCE_ERRORS,
    MalformedReply,
    Pushed,
    TuiSource,
    ask,
    decode_push,
)
from sgltui.tui.themes import DEFAULT_THEME
from sgltui.tui.widgets.hostlist import HostListPane
from sgltui.tui.widgets.insight import InsightPane
from sgltui.tui.widgets.jobs import JobsPane
from sgltui.tui.widgets.logs import LogPane
from sgltui.tui.widgets.profiles import ProfilesPane
from sgltui.tui.widgets.slots import SlotsPane

# Reconnecting to the agent: 0.5 s after it went away, doubling to 5 s (core/retry.py).
RECONNECT_FIRST_S, RECONNECT_MAX_S = 0.5, 5.0
# Actions that change servers or start work: disabled in a read-only (replay) source.
_MUTATING = {
    "start",
    "stop",
    "restart",
    "bench",
    "bench_stop",
    "toggle_demo_load",
    "profile_key",
    "accept_advice",
}
FLUSH_DELAY_S = 0.1  # pushes arriving within this window are drawn in one go
# What a tick's pushes change (its lines, then its sample, read in one wake-up): drawn at once.
TICK_AREAS = frozenset({M.LOGS, M.MEMORY, M.CHART})
# A safety net for anything a missed event would leave stale, and the uptime (shown to the
# minute after the first). Every change an operator makes or sees arrives as a push at once.
STATUS_POLL_S = 15.0
# The Jobs tab, while on screen with a job running, reads the job in full this often (its
# events carry counts every 15 s; the rate, segments and ETA are the agent's).
JOBS_READ_S = 1.0


class Flush(Message):
    """Draw the areas the app marked since the last flush (`SgltuiApp.mark`). A message of
    its own, handled by a method: `call_later` of the flush method wrapped it in a new
    `partial` each time, whose parameters Textual counted again with `inspect.signature` (it
    keeps the count on the callable: on a method's function, once; on a partial, never)."""

    bubble = False


def _unreachable_notes(fleet: FleetSource, said: dict[str, str | None]) -> list[str]:
    """Why hosts went down, each once, when it does (`said`: each host's last error, kept up
    to date); many hosts: one line, not a toast each. (Out of the App class: its size.)"""
    fresh: dict[str, str] = {}
    for h in fleet.hosts:
        error = None if h.reachable else h.error
        if error and error != said.get(h.name):
            fresh[h.name] = error
        said[h.name] = error
    if len(fresh) > 1 and fleet.summarised:
        names = ", ".join(list(fresh)[:5]) + (" ..." if len(fresh) > 5 else "")
        return [f"{len(fresh)} hosts unreachable: {names}; `sgltui fleet status` says why"]
    return list(fresh.values())


class SgltuiApp(App[str | None]):
    # Problems found while loading themes, set by make_app and printed on exit.
    theme_errors: list[str] = []
    CSS_PATH = "app.tcss"
    TITLE = "sgltui"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding(k.key, k.action, k.description, show=k.show, tooltip=k.tooltip, id=k.id)
        for k in ALL_KEYS
    ]

    def __init__(
        self,
        source: TuiSource,
        *,
        config: TuiConfig | None = None,
        theme: str | None = None,
        themes: Iterable[Any] = (),
        demo: bool = False,
        screenshot_dir: Path | None = None,
        own_client: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.source = source
        # Several hosts (fleet.toml): a Hosts view beside the slots view, slots as host/slot.
        self.fleet = source if isinstance(source, FleetSource) else None
        self.config = config or TuiConfig()
        self.demo = demo
        self.screenshot_dir = screenshot_dir
        self.model = TuiModel(
            own_client=own_client or getattr(source, "client_name", None), clock=clock
        )
        self.model.demo_only = demo
        self.model.fleet = self.fleet is not None
        self.logbuf = LogBuffer(self.config.log_max_lines)
        self.logfeed = LogFeed(self.logbuf)  # lines on their way to the Logs tab
        self._themes = list(themes)
        self.user_theme_names = {t.name for t in self._themes}
        self.demo_load = True  # `sgltui demo --no-load` turns the background load off
        self._theme_name = theme or self.config.theme or DEFAULT_THEME
        self._dirty: set[str] = set()
        self._panes: dict[str, Widget] = {}  # see pane
        self._hidden_dirty: set[str] = set()  # areas of tabs not on screen, drawn when shown
        self._bench_return: str | None = None
        self._bench_points: dict[str, int] = {}  # the point each running bench was read at
        self._flush_scheduled, self._flushed_at = False, 0.0  # (see mark)
        self._tabs: TabbedContent | None = None  # the lower tabs, looked up once
        self._active_tab = ""  # their tab shown, kept by _tab_shown
        self._status_scheduled = False
        self._demo_done = False
        self._bindings_state: str | None = None
        self._topbar = ""
        self.slots_seen: tuple[object, ...] = ()  # the figures the slots view shows, and -short
        self._jobs_read = False  # the Jobs tab has read the agent's jobs once
        self._jobs_timer: Timer | None = None  # reads the jobs each second while shown
        self._host_errors: dict[str, str | None] = {}  # a fleet: each host's last error shown
        # The pool whose row the slots view has picked (a profile key rolls it), else None.
        self.picked_pool: str | None = None
        self.first_status = asyncio.Event()
        self._status_seen = False  # first_status is set (see mark)
        # The keymap in force (binding id -> keys): kept here, Textual's own copy is private.
        self.user_keymap: dict[str, str] = dict(self.config.keymap or {})

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        fleet = self.fleet is not None

        def made(where: str) -> Iterable[Widget]:
            return (p.make(self) for p in panes.placed(where, fleet))

        yield Static("", id="topbar")
        with Horizontal(id="upper"):
            yield from made(panes.LEFT)
            with Vertical(id="right"):
                yield from made(panes.RIGHT)
        if fleet:
            with Horizontal(id="fleet-row"):
                yield from made(panes.ROW)
        else:
            yield from made(panes.ROW)
        with TabbedContent(id="lower"):
            for p in panes.placed(panes.TAB, fleet):
                with TabPane(p.tab, id=panes.tab_id(p.name)):
                    yield p.make(self)
        yield Footer()

    def on_mount(self) -> None:
        for theme in self._themes:
            self.register_theme(theme)
        self.theme = (
            self._theme_name if self._theme_name in self.available_themes else "textual-dark"
        )
        if self.user_keymap:
            self.set_keymap(self.user_keymap)
        for p in panes.PANES:
            if p.title and (self.fleet is not None or not p.fleet_only):
                self.pane(p.name).border_title = p.title
        self._update_topbar()
        self._update_log_title()
        self.query_one("#profile-list").focus()
        self.consume_source()
        self.set_interval(STATUS_POLL_S, self._poll_status, name="status poll")
        # Ticks only while the Jobs tab shows (_tab_shown): an idle screen wakes once a
        # second for the sample, not again for a tab nobody looks at.
        self._jobs_timer = self.set_interval(
            JOBS_READ_S, self._jobs_tick, name="jobs read", pause=not self._jobs_shown()
        )
        if self.fleet is not None:
            self.mark(M.HOSTS)
            # A fleet always has the slots view: shown from the start, so `o` finds it before
            # the first host has answered (it said "one slot: no slots view" until then).
            self.pane("slots").display = True
            self.main_screen.set_class(True, "-slots")
            if self.fleet.summarised:  # many hosts: the list of hosts first (Enter opens one)
                self.pane("hosts").focus()

    async def on_unmount(self) -> None:
        if self.fleet is not None:
            # The hosts' ssh links are this app's children (each its own process group): stop
            # and reap them (a local agent's connection simply closes with the process).
            await self.fleet.close()

    @property
    def main_screen(self) -> Screen:
        """The screen the panes live on. `self.screen` is a dialog while one is open, and the
        layout classes (-short, -slots, -memory) belong to the panes' screen whatever is on top:
        read from a dialog, the memory pane showed every GPU under the picked slot's title."""
        return self.screen_stack[0]

    def on_resize(self, event: Resize) -> None:
        # Textual has no media queries: classes switch the compact layout for 80x24.
        self.main_screen.set_class(event.size.height < 32, "-short")
        self.main_screen.set_class(event.size.width < 100, "-narrow")
        self._update_topbar()  # its parts are chosen for the width
        self.mark(M.CHART)  # its room beside the other panes (panes.chart_room)

    # -- the source --------------------------------------------------------------------------

    @work(exclusive=True, group="source", exit_on_error=False, description="agent pushes")
    async def consume_source(self) -> None:
        backoff = retry.Backoff(first=RECONNECT_FIRST_S, cap=RECONNECT_MAX_S)
        while True:
            try:
                await self.source.connect()
                status = await self.source.snapshot()
                await self._on_connected(status)
                backoff.reset()
                async for push in self.source.pushes():
                    self._on_push(decode_push(push))  # the one decoding of each push
                if self.source.read_only:
                    return  # a replay that has ended keeps its last screen
                raise ConnectionError("the agent closed the connection")
            except asyncio.CancelledError:
                raise
            except SOURCE_ERRORS as exc:  # the link failed: show it and retry
                delay = backoff.failed()
                self.model.connected = False
                self.model.connection_note = (
                    f"agent unreachable: {one_line(exc, self.key_of)}; retrying every {delay:.0f}s"
                )
                self.mark(M.HEADER)
                try:
                    await self.source.close()
                except SOURCE_ERRORS:
                    pass
                await asyncio.sleep(delay)

    async def _on_connected(self, status: dict[str, Any]) -> None:
        await catchup.on_connected(self, status)
        # Started and drawn with the first STATUS: the collector at the TUI's pace (once).
        self.call_after_refresh(collector.settle, self.is_headless)
        if self.demo and not self._demo_done:
            self._demo_done = True
            self.run_worker(
                catchup.start_demo(self), group="ops", exit_on_error=False, description="demo start"
            )

    def local_session(self) -> str | None:
        """The agent's session directory when it is on this machine (a fleet's hosts keep
        theirs on their own disks: screenshots go to the current directory)."""
        return self.model.session_dir if self.fleet is None else None

    def bad_reply(self, exc: MalformedReply) -> None:
        """A reply the app cannot read: one line, and the app goes on without it."""
        self.notify(
            one_line(exc, self.key_of), title="agent reply", severity="warning", markup=False
        )

    def _on_push(self, push: Pushed) -> None:
        if push.kind == "logs":  # a tick's lines of every slot (agent/logbatch.py)
            self._on_lines(push.data or ())  # (what is no dict: skipped by the feed)
            return
        if push.kind == "note":
            # A line of an op the source runs itself (a fleet.toml pool's roll): a toast, and
            # the Activity tab (the model adds it).
            data = push.data or {}
            error = data.get("level") == "error"
            self.notify(
                str(data.get("text") or ""),
                title=str(data.get("title") or ""),
                severity="error" if error else "information",
                timeout=10 if error else 4,
                markup=False,
            )
        if push.kind == "fleet" and self.fleet is not None:
            # A host connected, dropped or changed: its row, and a STATUS merged afresh.
            self.mark(M.HOSTS)
            if self.fleet.fleet_read():  # (a summarised host's line alone: no STATUS to ask)
                self.refresh_status_soon()
            for error in _unreachable_notes(self.fleet, self._host_errors):
                self.notify(error, title="host unreachable", severity="warning", markup=False)
            return
        if push.kind == "log":
            self._on_lines([push.data or {}])
            return
        self.mark(*self.model.apply_push(push))
        if (event := push.event) is None:
            return  # a sample (each second): none of the checks below is about one
        if isinstance(event, protocol.BenchDone) and event.path:
            self.read_bench_result(event.run_id, event.path)
        if isinstance(event, protocol.BenchProgress):
            self._bench_point(push.data)
        if isinstance(event, protocol.BenchDone) and self._bench_return:
            self.set_timer(1.0, self._bench_finished)  # after the status shows the slot
        # Live only: in a replay every recorded command is "another client's" and the toasts
        # would bury the screen (the Activity tab lists them all the same).
        if (
            isinstance(event, protocol.Command)
            and event.client
            and event.client != self.model.own_client
            and not self.source.read_only
        ):
            self.notify(
                f"{event.client}: {event.op}",
                title="command from another client",
                timeout=4,
                markup=False,
            )
        if self.model.needs_status_refresh(push):
            self.refresh_status_soon()
        if self.model.job_needs_reading(push) and self._jobs_shown():
            self._read_jobs()

    def _on_lines(self, pushed: Iterable[Any]) -> None:
        """Log lines of one slot (a `log` push) or of every slot since the last tick: into the
        buffer, drawn in the next flush where the pane shows any (an idle pool's: kept)."""
        model = self.model  # (its followed slot: asked only for a push that names none)
        added = self.logfeed.add_pushes(pushed, lambda: model.current_id)
        if self.logbuf.shows_any(added) or self._log_changed_by(added):  # (shown: no call)
            self.logfeed.keep(added)
            self.mark(M.LOGS)

    def _log_changed_by(self, lines: list[LogLine]) -> bool:
        if self.logbuf.shows_any(lines):  # shown: no pane lookup (a walk up the DOM)
            return True
        try:
            pane = self.pane("logs")
        except NoMatches:  # shutting down
            return False
        return isinstance(pane, LogPane) and pane.changed_by(lines)

    def mark(self, *areas: str) -> None:
        """The model's areas that changed: their panes are drawn in the next flush."""
        if not areas:
            return  # nothing changed: no timer, no flush
        self._dirty.update(areas)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            # A message, in order with the app's others (run beside them, a move onto a row was
            # lost). A tick's: at once, handled after the pushes of this wake-up (no wake-up to
            # draw), unless within FLUSH_DELAY_S of the last. A STATUS's, events', the first
            # draw's (Textual's first focus settling): they wait.
            if not self._status_seen:  # (once set, never cleared: its call asked no more)
                self._status_seen = self.first_status.is_set()
            tick = self._dirty <= TICK_AREAS and self._status_seen
            wait = self._flushed_at + FLUSH_DELAY_S - time.monotonic() if tick else FLUSH_DELAY_S
            if wait > 0:
                asyncio.get_running_loop().call_later(wait, self.post_message, Flush())
            else:
                self.post_message(Flush())

    def refresh_status_soon(self) -> None:
        if not self._status_scheduled:
            self._status_scheduled = True
            self.set_timer(0.2, self._refresh_status, name="status")

    def _poll_status(self) -> None:
        if self.model.connected:
            self._refresh_status()

    @work(exclusive=True, group="status", exit_on_error=False, description="status refresh")
    async def _refresh_status(self) -> None:
        self._status_scheduled = False
        try:
            status = await self.source.snapshot()
        except SOURCE_ERRORS:
            return  # the push worker notices a dead link and reconnects
        self.mark(*self.model.apply_status(status))

    def _bench_point(self, ev: dict[str, Any]) -> None:
        """A running bench's next point began: the file holds the points before it (the
        runner saves after each), so the Bench tab fills point by point, not at the end."""
        run_id = str(ev.get("run_id") or "")
        run = self.model.bench.get(run_id)
        point = ev.get("point")
        if run is None or not run.path or not isinstance(point, int) or point < 2:
            return
        if self._bench_points.get(run_id) != point:
            self._bench_points[run_id] = point
            self.read_bench_result(run_id, run.path)

    @work(thread=True, exit_on_error=False, description="read bench result")
    def read_bench_result(self, run_id: str, path: str) -> None:
        try:
            result = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            self.call_from_thread(
                self.notify,
                f"cannot read bench result {path}: {one_line(exc, self.key_of)}",
                severity="warning",
                markup=False,
            )
            return
        self.call_from_thread(lambda: self.mark(*self.model.set_bench_result(run_id, result)))

    # -- drawing -----------------------------------------------------------------------------

    def on_flush(self, _message: Flush) -> None:
        self._flush_scheduled, self._flushed_at = False, time.monotonic()
        dirty, self._dirty = self._dirty, set()
        # The Activity, Jobs and Logs tabs are drawn when shown: a hidden RichLog still lays
        # the whole screen out on every write (an event every few seconds), and a hidden log
        # tail would append and scroll for nobody (its lines wait in the feed).
        try:
            tabs = self._tabs
            # The panes are linked while the tabs are (none is removed alone): asked once, not
            # a walk to the root per pane. Shutting down, query_one says NoMatches. (Whether
            # their message loop runs: one read, where is_attached walked up to the app.)
            if tabs is None or not tabs.is_running:
                self._panes.clear()
                tabs = self._tabs = self.query_one(TabbedContent)
                self._active_tab = tabs.active  # (then kept by _tab_shown: ~6 calls a read)
            hidden, names = panes.hidden_by(self._active_tab)
            for p in hidden:  # drawn when its tab is shown; other panes reading its areas now
                self._hidden_dirty |= dirty & p.areas
            self._draw(dirty, names)
        except NoMatches:
            pass  # the app is shutting down and its panes are already gone

    def pane(self, name: str) -> Widget:
        """The pane of panes.py's table named `name`, looked up once (kept while the tabs are
        linked: on_flush). A DOM query per draw cost a tenth of an idle second's drawing."""
        found = self._panes.get(name)
        if found is None:
            found = self._panes[name] = self.query_one(f"#{name}")
        return found

    def _draw(self, dirty: set[str], hidden: Collection[str] = ()) -> None:
        """Draw the panes reading the `dirty` areas, but those named in `hidden`."""
        m = self.model
        if M.SERVERS in dirty:
            state = m.current.state if m.current else None
            if state != self._bindings_state:  # the footer rebuilds itself on refresh_bindings
                self._bindings_state = state
                self.refresh_bindings()
            # Several slots: log lines say whose; a slot picked in the slots view shows its own.
            only = m.current_id if m.several and m.selected is not None else None
            if (self.logbuf.tag_slots, self.logbuf.only_slot) != (m.several, only):
                self.logbuf.tag_slots, self.logbuf.only_slot = m.several, only
                self.logfeed.redraw = True
                dirty.add(M.LOGS)
        found = self._panes  # (pane's cache read inline: two calls a pane drawn)
        for p in panes.PANES:
            if p.name in hidden:
                continue
            if dirty & p.areas and (self.fleet is not None or not p.fleet_only):
                p.draw(self, found[p.name] if p.name in found else self.pane(p.name), dirty)
        if dirty & {M.HEADER, M.SERVERS, M.HOSTS}:
            self._update_topbar()

    @on(HostListPane.Toggled)
    def _host_toggled(self, msg: HostListPane.Toggled) -> None:
        """Enter on a host of many: its slots shown (and its pushes followed) or no more."""
        if self.fleet is not None and self.fleet.toggle(msg.host):
            self.fleet.focus_host = msg.host  # its GPUs and profiles follow
            self.mark(M.MEMORY)
        self.mark(M.HOSTS)
        self.refresh_status_soon()

    @on(SlotsPane.Picked)
    def _slot_picked(self, msg: SlotsPane.Picked) -> None:
        """A row of the slots view: the screen follows that slot (a pool's row: every slot's
        logs, the first slot's details; a profile key rolls that pool)."""
        self.picked_pool = msg.pool
        if msg.slot != self.model.selected:
            self.model.selected = msg.slot
            self.mark(M.SERVERS)
            host = host_of(msg.slot)
            if self.fleet is not None and host and host != self.fleet.focus_host:
                # Another host's slot: its GPUs, profiles and jobs follow (commands without a
                # slot go there too).
                self.fleet.focus_host = host
                self.mark(M.MEMORY)
                self.refresh_status_soon()

    def _update_topbar(self) -> None:
        parts = topbar.parts(self.model, self.source, self.fleet)
        text = topbar.fit(parts, self.size.width - 2)  # the bar's padding: one cell each side
        if text != self._topbar:
            self._topbar = text
            self.query_one("#topbar", Static).update(text, layout=False)

    def _update_log_title(self) -> None:
        # The tab label is the log pane's title: filter, level and follow state at a glance.
        tab = self.query_one(TabbedContent).get_tab(panes.tab_id("logs"))
        text = self.query_one(LogPane).describe()
        tab.label = text[:1].upper() + text[1:]

    def show_tab(self, name: str) -> None:
        self.query_one(TabbedContent).active = panes.tab_id(name)

    @on(TabbedContent.TabActivated)
    def _tab_shown(self, msg: TabbedContent.TabActivated) -> None:
        if msg.tabbed_content is self._tabs:  # (read here once a switch, not each flush)
            self._active_tab = msg.tabbed_content.active
        if self._hidden_dirty:
            areas, self._hidden_dirty = self._hidden_dirty, set()
            self.mark(*areas)
        shown = self._jobs_shown()
        if self._jobs_timer is not None:
            (self._jobs_timer.resume if shown else self._jobs_timer.pause)()
        if shown and self.model.connected:
            self._read_jobs()

    # -- batch jobs (the Jobs tab renders the model; the app reads and commands) -------------

    def _jobs_shown(self) -> bool:
        try:
            return self.query_one(TabbedContent).active == panes.tab_id("jobs")
        except NoMatches:
            return False

    def _jobs_tick(self) -> None:
        if (
            self.model.connected
            and self._jobs_shown()
            and (self.model.jobs_active or not self._jobs_read)
        ):
            self._read_jobs()

    @work(exclusive=True, group="jobs", exit_on_error=False, description="batch jobs")
    async def _read_jobs(self) -> None:
        """The jobs, and the one the tab shows in full (its rate history and segments)."""
        try:
            views: list[protocol.JobView] = await ask(self.source, "job_list")
            changed = self.model.set_jobs(views)
            pick = self.model.shown_job
            if pick is not None:
                changed |= self.model.set_job(await ask(self.source, "job_status", job=pick.id))
        except SOURCE_ERRORS as exc:  # a replay, an older agent
            self.model.jobs_error = one_line(exc, self.key_of)
            self.mark(M.JOBS)
            return
        self._jobs_read = True
        if changed or not self.model.jobs:
            self.mark(M.JOBS)

    @on(JobsPane.Command)
    def _job_command(self, msg: JobsPane.Command) -> None:
        """Space, + and - on the job shown: the model changes at once (keys pressed faster than
        the agent answers build on each other: + + doubles twice), then the agent is told."""
        view = self.model.jobs.get(msg.job_id)
        if view is None:
            return
        op, args, expect = appparts.job_command(view, msg.what, msg.factor)
        self.model.expect_job(view.id, **expect)
        self._draw({M.JOBS})

        async def send() -> None:
            try:
                await ask(self.source, op, **args)
            except SOURCE_ERRORS as exc:  # the agent's one-line refusal
                self.notify(one_line(exc, self.key_of), title=op, severity="warning", markup=False)
            self._read_jobs()

        self.run_worker(send(), group="jobs-cmd", exit_on_error=False, description=op)

    @on(LogPane.StateChanged)
    def _log_state(self) -> None:
        try:
            self._update_log_title()
        except NoMatches:
            pass  # shutting down

    def watch_theme(self, theme: str) -> None:
        # Log text is Rich Text with colours resolved from the theme: redraw it on a change.
        found = self.query(LogPane)
        if found:
            self.call_after_refresh(found.first().redraw)

    # -- commands ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in _MUTATING and self.source.read_only:
            return False
        slot = self.model.current
        state = slot.state if slot else None
        if action == "start" and state in ACTIVE:
            return None  # dimmed: a server runs; a profile key swaps instead
        if action in ("stop", "restart") and state not in ACTIVE:
            return None
        return True

    def slot_args(self) -> dict[str, Any]:
        """Where a command on the current slot goes: the slot by name (none known: the agent
        picks its only one)."""
        sid = self.model.current_id
        return {"slot": sid} if sid is not None else {}

    def _op(self, op: str, done: str | None = None, **args: Any) -> None:
        """Send `op` in a worker (see send)."""
        self.run_worker(
            self.send(op, done, **args), group="ops", exit_on_error=False, description=f"op {op}"
        )

    async def send(self, op: str, done: str | None = None, **args: Any) -> None:
        """Send `op`; `done` is the toast once the agent accepts it. A batch job pinned to the
        slot: asks first, and sends it again confirmed (the job pauses and resumes on the new
        server). Runs in a worker: it may wait for that dialog."""
        try:
            reply = await ask(self.source, op, **args)
        except MalformedReply as exc:  # sent, and maybe done: the status will say
            self.bad_reply(exc)
            self.refresh_status_soon()
            return
        except SOURCE_ERRORS as exc:
            if isinstance(exc, Pinned) and not args.get("confirm"):  # ask, then confirm
                bench = self.model.bench_on(args.get("slot", self.model.current_id))
                if bench is not None:  # a bench sweeps the slot (the agent refused for it)
                    question = swap.bench_question(bench, op, args.get("profile"))
                else:
                    question = swap.pin_question(exc.message, op)
                if await self.push_screen_wait(Confirm(question)):
                    await self.send(op, done, **{**args, "confirm": True})
                return
            self.notify(
                one_line(exc, self.key_of),
                title=f"{op} failed",
                severity="error",
                markup=False,
                timeout=8,
            )
            return
        said = _done_text(reply, done)
        if said:
            self.notify(said, timeout=3, markup=False)
        self.refresh_status_soon()

    def refused_down(self, slot_id: str | None) -> bool:
        """A slot of a fleet's host that is down: refused at once, in the line the source gives
        (its row is what the host said last; nothing can reach it)."""
        host = host_of(slot_id)
        if self.fleet is None or host is None or host not in self.fleet.unreachable():
            return False
        why = self.fleet.refusal(host) or f"host {host} is unreachable"
        self.notify(why, title="not sent", severity="warning", markup=False)
        return True

    def refused_read_only(self) -> bool:
        if self.source.read_only:
            self.notify(f"{self.source.read_only_label}: commands are disabled", severity="warning")
            return True
        return False

    # -- swaps (swap.py: the whole conversation, in one worker) ------------------------------

    def action_profile_key(self, key: str) -> None:
        self._key_pressed(key)

    @work(group="ops", exit_on_error=False, description="profile key")
    async def _key_pressed(self, key: str) -> None:
        await swap.key_pressed(self, key)

    @work(group="ops", exit_on_error=False, description="swap")
    async def swap_to(self, name: str) -> None:
        await swap.swap_to(self, name)

    def action_start(self) -> None:
        name = self.query_one(ProfilesPane).highlighted_profile()
        if name is None:
            self.notify(
                "no profile to start: add profiles, see `sgltui profiles list`", severity="warning"
            )
            return
        self.swap_to(name)

    @on(OptionList.OptionSelected, "#profile-list")
    def _profile_chosen(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.swap_to(event.option.id)

    # -- the current slot's server (serverkeys.py: each key one flow, in a worker) -----------

    @work(group="ops", exit_on_error=False, description="stop")
    async def action_stop(self) -> None:
        await serverkeys.stop(self)

    @work(group="ops", exit_on_error=False, description="restart")
    async def action_restart(self) -> None:
        await serverkeys.restart(self)

    @work(group="ops", exit_on_error=False, description="keep warm")
    async def action_keep_warm(self) -> None:
        name = self.query_one(ProfilesPane).highlighted_profile()
        await serverkeys.keep_warm(self, name)

    @work(group="ops", exit_on_error=False, description="accept proposal")
    async def action_accept_advice(self) -> None:
        await advise_key.accept(self)

    def insight(self) -> InsightPane:
        return self.query_one(InsightPane)

    @work(group="ops", exit_on_error=False, description="attach")
    async def action_attach_found(self) -> None:
        await serverkeys.attach_found(self, self.query_one(SlotsPane).found_pid())

    def action_bench(self) -> None:
        if self.refused_read_only():
            return
        slot = self.model.current
        current = (slot.profile if slot else None) or self.query_one(
            ProfilesPane
        ).highlighted_profile()
        if not current:
            self.notify("start a profile first, or name profiles in the bench dialog")

        def chosen(spec: dict[str, Any] | None) -> None:
            if spec:
                # Where the slot goes back to when the bench has swapped other profiles in.
                self._bench_return = slot.profile if slot else None
                if slot is not None:  # the slot on screen (the spec's default is "0")
                    spec = dict(spec, slot=slot.id)
                self._op("bench_start", done="bench started", spec=spec)
                self.action_focus_pane("bench")

        self.push_screen(appparts.bench_dialog(self.model, current), chosen)

    @work(group="ops", exit_on_error=False, description="swap back after a bench")
    async def _bench_finished(self) -> None:
        """After a bench that swapped profiles: back to the profile the slot had, if asked."""
        back, self._bench_return = self._bench_return, None
        slot = self.model.current
        now = slot.profile if slot else None
        if not back or now == back or self.source.read_only:
            return
        question = appparts.swap_back_question(slot.id if slot else "-", now, back)
        if await self.push_screen_wait(Confirm(question)):
            await swap.swap_to(self, back)

    def action_bench_stop(self) -> None:
        running = [r for r in self.model.bench.values() if r.state == "running"]
        if not running:
            self.notify("no bench run in progress")
            return
        self._op("bench_stop", done="bench stopped", run_id=running[-1].run_id)

    def action_toggle_demo_load(self) -> None:
        on = not self.model.demo_load
        self._op("demo_load", done=f"demo load {'on' if on else 'off'}", on=on)

    # -- keys of the panes -------------------------------------------------------------------

    def action_focus_pane(self, pane: str) -> None:
        panes.focus(self, pane)  # (its row of panes.py's table says what the key does)

    def action_filter_logs(self) -> None:
        self.action_focus_pane("logs")
        self.call_after_refresh(self.query_one(LogPane).open_input, "filter")

    def action_search_logs(self) -> None:
        self.action_focus_pane("logs")
        self.call_after_refresh(self.query_one(LogPane).open_input, "search")

    def action_search_next(self) -> None:
        self._search(older=True)

    def action_search_prev(self) -> None:
        self._search(older=False)

    def _search(self, older: bool) -> None:
        pane = self.query_one(LogPane)
        if not self.logbuf.search_text:
            key = self.key_of("logs.search")
            self.notify(f"no search yet: {key} to search the log", timeout=2, markup=False)
            return
        pane.search(older=older)  # the Logs tab says "3/17" or "no matches"

    def action_cycle_log_level(self) -> None:
        order = ["info", "warning", "error"]
        self.logbuf.min_level = order[(order.index(self.logbuf.min_level) + 1) % 3]
        self.query_one(LogPane).redraw()

    def action_toggle_wrap(self) -> None:
        self.query_one(LogPane).toggle_wrap()

    def action_toggle_noise(self) -> None:
        self.logbuf.show_noise = not self.logbuf.show_noise
        self.query_one(LogPane).redraw()

    def action_follow_logs(self) -> None:
        self.query_one(LogPane).follow()

    # -- the app -----------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(
            HelpScreen({k.id: self.key_of(k.id) for k in ALL_KEYS}, self.model.profiles)
        )

    def action_screenshot_to_session(self) -> None:
        # Toasts (the last command's "swapping to ...") are not part of the screen: clear
        # them and take the screenshot once the screen is repainted without them.
        self.clear_notifications()
        self.call_after_refresh(self._take_screenshot)

    def _take_screenshot(self) -> None:
        svg = offline_svg(self.export_screenshot())
        session = self.local_session()
        in_session = self.screenshot_dir is None and bool(session)
        folder = self.screenshot_dir or (Path(session) / SCREENSHOTS_DIR if session else Path.cwd())
        name = time.strftime("sgltui-%Y%m%d-%H%M%S.svg")
        self._write_screenshot(folder, name, svg, in_session)

    @work(thread=True, exit_on_error=False, description="write screenshot")
    def _write_screenshot(self, folder: Path, name: str, svg: str, in_session: bool) -> None:
        error = screenshot.save(folder, name, svg, in_session)
        if error:
            self.call_from_thread(self.notify, error, severity="error", markup=False)
            return
        self.call_from_thread(self.notify, f"screenshot saved: {folder / name}", markup=False)

    def job_action(self, action: str) -> None:
        """A Jobs pane key from the palette (the pane's own bindings)."""
        self.call_later(self.query_one(JobsPane).run_action, action)

    @work(thread=True, exit_on_error=False, description="write the session report")
    def write_report(self) -> None:
        """The palette's "Session report": `sgltui report --save` for this session."""
        said, bad = sessionfiles.write_report(Path(self.local_session() or ""))
        level = "error" if bad else "information"
        self.call_from_thread(self.notify, said, severity=level, markup=False)

    def action_quit_app(self) -> None:
        running = self.fleet.cross.in_progress() if self.fleet is not None else []
        if running:
            # A pool across hosts is rolled by this app (no agent sees it whole): quitting
            # stops the roll where it is, so ask first.
            self.push_screen(
                Confirm(
                    f"{escape('; '.join(running))} is in progress here. Quitting stops it where "
                    "it is (a slot out of the gateway stays out until the roll is run again). "
                    "Quit?"
                ),
                lambda yes: self.exit(self.exit_note()) if yes else None,
            )
            return
        self.exit(self.exit_note())

    def exit_note(self) -> str | None:
        """What the user is told on quit: which servers keep running and how to stop them."""
        if self.source.read_only:
            return None
        return quitnote.exit_note(self.model, fleet=self.fleet is not None)

    def on_key(self, event: Key) -> None:
        # Profiles with a non-digit key (digits are real bindings, remappable by id). Typing in
        # an input must never swap a server.
        char = event.character
        if not char or char.isdigit() or isinstance(self.focused, Input):
            return
        if self.model.profiles_for_key(char) and not any(char in k.key.split(",") for k in KEYS):
            event.stop()
            self._key_pressed(char)

    # -- command palette ---------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from palette.commands(self)

    def key_of(self, binding_id: str) -> str:
        """The key bound to `binding_id` as a person reads it ("/" not "slash")."""
        keys = self.user_keymap.get(binding_id) or key_for(binding_id)  # KeyError: unknown
        first = keys.split(",")[0].strip()
        return self.get_key_display(Binding(first, binding_id))


def _done_text(reply: Any, done: str | None) -> str | None:
    """The toast after a command the agent accepted: `done`, with what its reply adds."""
    if isinstance(reply, protocol.BenchStarted):
        return f"bench {reply.run_id} started"
    if isinstance(reply, protocol.DemoLoadReply):
        return f"demo load {'on' if reply.on else 'off'}"
    if isinstance(reply, protocol.Accepted) and reply.profile_changed and done:
        return f"{done} (its profile was edited since the launch: the new settings apply)"
    return done


def make_app(
    source: TuiSource,
    *,
    config: TuiConfig | None = None,
    theme: str | None = None,
    demo: bool = False,
    screenshot_dir: Path | None = None,
    own_client: str | None = None,
    load_user_themes: bool = True,
) -> SgltuiApp:
    """Build the app the way `sgltui`, `sgltui demo`, `sgltui replay` and the tests all do."""
    from sgltui.tui.themes import load_themes

    themes, errors = load_themes() if load_user_themes else ({}, [])
    app = SgltuiApp(
        source,
        config=config,
        theme=theme,
        themes=themes.values(),
        demo=demo,
        screenshot_dir=screenshot_dir,
        own_client=own_client,
    )
    app.theme_errors = errors
    return app
