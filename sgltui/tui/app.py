"""The sgltui Textual app: a client of the agent (or of a replayed session).

All state comes from the source (STATUS on connect, pushes after). One app-lifetime worker
consumes pushes and applies them to the model; panes are redrawn in one batch per tick, only
those whose data changed. Commands go to the source in workers, so no handler waits on I/O.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.events import Key, Resize
from textual.markup import escape
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input, OptionList, Static, TabbedContent, TabPane

from sgltui import protocol
from sgltui.agent.client_errors import Pinned
from sgltui.core import retry
from sgltui.core.files import private_dir, write_atomic
from sgltui.session.layout import SCREENSHOTS_DIR
from sgltui.tui import logtail, standby, topbar, views
from sgltui.tui import model as M
from sgltui.tui.bindings import ALL_KEYS, KEYS
from sgltui.tui.config import TuiConfig
from sgltui.tui.fleetsource import FleetSource, host_of
from sgltui.tui.logbuffer import LogBuffer, LogLine
from sgltui.tui.model import TuiModel
from sgltui.tui.screens import BenchDialog, Confirm, DrainChoice, HelpScreen, SlotOrPool
from sgltui.tui.source import SOURCE_ERRORS, MalformedReply, TuiSource, ask
from sgltui.tui.themes import DEFAULT_THEME
from sgltui.tui.widgets.activity import ActivityPane
from sgltui.tui.widgets.bench import BenchPane
from sgltui.tui.widgets.hosts import HostsPane
from sgltui.tui.widgets.insight import InsightPane
from sgltui.tui.widgets.jobs import JobsPane
from sgltui.tui.widgets.logs import LogPane
from sgltui.tui.widgets.memory import MemoryPane
from sgltui.tui.widgets.profiles import ProfilesPane
from sgltui.tui.widgets.slots import SlotsPane
from sgltui.tui.widgets.throughput import ThroughputPane

W = TypeVar("W", bound=Widget)

# Reconnecting to the agent: 0.5 s after it went away, doubling to 5 s (core/retry.py).
RECONNECT_FIRST_S, RECONNECT_MAX_S = 0.5, 5.0
# Actions that change servers or start work: disabled in a read-only (replay) source.
_MUTATING = {"start", "stop", "restart", "bench", "bench_stop", "toggle_demo_load", "profile_key"}
_ACTIVE = ("launching", "ready", "draining", "stopping")
FLUSH_DELAY_S = 0.1  # pushes arriving within this window are drawn in one go
HISTORY_S = 300.0  # the chart's window: what a re-attach asks the agent for
# A safety net for anything a missed event would leave stale, and the uptime (shown to the
# minute after the first). Every change an operator makes or sees arrives as a push at once.
STATUS_POLL_S = 15.0
# The Jobs tab, while on screen with a job running, reads the job in full this often (its
# events carry counts every 15 s; the rate, segments and ETA are the agent's).
JOBS_READ_S = 1.0


def recent_events(path: Path, limit: int = 200, max_bytes: int = 256 * 1024) -> list[dict]:
    """The last `limit` events of a session's events.jsonl (reads only its tail)."""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    if size > max_bytes:
        tail = tail[1:]  # the first line is cut
    out = []
    for line in tail[-limit:]:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


def bench_files(folder: Path, limit: int = 10) -> list[Path]:
    """The newest `limit` bench result files of a session, oldest first."""
    try:
        files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
    except OSError:
        return []
    return files[-limit:]


_FONT_URL = re.compile(r",\s*url\([^)]*\)\s*format\([^)]*\)")


