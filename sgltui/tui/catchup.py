"""What the app reads when it connects to the agent (or reconnects): the profiles afresh, each
live server's log tail, the chart's last minutes, the Activity of recent events and the bench
results; and `sgltui demo`'s first start. The app is reached through CatchUpHost.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol

from sgltui import protocol
from sgltui.tui import logtail
from sgltui.tui import model as M
from sgltui.tui.fleetsource import FleetSource
from sgltui.tui.fmt import one_line
from sgltui.tui.logfeed import LogFeed
from sgltui.tui.model import ACTIVE
from sgltui.tui.notifies import Notifies
from sgltui.tui.sessionfiles import bench_files, recent_events
from sgltui.tui.source import SOURCE_ERRORS, MalformedReply, TuiSource, ask

HISTORY_S = 300.0  # the chart's window: what a re-attach asks the agent for


class CatchUpHost(Notifies, Protocol):
    """What connecting needs of the app."""

    model: M.TuiModel
    source: TuiSource
    logfeed: LogFeed
    fleet: FleetSource | None
    first_status: asyncio.Event
    demo_load: bool  # `sgltui demo --no-load` turns the background load off

    def mark(self, *areas: str) -> None: ...

    def bad_reply(self, exc: MalformedReply) -> None: ...

    def read_bench_result(self, run_id: str, path: str) -> object: ...

    def local_session(self) -> str | None: ...

    def refresh_status_soon(self) -> None: ...


async def on_connected(host: CatchUpHost, status: dict[str, Any]) -> None:
    """A (re)connect: the STATUS, the profiles re-read, each live server's log tail, the
    chart's history and the bench results the Bench tab has not shown."""
    # Ask for the profile list explicitly: it makes the agent re-read the profile files
    # (with our --profiles dirs), so edits and new files show up when the TUI opens.
    try:
        rows: list[protocol.ProfileRow] = await ask(host.source, "profiles")
        # The model keeps the STATUS's plain dicts; these rows take their place.
        status = {**status, "profiles": [protocol.to_builtins(r) for r in rows]}
    except MalformedReply as exc:  # the STATUS's own list stays
        host.bad_reply(exc)
    except SOURCE_ERRORS:
        pass
    host.model.connected = True
    host.model.connection_note = "connected"
    host.mark(M.HEADER, *host.model.apply_status(status))
    host.first_status.set()
    # Re-read the tail of each live server's log: lines written while we were away. (A
    # fleet's source sends each host's tails itself, as that host connects.)
    host.logfeed.restart()
    for slot in host.model.slots if host.fleet is None else []:
        if slot.state == protocol.SlotState.STOPPED and not slot.launch_id:
            continue
        try:
            tail = await logtail.read_tail(host.source, slot.id)
        except MalformedReply as exc:
            host.bad_reply(exc)
            continue
        except SOURCE_ERRORS:
            continue
        host.logfeed.add_tail(slot.id, tail)
    host.logfeed.redraw = True
    host.mark(M.LOGS)
    await load_history(host)
    await load_bench_results(host)


async def load_bench_results(host: CatchUpHost) -> None:
    """Results of bench runs finished before this TUI opened (or while it was away)."""
    runs: list[protocol.BenchRun] = []
    try:
        runs = await ask(host.source, "bench_list")
    except MalformedReply as exc:
        host.bad_reply(exc)
    except SOURCE_ERRORS:
        pass
    for run in runs:
        if (
            run.run_id
            and run.path
            and run.state != protocol.BenchState.RUNNING
            # The status's latest run is already known, without its result: read it too
            # (the Bench tab stayed empty after a re-attach).
            and getattr(host.model.bench.get(run.run_id), "result", None) is None
        ):
            known = host.model.bench.get(run.run_id)
            if known is None:
                host.model.bench[run.run_id] = M.BenchRun(run.run_id, str(run.state), path=run.path)
            else:
                known.path = known.path or run.path
            host.read_bench_result(run.run_id, run.path)
    # Runs of this session the agent no longer lists (it restarted): their result files.
    session = host.local_session()
    if session and not host.source.read_only:
        for path in await asyncio.to_thread(bench_files, Path(session) / "bench"):
            known = host.model.bench.get(path.stem)
            if known is None:
                host.model.bench[path.stem] = M.BenchRun(path.stem, "done", path=str(path))
            if known is None or (known.result is None and known.state != "running"):
                host.read_bench_result(path.stem, str(path))


async def load_history(host: CatchUpHost) -> None:
    """What the agent holds from before this TUI opened (a re-attach): the last minutes
    of the chart, and the Activity of the session's recent events."""
    series: dict[str, list[tuple[float, float | None]]] = {}
    try:
        names = [f"engine.{sid}.*" for sid in host.model.slot_ids]
        reply: protocol.TimelineReply = await ask(
            host.source, "timeline", series=names, since=host.model.clock() - HISTORY_S
        )
        series = reply.series
    except MalformedReply as exc:
        host.bad_reply(exc)
    except SOURCE_ERRORS:  # an agent without the op, a replay: the chart starts empty
        pass
    session = host.local_session()
    events = []
    if session and not host.source.read_only:
        events = await asyncio.to_thread(recent_events, Path(session) / "events.jsonl")
    host.mark(*M.load_history(host.model, {"series": series}, events))


async def start_demo(host: CatchUpHost) -> None:
    """`sgltui demo`: the first demo profile on each idle slot (or pool), then the load."""
    demo = sorted(
        (p for p in host.model.profiles if p.name.startswith("demo-") and p.key),
        key=lambda p: str(p.key),
    )
    if not demo:
        host.notify("no demo profiles found (profiles/demo)", severity="error")
        return
    idle = [s for s in host.model.slots if s.state not in ACTIVE]
    # A demo of several GPUs starts the first profile on each slot (a pool: all at once).
    pools = {p.name for s in idle if (p := host.model.pool_of(s.id)) is not None}
    starts: list[dict[str, Any]] = [{"pool": p} for p in sorted(pools)]
    starts += [{"slot": s.id} for s in idle if host.model.pool_of(s.id) is None]
    for where in starts:
        try:
            await ask(host.source, "start", profile=demo[0].name, **where)
        except SOURCE_ERRORS as exc:
            host.notify(one_line(exc), title="demo start failed", severity="error", markup=False)
            return
    if len(demo) > 1 and len(starts) == 1:  # the warm swap, offered (agent/swap/standby.py)
        host.notify(
            f"k on {demo[1].name} keeps it warm beside {demo[0].name}: "
            "a swap to it then takes seconds",
            title="tip",
            timeout=10,
            markup=False,
        )
    if not host.demo_load:
        host.refresh_status_soon()
        return
    try:
        await ask(host.source, "demo_load", on=True)
    except SOURCE_ERRORS as exc:
        host.notify(one_line(exc), title="demo load failed", severity="warning", markup=False)
    host.refresh_status_soon()