def offline_svg(svg: str) -> str:
    """An exported screenshot that loads no font from the web: the @font-face rules keep
    only their local() sources, and the monospace fallbacks follow Fira Code."""
    svg = _FONT_URL.sub("", svg)
    return svg.replace(
        "font-family: Fira Code, monospace;",
        'font-family: "Fira Code", "DejaVu Sans Mono", Menlo, Consolas, monospace;',
    )


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__


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
        self._themes = list(themes)
        self.user_theme_names = {t.name for t in self._themes}
        self.demo_load = True  # `sgltui demo --no-load` turns the background load off
        self._theme_name = theme or self.config.theme or DEFAULT_THEME
        self._dirty: set[str] = set()
        self._panes: dict[type[Widget], Widget] = {}  # see _pane
        self._hidden_dirty: set[str] = set()
        self._bench_return: str | None = None  # areas of tabs not on screen, drawn when shown
        self._new_lines: list[LogLine] = []
        self._flush_scheduled = False
        self._status_scheduled = False
        self._demo_done = False
        self._bindings_state: str | None = None
        self._topbar = ""
        self._launch_of: dict[str, str] = {}  # slot -> launch id of the log lines shown last
        self._tail_read: dict[str, list[str]] = {}  # slot -> the lines its tail read on connect
        self._slots_seen: tuple[object, ...] = ()  # the figures the slots view shows, and -short
        self._jobs_read = False  # the Jobs tab has read the agent's jobs once
        self._host_errors: dict[str, str | None] = {}  # a fleet: each host's last error shown
        # The pool whose row the slots view has picked (a profile key rolls it), else None.
        self.picked_pool: str | None = None
        self.first_status = asyncio.Event()
        # The keymap in force (binding id -> keys): kept here, Textual's own copy is private.
        self.user_keymap: dict[str, str] = dict(self.config.keymap or {})

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("", id="topbar")
        with Horizontal(id="upper"):
            yield ProfilesPane(id="profiles")
            with Vertical(id="right"):
                yield MemoryPane(id="memory")
                yield ThroughputPane(id="chart")
        if self.fleet is not None:
            with Horizontal(id="fleet-row"):
                yield HostsPane(id="hosts")
                yield SlotsPane(id="slots")
        else:
            yield SlotsPane(id="slots")
        with TabbedContent(id="lower"):
            with TabPane("Logs", id="tab-logs"):
                yield LogPane(self.logbuf, key_of=self._key_of, id="logs")
            with TabPane("Bench", id="tab-bench"):
                yield BenchPane(id="bench")
            with TabPane("Activity", id="tab-activity"):
                yield ActivityPane(id="activity")
            with TabPane("Jobs", id="tab-jobs"):
                yield JobsPane(id="jobs")
            with TabPane("Insight", id="tab-insight"):
                yield InsightPane(id="insight")
        yield Footer()

    def on_mount(self) -> None:
        for theme in self._themes:
            self.register_theme(theme)
        self.theme = (
            self._theme_name if self._theme_name in self.available_themes else "textual-dark"
        )
        if self.user_keymap:
            self.set_keymap(self.user_keymap)
        self.query_one("#profiles").border_title = "profiles · server"
        self.query_one("#memory").border_title = "memory"
        self.query_one("#chart").border_title = "throughput · last 5 min"
        self._update_topbar()
        self._update_log_title()
        self.query_one("#profile-list").focus()
        self.consume_source()
        self.set_interval(STATUS_POLL_S, self._poll_status, name="status poll")
        self.set_interval(JOBS_READ_S, self._jobs_tick, name="jobs read")
        if self.fleet is not None:
            self.query_one("#hosts").border_title = "hosts"
            self._mark(M.HOSTS)
            # A fleet always has the slots view: shown from the start, so `o` finds it before
            # the first host has answered (it said "one slot: no slots view" until then).
            self._pane(SlotsPane).display = True
            self.main_screen.set_class(True, "-slots")

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
                    self._on_push(push)
                if self.source.read_only:
                    return  # a replay that has ended keeps its last screen
                raise ConnectionError("the agent closed the connection")
            except asyncio.CancelledError:
                raise
            except SOURCE_ERRORS as exc:  # the link failed: show it and retry
                delay = backoff.failed()
                self.model.connected = False
                self.model.connection_note = (
                    f"agent unreachable: {one_line(exc)}; retrying every {delay:.0f}s"
                )
                self._mark(M.HEADER)
                try:
                    await self.source.close()
                except SOURCE_ERRORS:
                    pass
                await asyncio.sleep(delay)

    async def _on_connected(self, status: dict[str, Any]) -> None:
        # Ask for the profile list explicitly: it makes the agent re-read the profile files
        # (with our --profiles dirs), so edits and new files show up when the TUI opens.
        try:
            rows: list[protocol.ProfileRow] = await ask(self.source, "profiles")
            # The model keeps the STATUS's plain dicts; these rows take their place.
            status = {**status, "profiles": [protocol.to_builtins(r) for r in rows]}
        except MalformedReply as exc:  # the STATUS's own list stays
            self._bad_reply(exc)
        except SOURCE_ERRORS:
            pass
        self.model.connected = True
        self.model.connection_note = "connected"
        self._mark(M.HEADER, *self.model.apply_status(status))
        self.first_status.set()
        # Re-read the tail of each live server's log: lines written while we were away. (A
        # fleet's source sends each host's tails itself, as that host connects.)
        self.logbuf.clear()
        self._tail_read.clear()
        for slot in self.model.slots if self.fleet is None else []:
            if slot.state == protocol.SlotState.STOPPED and not slot.launch_id:
                continue
            sid = slot.id
            try:
                tail = await logtail.read_tail(self.source, sid)
            except MalformedReply as exc:
                self._bad_reply(exc)
                continue
            except SOURCE_ERRORS:
                continue
            self._new_lines.extend(self.logbuf.add(sid, tail.lines))
            self._tail_read[sid] = list(tail.lines[-500:])
            if tail.launch_id:
                self._launch_of[sid] = tail.launch_id
        self._redraw_logs = True
        self._mark(M.LOGS)
        await self._load_history()
        # Results of bench runs finished before this TUI opened (or while it was away).
        runs: list[protocol.BenchRun] = []
        try:
            runs = await ask(self.source, "bench_list")
        except MalformedReply as exc:
            self._bad_reply(exc)
        except SOURCE_ERRORS:
            pass
        for run in runs:
            if (
                run.run_id
                and run.path
                and run.state != protocol.BenchState.RUNNING
                # The status's latest run is already known, without its result: read it too
                # (the Bench tab stayed empty after a re-attach).
                and getattr(self.model.bench.get(run.run_id), "result", None) is None
            ):
                known = self.model.bench.get(run.run_id)
                if known is None:
                    self.model.bench[run.run_id] = M.BenchRun(
                        run.run_id, str(run.state), path=run.path
                    )
                else:
                    known.path = known.path or run.path
                self._read_bench_result(run.run_id, run.path)
        # Runs of this session the agent no longer lists (it restarted): their result files.
        session = self._local_session()
        if session and not self.source.read_only:
            for path in await asyncio.to_thread(bench_files, Path(session) / "bench"):
                known = self.model.bench.get(path.stem)
                if known is None:
                    self.model.bench[path.stem] = M.BenchRun(path.stem, "done", path=str(path))
                if known is None or (known.result is None and known.state != "running"):
                    self._read_bench_result(path.stem, str(path))
        if self.demo and not self._demo_done:
            self._demo_done = True
            self.run_worker(
                self._start_demo(), group="ops", exit_on_error=False, description="demo start"
            )

    async def _load_history(self) -> None:
        """What the agent holds from before this TUI opened (a re-attach): the last minutes
        of the chart, and the Activity of the session's recent events."""
        series: dict[str, list[tuple[float, float | None]]] = {}
        try:
            names = [f"engine.{sid}.*" for sid in self.model.slot_ids]
            reply: protocol.TimelineReply = await ask(
                self.source, "timeline", series=names, since=self.model.clock() - HISTORY_S
            )
            series = reply.series
        except MalformedReply as exc:
            self._bad_reply(exc)
        except SOURCE_ERRORS:  # an agent without the op, a replay: the chart starts empty
            pass
        session = self._local_session()
        events = []
        if session and not self.source.read_only:
            events = await asyncio.to_thread(recent_events, Path(session) / "events.jsonl")
        self._mark(*M.load_history(self.model, {"series": series}, events))

    def _local_session(self) -> str | None:
        """The agent's session directory when it is on this machine (a fleet's hosts keep
        theirs on their own disks: screenshots go to the current directory)."""
        return self.model.session_dir if self.fleet is None else None

    def _bad_reply(self, exc: MalformedReply) -> None:
        """A reply the app cannot read: one line, and the app goes on without it."""
        self.notify(one_line(exc), title="agent reply", severity="warning", markup=False)

    def _on_push(self, push: dict[str, Any]) -> None:
        if push.get("push") == "logs":  # a tick's lines of every slot (agent/logbatch.py)
            for data in push.get("data") or []:
                if isinstance(data, dict):
                    self._on_push({"push": "log", "data": data})
            return
        if push.get("push") == "note":
            # A line of an op the source runs itself (a fleet.toml pool's roll): a toast, and
            # the Activity tab (the model adds it).
            data = push.get("data") or {}
            error = data.get("level") == "error"
            self.notify(
                str(data.get("text") or ""),
                title=str(data.get("title") or ""),
                severity="error" if error else "information",
                timeout=10 if error else 4,
                markup=False,
            )
        if push.get("push") == "fleet" and self.fleet is not None:
            # A host connected, dropped or changed: its row, and a STATUS merged afresh.
            self.fleet.fleet_read()
            self._mark(M.HOSTS)
            self._refresh_status_soon()
            for h in self.fleet.hosts:  # why a host went down: once, when it does
                error = None if h.reachable else h.error
                if error and error != self._host_errors.get(h.name):
                    self.notify(error, title="host unreachable", severity="warning", markup=False)
                self._host_errors[h.name] = error
            return
        areas = self.model.apply_push(push)
        if push.get("push") == "log":
            data = push.get("data") or {}
            slot, launch = str(data.get("slot") or self.model.current_id), data.get("launch_id")
            added = []
            if launch and self._launch_of.get(slot) not in (None, launch):
                # A new server's output follows: mark where, so a swap reads clearly in the tail.
                added = self.logbuf.add(slot, [f"──── {launch} ────"])
            if launch:
                self._launch_of[slot] = launch
            lines = list(data.get("lines") or [])
            read = self._tail_read.pop(slot, None)
            if read:
                # The first push after connecting starts with the lines the tail read ended
                # with: the agent pushed them too, queued while the tail was read (a first
                # launch's lines showed twice). Dropped only where the push covers the tail's
                # whole end, so a line that merely repeats (a batch line) is kept.
                lines = lines[_overlap(read, lines) :]
            added += self.logbuf.add(slot, lines)
            if self._log_changed_by(added):
                self._new_lines.extend(added)
            else:  # lines the pane would not show (folded, filtered): kept in the buffer only
                areas = areas - {M.LOGS}
        self._mark(*areas)
        if push.get("push") == "event":
            ev = push.get("data") or {}
            if ev.get("type") == "bench.done" and ev.get("path"):
                self._read_bench_result(ev.get("run_id", ""), ev["path"])
            if ev.get("type") == "bench.done" and self._bench_return:
                self.set_timer(1.0, self._bench_finished)  # after the status shows the slot
            # Live only: in a replay every recorded command is "another client's" and the toasts
            # would bury the screen (the Activity tab lists them all the same).
            if (
                ev.get("client")
                and ev.get("client") != self.model.own_client
                and ev.get("type") == "command"
                and not self.source.read_only
            ):
                self.notify(
                    f"{ev.get('client')}: {ev.get('op')}",
                    title="command from another client",
                    timeout=4,
                    markup=False,
                )
        if self.model.needs_status_refresh(push):
            self._refresh_status_soon()
        if self.model.job_needs_reading(push) and self._jobs_shown():
            self._read_jobs()

    def _log_changed_by(self, lines: list[LogLine]) -> bool:
        try:
            return self._pane(LogPane).changed_by(lines)
        except NoMatches:  # shutting down
            return False

    def _mark(self, *areas: str) -> None:
        if not areas:
            return  # nothing changed: no timer, no flush
        self._dirty.update(areas)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            # A name of its own: without one, Textual names the timer after repr(app), which
            # costs more than the flush it schedules (once a second).
            self.set_timer(FLUSH_DELAY_S, self._flush_dirty, name="flush")

    def _refresh_status_soon(self) -> None:
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
        self._mark(*self.model.apply_status(status))

    @work(thread=True, exit_on_error=False, description="read bench result")
    def _read_bench_result(self, run_id: str, path: str) -> None:
        try:
            result = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            self.call_from_thread(
                self.notify,
                f"cannot read bench result {path}: {one_line(exc)}",
                severity="warning",
                markup=False,
            )
            return
        self.call_from_thread(lambda: self._mark(*self.model.set_bench_result(run_id, result)))

    # -- drawing -----------------------------------------------------------------------------

    def _flush_dirty(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        # The Activity tab is drawn when shown: a hidden RichLog still lays the whole screen
        # out on every write (an event every few seconds).
        try:
            active = self.query_one(TabbedContent).active
            for area, tab in ((M.ACTIVITY, "tab-activity"), (M.JOBS, "tab-jobs")):
                if area in dirty and active != tab:
                    dirty.discard(area)
                    self._hidden_dirty.add(area)
            self._draw(dirty)
        except NoMatches:
            pass  # the app is shutting down and its panes are already gone

    def _pane(self, cls: type[W]) -> W:
        """The app's one pane of a class, looked up once: a DOM query per pane and per draw
        cost a tenth of an idle second's drawing."""
        found = self._panes.get(cls)
        if found is None or not found.is_attached:  # (shutting down: query_one says so)
            found = self._panes[cls] = self.query_one(cls)
        return cast(W, found)

    def _draw(self, dirty: set[str]) -> None:
        m = self.model
        if M.SERVERS in dirty:
            current = m.current
            self._pane(ProfilesPane).show(m.profiles, m.slots, current)
            state = current.state if current else None
            if state != self._bindings_state:  # the footer rebuilds itself on refresh_bindings
                self._bindings_state = state
                self.refresh_bindings()
            # Several slots: log lines say whose; a slot picked in the slots view shows its own.
            only = m.current_id if m.several and m.selected is not None else None
            if (self.logbuf.tag_slots, self.logbuf.only_slot) != (m.several, only):
                self.logbuf.tag_slots, self.logbuf.only_slot = m.several, only
                self._redraw_logs = True
                dirty.add(M.LOGS)
        # (HOSTS: a fleet's host went down or came back, and its slots' rows say so)
        if m.several and dirty & {M.SERVERS, M.MEMORY, M.CHART, M.HOSTS}:
            self._draw_slots(bool(dirty & {M.SERVERS, M.HOSTS}))
        elif M.SERVERS in dirty and self.main_screen.has_class("-slots"):
            self.main_screen.set_class(False, "-slots")  # back to one slot: the one-slot screen
            self._pane(SlotsPane).display = False
        if dirty & {M.MEMORY, M.SERVERS}:  # SERVERS: a standby added or woken (its line)
            self._show_memory()
        if M.CHART in dirty:
            # The row shows while the server serving now is speculative: its latest sample,
            # not the last five minutes (a swap to a plain profile drops the row at once).
            accept = m.series_values("accept_length")
            has_spec = bool(accept) and accept[-1] > 0
            self._pane(ThroughputPane).show(m.series, has_spec, m.chart_marks(), m.chart_slots())
        if M.LOGS in dirty:
            pane = self._pane(LogPane)
            if getattr(self, "_redraw_logs", False):
                self._redraw_logs = False
                self._new_lines = []
                pane.redraw()
            elif self._new_lines:
                lines, self._new_lines = self._new_lines, []
                pane.append(lines)
        if M.ACTIVITY in dirty:
            self._pane(ActivityPane).show(list(m.activity), m.activity_total)
        if M.BENCH in dirty:
            self._pane(BenchPane).show(m.bench)
        if M.JOBS in dirty:
            self._pane(JobsPane).show(m.jobs, m.shown_job, m.jobs_error)
        if dirty & {M.MEMORY, M.SERVERS, M.BENCH}:
            self._pane(InsightPane).show(m)
        if dirty & {M.HEADER, M.SERVERS, M.HOSTS}:
            self._update_topbar()
        if self.fleet is not None and dirty & {M.HOSTS, M.SERVERS}:
            focus = host_of(m.current_id)
            self._pane(HostsPane).show(self.fleet.hosts, focus)
            title = f"memory · {focus}" if focus else "memory"
            if self._pane(MemoryPane).border_title != title:
                self._pane(MemoryPane).border_title = title

    def _show_memory(self) -> None:
        m, pane = self.model, self._pane(MemoryPane)
        if m.several and self.fleet is None and self.main_screen.has_class("-short"):
            # In the chart's place (m): the picked slot's GPUs, named in the title.
            sid = m.current_id
            pane.show(views.slot_memory(m.memory_view, m.current), m.slots)
            title = f"memory · slot {sid} (t: chart)" if sid else "memory"
            if pane.border_title != title:
                pane.border_title = title
        else:
            pane.show(m.memory_view, m.slots)

    def _draw_slots(self, servers: bool = True) -> None:
        """The slots view, shown from the second slot on (a one-slot screen is unchanged).
        A sample (`servers` False) whose figures are those on screen changes no row."""
        m = self.model
        figures = {s.id: views.slot_figures(s, m.engine(s.id), m.gpus_of(s.id)) for s in m.slots}
        seen = (figures, self.main_screen.has_class("-short"))
        if not servers and seen == self._slots_seen:
            return
        self._slots_seen = seen
        pane = self._pane(SlotsPane)
        if not pane.display:
            pane.display = True
            self.main_screen.set_class(True, "-slots")
        # The column names in the border, over the rows: a round border's corner and the
        # title's own space take two cells, a short screen's top line one.
        title = escape(views.SLOT_COLUMNS[1 if self.main_screen.has_class("-short") else 2 :])
        if pane.border_title != title:
            pane.border_title = title
        down = self.fleet.unreachable() if self.fleet is not None else None
        pane.show(m.slots, m.pools, figures, m.current_id, down, m.unmanaged)

    @on(SlotsPane.Picked)
    def _slot_picked(self, msg: SlotsPane.Picked) -> None:
        """A row of the slots view: the screen follows that slot (a pool's row: every slot's
        logs, the first slot's details; a profile key rolls that pool)."""
        self.picked_pool = msg.pool
        if msg.slot != self.model.selected:
            self.model.selected = msg.slot
            self._mark(M.SERVERS)
            host = host_of(msg.slot)
            if self.fleet is not None and host and host != self.fleet.focus_host:
                # Another host's slot: its GPUs, profiles and jobs follow (commands without a
                # slot go there too).
                self.fleet.focus_host = host
                self._mark(M.MEMORY)
                self._refresh_status_soon()

    def _update_topbar(self) -> None:
        m = self.model
        agent = m.agent
        # (markup, keep): a narrow terminal leaves out the parts of keep < 0, lowest first.
        parts: list[tuple[str, int]] = [("[b]sgltui[/]", 0)]
        if self.source.read_only:
            parts.append((f"[b $warning]{self.source.read_only_label}[/]", 0))
        if self.fleet is not None:
            hosts = self.fleet.hosts
            up = sum(1 for h in hosts if h.reachable)
            style = "$success" if up == len(hosts) else "$warning"
            parts.append((f"[{style}]● {up}/{len(hosts)} hosts reachable[/]", 0))
            focus = host_of(m.current_id) or self.fleet.focused()
            if focus:
                parts.append((f"host {escape(focus)}", -1))
        elif m.connected:
            parts.append(("[$success]● connected[/]", 0))
            if agent.pid:
                parts.append((f"agent pid {agent.pid}", -1))
            if agent.session_dir:
                parts.append((f"session {escape(Path(agent.session_dir).name)}", -2))
        else:
            parts.append((f"[$error]○ {escape(m.connection_note)}[/]", 0))
        if agent.demo_load:
            parts.append(("[b $warning]demo load running[/] (D: stop)", 0))
        if not agent.disk.ok:
            parts.append((f"[b $error]disk: {escape(str(agent.disk.error))}[/]", 0))
        text = topbar.fit(parts, self.size.width - 2)  # the bar's padding: one cell each side
        if text != self._topbar:
            self._topbar = text
            self.query_one("#topbar", Static).update(text, layout=False)

    def _update_log_title(self) -> None:
        # The tab label is the log pane's title: filter, level and follow state at a glance.
        tab = self.query_one(TabbedContent).get_tab("tab-logs")
        text = self.query_one(LogPane).describe()
        tab.label = text[:1].upper() + text[1:]

    @on(TabbedContent.TabActivated)
    def _tab_shown(self) -> None:
        if self._hidden_dirty:
            areas, self._hidden_dirty = self._hidden_dirty, set()
            self._mark(*areas)
        if self._jobs_shown() and self.model.connected:
            self._read_jobs()

    # -- batch jobs (the Jobs tab renders the model; the app reads and commands) -------------

    def _jobs_shown(self) -> bool:
        try:
            return self.query_one(TabbedContent).active == "tab-jobs"
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
            self.model.jobs_error = one_line(exc)
            self._mark(M.JOBS)
            return
        self._jobs_read = True
        if changed or not self.model.jobs:
            self._mark(M.JOBS)

    @on(JobsPane.Command)
    def _job_command(self, msg: JobsPane.Command) -> None:
        """Space, + and - on the job shown: the model changes at once (keys pressed faster than
        the agent answers build on each other: + + doubles twice), then the agent is told."""
        view = self.model.jobs.get(msg.job_id)
        if view is None:
            return
        if msg.what == "pause":
            paused = view.state == protocol.JobState.PAUSED
            op = "job_resume" if paused else "job_pause"
            state = protocol.JobState.RUNNING if paused else protocol.JobState.PAUSED
            self.model.expect_job(view.id, state=state)
            args: dict[str, Any] = {"job": view.id}
        else:
            cur = max(1, view.concurrency)
            new = max(1, int(round(cur * msg.factor)))
            if new == cur:
                new = cur + 1 if msg.factor > 1 else max(1, cur - 1)
            self.model.expect_job(view.id, concurrency=new)
            op, args = "job_set", {"job": view.id, "concurrency": new}
        self._draw({M.JOBS})

        async def send() -> None:
            try:
                await ask(self.source, op, **args)
            except SOURCE_ERRORS as exc:  # the agent's one-line refusal
                self.notify(one_line(exc), title=op, severity="warning", markup=False)
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
        panes = self.query(LogPane)
        if panes:
            self.call_after_refresh(panes.first().redraw)

    # -- actions -----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in _MUTATING and self.source.read_only:
            return False
        slot = self.model.current
        state = slot.state if slot else None
        if action == "start" and state in _ACTIVE:
            return None  # dimmed: a server runs; a profile key swaps instead
        if action in ("stop", "restart") and state not in _ACTIVE:
            return None
        return True

    def _slot_args(self) -> dict[str, Any]:
        """Where a command on the current slot goes: the slot by name (none known: the agent
        picks its only one)."""
        sid = self.model.current_id
        return {"slot": sid} if sid is not None else {}

    def _op(self, op: str, done: str | None = None, **args: Any) -> None:
        async def run() -> None:
            try:
                reply = await ask(self.source, op, **args)
            except MalformedReply as exc:  # sent, and maybe done: the status will say
                self._bad_reply(exc)
                self._refresh_status_soon()
                return
            except SOURCE_ERRORS as exc:
                if isinstance(exc, Pinned) and not args.get("confirm"):  # ask, then confirm
                    self._confirm_pinned(op, done, args, exc.message)
                    return
                self.notify(
                    one_line(exc), title=f"{op} failed", severity="error", markup=False, timeout=8
                )
                return
            said = _done_text(reply, done)
            if said:
                self.notify(said, timeout=3, markup=False)
            self._refresh_status_soon()

        self.run_worker(run(), group="ops", exit_on_error=False, description=f"op {op}")

    def _confirm_pinned(self, op: str, done: str | None, args: dict[str, Any], why: str) -> None:
        """A batch job pinned to the slot: the swap asks first (the job pauses and resumes on
        the new server when it goes ahead)."""

        def chosen(yes: bool | None) -> None:
            if yes:
                self._op(op, done=done, **{**args, "confirm": True})

        self.push_screen(
            Confirm(
                f"{escape(why)}.\nIt pauses, then resumes on the new server.\n\n"
                f"{op.capitalize()} anyway?"
            ),
            chosen,
        )

    def _down_refusal(self, slot_id: str | None) -> bool:
        """A slot of a fleet's host that is down: refused at once, in the line the source gives
        (its row is what the host said last; nothing can reach it)."""
        host = host_of(slot_id)
        if self.fleet is None or host is None or host not in self.fleet.unreachable():
            return False
        why = self.fleet.refusal(host) or f"host {host} is unreachable"
        self.notify(why, title="not sent", severity="warning", markup=False)
        return True

    def _read_only_refusal(self) -> bool:
        if self.source.read_only:
            self.notify(f"{self.source.read_only_label}: commands are disabled", severity="warning")
            return True
        return False

    def action_profile_key(self, key: str) -> None:
        self._key_pressed(key)

    def _key_pressed(self, key: str) -> None:
        """A profile's hot-swap key: refused on a clash; asks before the launcher changes."""
        found = self.model.profiles_for_key(key)
        if not found:
            self.notify(f"no profile has key {key}", severity="warning", markup=False)
            return
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            self.notify(
                f"key {key} is given to {names}: it does nothing until each has its own key "
                "(`sgltui profiles validate`)",
                severity="error",
                markup=False,
                timeout=8,
            )
            return
        name = found[0].name
        if self._read_only_refusal():
            return
        picked = next((p for p in self.model.pools if p.name == self.picked_pool), None)
        if picked is not None and self.model.selected is None:
            # On a pool's row: the pool, one slot at a time (nothing to ask: the row says it).
            self._ask_launcher(name, lambda: self.swap_pool(name, picked.name))
            return
        if self._down_refusal(self.model.current_id):
            return
        pool = self.model.pool_of(self.model.current_id or "")
        if pool is not None and len(pool.slots) > 1:
            # Several slots behind one endpoint: this slot alone, or the pool one slot at a time.
            def where(choice: str | None) -> None:
                if choice == "pool":
                    self._ask_launcher(name, lambda: self.swap_pool(name, pool.name))
                elif choice == "slot":
                    self._ask_launcher(name, lambda: self.swap_to(name))

            sid = self.model.current_id or "?"
            self.push_screen(SlotOrPool(name, sid, pool.name, len(pool.slots)), where)
            return
        self._ask_launcher(name, lambda: self.swap_to(name))

    def _ask_launcher(self, name: str, go: Callable[[], None]) -> None:
        """sim -> real SGLang (or back) is a different machine's worth of work: ask first."""
        slot = self.model.current
        current = slot.profile if slot and slot.state in _ACTIVE else None
        now = self.model.profile(current)
        was = slot.resolved.launcher if slot and slot.resolved else None
        was = was or (now.launcher if now else None)
        target = self.model.profile(name)
        new = target.launcher if target else None
        if current and was and new and was != new and current != name:
            self.push_screen(
                Confirm(
                    f"Replace [b]{escape(str(current))}[/] ({escape(_launcher_word(was))}) with "
                    f"[b]{escape(name)}[/] ({escape(_launcher_word(new))})?"
                ),
                lambda yes: self._if_yes(yes, go),
            )
            return
        go()

    @staticmethod
    def _if_yes(yes: bool | None, act: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        """A confirmation's callback: act only on yes."""
        if yes:
            act(*args, **kwargs)

    def swap_to(self, name: str) -> None:
        """Start `name`, or swap the current slot to it: the agent's preflight checks run first
        (a target that cannot start is refused before any dialog or stop), then it asks how to
        treat requests in flight."""
        if self._read_only_refusal() or self._down_refusal(self.model.current_id):
            return
        slot = self.model.current
        state = slot.state if slot else None
        if slot and slot.swap:
            self.notify("a swap is already in progress", severity="warning")
            return
        if slot and slot.profile == name and state in ("launching", "ready"):
            self.notify(f"{name} is already {state}", markup=False)
            return
        where = self._slot_args()

        async def check() -> None:
            try:
                res: protocol.PreflightReply = await ask(
                    self.source, "preflight", profile=name, **where
                )
            except SOURCE_ERRORS as exc:  # shown (a malformed reply too); nothing is started
                self.notify(one_line(exc), title="preflight", severity="error", markup=False)
                return
            if not res.ok:
                self._preflight_refused(name, where, res)
                return
            self._swap_checked(name, where)

        self.run_worker(check(), group="ops", exit_on_error=False, description="preflight")

    def _preflight_refused(
        self, name: str, where: dict[str, Any], res: protocol.PreflightReply
    ) -> None:
        """A failed check: what failed and its fix, and a dialog whose Yes skips that check
        (the agent's line ends with the CLI's `--force CHECK`, no use to someone in the TUI)."""
        bad = next((c for c in res.checks if not c.ok and not c.skipped), None)
        if bad is None:
            self.notify(
                res.error or f"{name} would not start: its preflight checks failed",
                title="not started",
                severity="error",
                markup=False,
                timeout=10,
            )
            return
        fix = f"; {bad.fix}" if bad.fix else ""
        question = (
            f"[b]{escape(name)}[/] would not start: {escape(bad.message + fix)}\n\n"
            f"Start it anyway, skipping the {escape(bad.name)} check?"
        )

        def chosen(yes: bool | None) -> None:
            if yes:
                self._swap_checked(name, dict(where, force=[bad.name]))

        self.push_screen(Confirm(question), chosen)

    def _swap_checked(self, name: str, where: dict[str, Any]) -> None:
        sid = where.get("slot")
        slot = self.model.slot(sid) if sid is not None else self.model.current
        state = slot.state if slot else None
        if state not in _ACTIVE:
            self._op("start", done=f"starting {name}", profile=name, **where)
            return
        running = self.model.running_requests(slot.id) if slot else 0
        if running > 0:

            def chosen(drain: str | None) -> None:
                if drain:
                    self._op(
                        "swap",
                        done=f"swapping to {name} ({drain})",
                        profile=name,
                        drain=drain,
                        **where,
                    )

            self.push_screen(
                DrainChoice(
                    f"Swap to {name}",
                    str(slot and slot.profile),
                    running,
                    live=lambda: self.model.running_requests(slot.id) if slot else 0,
                ),
                chosen,
            )
            return
        self._op("swap", done=f"swapping to {name}", profile=name, drain="wait", **where)

    def swap_pool(self, name: str, pool: str) -> None:
        """Swap every slot of `pool` to `name`, one slot at a time (the agent rolls it: each
        slot leaves the gateway, drains its own requests, swaps and comes back before the
        next); slots that run nothing are started. Requests keep flowing to the others, so
        nothing asks how to drain."""
        if self._read_only_refusal():
            return
        slots = [s for s in self.model.slots if s.id in self.model.pool_slots(pool)]
        if any(s.swap for s in slots):
            self.notify(f"a swap is already in progress in pool {pool}", severity="warning")
            return
        row = next((p for p in self.model.pools if p.name == pool), None)
        # A fleet.toml pool whose gateway is not up is started (`up`), its slots ready or not.
        not_up = (
            row is not None and row.across_hosts and (row.gateway is None or not row.gateway.pid)
        )
        if slots and all(s.state in _ACTIVE for s in slots) and not not_up:
            self._op("swap", done=f"rolling pool {pool} to {name}", profile=name, pool=pool)
        elif not_up:  # still "swap": the fleet source, whose view is fresher, rolls it if up
            self._op("swap", done=f"starting {name} on pool {pool}", profile=name, pool=pool)
        else:
            self._op("start", done=f"starting {name} on pool {pool}", profile=name, pool=pool)

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

    def _active_profile(self) -> str | None:
        """The profile running in the current slot, or None after telling the user why nothing
        happens."""
        if self._read_only_refusal() or self._down_refusal(self.model.current_id):
            return None
        slot = self.model.current
        if not slot or slot.state not in _ACTIVE:
            self.notify(f"no server is running in slot {self.model.current_id or '-'}")
            return None
        return str(slot.profile)

    def action_stop(self) -> None:
        name = self._active_profile()
        if name is None:
            return
        where = self._slot_args()
        running = self.model.running_requests(where.get("slot", ""))
        if running > 0:

            def chosen(drain: str | None) -> None:
                if drain:
                    self._op("stop", done=f"stopping {name} ({drain})", drain=drain, **where)

            sid = str(where.get("slot", ""))
            live = lambda: self.model.running_requests(sid)  # noqa: E731
            self.push_screen(DrainChoice(f"Stop {name}", name, running, live=live), chosen)
        elif self.config.confirm_stop:
            self.push_screen(
                Confirm(f"Stop [b]{escape(name)}[/]? No requests are in flight."),
                lambda yes: self._if_yes(
                    yes, self._op, "stop", done=f"stopping {name}", drain="wait", **where
                ),
            )
        else:
            self._op("stop", done=f"stopping {name}", drain="wait", **where)

    def action_attach_found(self) -> None:
        """Attach the highlighted 'not managed' row's server (else the only one found)."""
        found = self.model.unmanaged
        pid = self._pane(SlotsPane).found_pid()
        pick = [u for u in found if u.pid == pid] or (found if len(found) == 1 else [])
        if not pick:
            self.notify(
                "no server to attach: move onto a dimmed 'not managed' row"
                if found
                else "no server of yours runs outside sgltui"
            )
            return
        u = pick[0]
        if not u.url or u.note:
            self.notify(f"cannot attach pid {u.pid}: {u.note or 'it does not listen yet'}")
            return
        self._op("attach", done=f"attaching {u.url}", url=u.url)

    def action_restart(self) -> None:
        name = self._active_profile()
        if name is None:
            return
        where = self._slot_args()
        running = self.model.running_requests(where.get("slot", ""))
        question = f"Restart [b]{escape(name)}[/]?" + (
            f" {running} request(s) in flight will be cut." if running else ""
        )
        self.push_screen(
            Confirm(question),
            lambda yes: self._if_yes(yes, self._op, "restart", done=f"restarting {name}", **where),
        )

    def action_keep_warm(self) -> None:
        """k: keep the highlighted profile warm on the current slot (tui/standby.py asks)."""
        name = self.query_one(ProfilesPane).highlighted_profile()
        if name is None or self._read_only_refusal():
            return
        slot = self.model.current
        refused = standby.refusal(name, slot)
        if refused:
            self.notify(refused, severity="warning")
            return
        took = standby.last_start_s(self.model.state, name)
        where = self._slot_args()
        self.push_screen(
            Confirm(standby.question(name, slot, took)),
            lambda yes: self._if_yes(
                yes, self._op, "standby_add", done=f"keeping {name} warm", profile=name, **where
            ),
        )

    def action_bench(self) -> None:
        if self._read_only_refusal():
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

        recent = [v for v in self.model.series_values("gen_throughput")[-60:] if v > 0]
        self.push_screen(
            BenchDialog(
                [current] if current else [],
                max(recent) if recent else None,
                views.per_request_rate(
                    self.model.series_values("gen_throughput"),
                    self.model.series_values("running"),
                ),
                current,
                views.measured_rates(self.model.bench.values()),
            ),
            chosen,
        )

    def _bench_finished(self) -> None:
        """After a bench that swapped profiles: back to the profile the slot had, if asked."""
        back, self._bench_return = self._bench_return, None
        slot = self.model.current
        now = slot.profile if slot else None
        if not back or now == back or self.source.read_only:
            return
        self.push_screen(
            Confirm(
                f"The bench is done; slot {escape(slot.id if slot else '-')} now runs "
                f"[b]{escape(str(now))}[/]. Swap back to [b]{escape(back)}[/], the profile it had?"
            ),
            lambda yes: self._if_yes(yes, self.swap_to, back),
        )

    def action_bench_stop(self) -> None:
        running = [r for r in self.model.bench.values() if r.state == "running"]
        if not running:
            self.notify("no bench run in progress")
            return
        self._op("bench_stop", done="bench stopped", run_id=running[-1].run_id)

    def action_toggle_demo_load(self) -> None:
        on = not self.model.demo_load
        self._op("demo_load", done=f"demo load {'on' if on else 'off'}", on=on)

    async def _start_demo(self) -> None:
        demo = sorted(
            (p for p in self.model.profiles if p.name.startswith("demo-") and p.key),
            key=lambda p: str(p.key),
        )
        if not demo:
            self.notify("no demo profiles found (profiles/demo)", severity="error")
            return
        idle = [s for s in self.model.slots if s.state not in _ACTIVE]
        # A demo of several GPUs starts the first profile on each slot (a pool: all at once).
        pools = {p.name for s in idle if (p := self.model.pool_of(s.id)) is not None}
        starts: list[dict[str, Any]] = [{"pool": p} for p in sorted(pools)]
        starts += [{"slot": s.id} for s in idle if self.model.pool_of(s.id) is None]
        for where in starts:
            try:
                await ask(self.source, "start", profile=demo[0].name, **where)
            except SOURCE_ERRORS as exc:
                self.notify(
                    one_line(exc), title="demo start failed", severity="error", markup=False
                )
                return
        if len(demo) > 1 and len(starts) == 1:  # the warm swap, offered (agent/standby.py)
            self.notify(
                f"k on {demo[1].name} keeps it warm beside {demo[0].name}: "
                "a swap to it then takes seconds",
                title="tip",
                timeout=10,
                markup=False,
            )
        if not self.demo_load:
            self._refresh_status_soon()
            return
        try:
            await ask(self.source, "demo_load", on=True)
        except SOURCE_ERRORS as exc:
            self.notify(one_line(exc), title="demo load failed", severity="warning", markup=False)
        self._refresh_status_soon()

    def action_focus_pane(self, pane: str) -> None:
        tabs = {
            "logs": "tab-logs",
            "bench": "tab-bench",
            "activity": "tab-activity",
            "jobs": "tab-jobs",
            "insight": "tab-insight",
        }
        if pane in tabs:
            self.query_one(TabbedContent).active = tabs[pane]
            target = {
                "logs": "#log-view",
                "bench": "#bench-table",
                "activity": "#activity",
                "jobs": "#jobs",
                "insight": "#insight",
            }[pane]
            self.call_after_refresh(self.query_one(target).focus)
        elif pane == "profiles":
            self.query_one("#profile-list").focus()
        elif pane in ("memory", "chart"):
            # A short screen with several slots has room for one of the two: the key picks
            # which (app.tcss, -memory); elsewhere both are shown and it only focuses.
            self.main_screen.set_class(pane == "memory", "-memory")
            self._mark(M.MEMORY)
            widget = self.query_one(MemoryPane if pane == "memory" else ThroughputPane)
            self.call_after_refresh(widget.focus)
        elif pane == "slots":
            slots = self.query_one(SlotsPane)
            if slots.display:
                slots.focus()
            else:
                self.notify("one slot: no slots view (host.toml places servers on GPUs)")

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
            key = self._key_of("logs.search")
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

    def action_help(self) -> None:
        self.push_screen(
            HelpScreen({k.id: self._key_of(k.id) for k in ALL_KEYS}, self.model.profiles)
        )

    def action_screenshot_to_session(self) -> None:
        # Toasts (the last command's "swapping to ...") are not part of the screen: clear
        # them and take the screenshot once the screen is repainted without them.
        self.clear_notifications()
        self.call_after_refresh(self._take_screenshot)

    def _take_screenshot(self) -> None:
        svg = offline_svg(self.export_screenshot())
        session = self._local_session()
        in_session = self.screenshot_dir is None and bool(session)
        folder = self.screenshot_dir or (Path(session) / SCREENSHOTS_DIR if session else Path.cwd())
        name = time.strftime("sgltui-%Y%m%d-%H%M%S.svg")
        self._write_screenshot(folder, name, svg, in_session)

    @work(thread=True, exit_on_error=False, description="write screenshot")
    def _write_screenshot(self, folder: Path, name: str, svg: str, in_session: bool) -> None:
        try:
            # The session's folders are private; a folder the user chose keeps its own mode.
            if in_session:
                private_dir(folder)
            else:
                folder.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / name, svg)
        except OSError as exc:
            self.call_from_thread(
                self.notify,
                f"screenshot not saved: {exc.strerror} ({folder})",
                severity="error",
                markup=False,
            )
            return
        self.call_from_thread(self.notify, f"screenshot saved: {folder / name}", markup=False)

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
                lambda yes: self._if_yes(yes, lambda: self.exit(self.exit_note())),
            )
            return
        self.exit(self.exit_note())

    def exit_note(self) -> str | None:
        """What the user is told on quit: which servers keep running and how to stop them."""
        if self.source.read_only:
            return None
        running = [s for s in self.model.slots if s.state in _ACTIVE]
        demo = ""
        if self.model.demo_load:
            demo = " The demo load keeps running too; `sgltui demo --stop` stops it and the demo servers."
        if not running:
            return (
                "sgltui: closed; no server is running (the agent stays up; `sgltui agent stop` ends it)."
                + demo
            )
        desc = ", ".join(
            f"slot {s.id}: {s.profile} {s.state} on {s.host}:{s.port}" for s in running
        )
        if self.fleet is not None:  # each host's servers are stopped by that host's sgltui
            return (
                f"sgltui: closed; servers keep running ({desc}). Reopen with `sgltui`; stop one "
                "with `sgltui --host HOST stop --slot SLOT`."
            )
        return (
            f"sgltui: closed; servers keep running ({desc}). Reopen with `sgltui`; stop with "
            f"`sgltui stop`.{demo}"
        )

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
        for k in KEYS:
            if k.id == "app.quit" or self.check_action(k.action.split("(")[0], ()) is False:
                continue
            yield SystemCommand(
                f"{k.description} ({self._key_of(k.id)})",
                k.tooltip,
                lambda a=k.action: self.call_later(self.run_action, a),
            )
        if not self.source.read_only:
            sid = self.model.current_id or "-"
            for p in self.model.profiles:
                key = f" ({p.key})" if p.key else ""
                yield SystemCommand(
                    f"Swap to {p.name}{key}",
                    p.description or f"start or swap slot {sid}",
                    lambda n=p.name: self.swap_to(n),
                )
        if self.fleet is not None:
            yield SystemCommand(
                "Retry unreachable hosts now",
                "Each host that is down tries its ssh again now, not at the end of its backoff",
                self.fleet.retry_now,
            )
        yield SystemCommand(
            "Quit sgltui (servers keep running)",
            "Close the TUI; the agent and servers stay up",
            self.action_quit_app,
        )

    def _key_of(self, binding_id: str) -> str:
        """The key bound to `binding_id` as a person reads it ("/" not "slash")."""
        keys = self.user_keymap.get(binding_id) or next(
            k.key for k in ALL_KEYS if k.id == binding_id
        )
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


def _launcher_word(launcher: str) -> str:
    return {"sim": "simulator", "sglang": "real SGLang"}.get(launcher, launcher)


def _overlap(tail: list[str], pushed: list[str]) -> int:
    """How many of `pushed`'s first lines are `tail`'s last ones (the longest such run)."""
    for start in range(max(0, len(tail) - len(pushed)), len(tail)):
        end = tail[start:]
        if pushed[: len(end)] == end:
            return len(end)
    return 0


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
