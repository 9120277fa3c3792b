"""The ops on the agent itself, not on a slot's lifecycle (agent/swap/operations.py), batch jobs
(agent/jobs/jobs_host.py), standbys (agent/swap/standby_ops.py) or servers sgltui did not start
(agent/slot/attach.py): hello, ping, status, the profile list, a server's log, the timeline,
subscribing, shutdown, serving a slot to another host, a remote pool's workers, bench runs and
the demo load. agent/op_routes.py routes each op to its handler here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from sgltui import __version__, protocol
from sgltui.agent.children import ChildError
from sgltui.agent.errors import OpError
from sgltui.agent.slot.slot import READY
from sgltui.session.layout import EVENTS_FILE, SERVERS_DIR

if TYPE_CHECKING:
    from sgltui.agent.children import Children
    from sgltui.agent.context import AgentContext
    from sgltui.agent.pools.exposure import Exposures
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.slot.discovery import Discovery

T = TypeVar("T")


EVENTS_TAIL = 200  # the `events` op's: as many as a TUI reads back when it opens (tui/catchup.py)


class AgentOps:
    def __init__(
        self,
        ctx: AgentContext,
        *,
        status: Callable[[], protocol.StatusReply],
        shutdown: Callable[[bool], None],
        discovery: Discovery,
        exposures: Exposures,
        pools: Pools,
        children: Children,
    ) -> None:
        self.ctx = ctx
        self.status = status  # the agent's whole status (Supervisor.status)
        self.shutdown = shutdown  # the agent stops soon, its servers with it when True
        self.discovery = discovery
        self.exposures = exposures
        self.pools = pools
        self.children = children  # the bench runs and the demo load

    async def op_hello(self, args: protocol.HelloArgs, client: str | None) -> protocol.HelloReply:
        problem = protocol.version_mismatch(
            __version__, protocol.PROTOCOL_VERSION, args.version, args.protocol
        )
        if problem:
            raise OpError(problem, "version")
        return protocol.HelloReply(
            version=__version__, protocol=protocol.PROTOCOL_VERSION, pid=os.getpid()
        )

    async def op_ping(self, args: protocol.Args, client: str | None) -> protocol.PingReply:
        return protocol.PingReply(pong=True, pid=os.getpid(), version=__version__)

    async def op_status(self, args: protocol.Args, client: str | None) -> protocol.StatusReply:
        await self.discovery.first()  # an agent just started has looked for servers once
        return self.status()

    async def op_profiles(
        self, args: protocol.ProfilesArgs, client: str | None
    ) -> list[protocol.ProfileRow]:
        return await asyncio.to_thread(self.ctx.catalog.refresh, args)

    async def op_slot_expose(
        self, args: protocol.ExposeArgs, client: str | None
    ) -> protocol.Exposed:
        """Serve a slot to another host's gateway (agent/pools/exposure.py): from its next launch."""
        ctx = self.ctx
        slot = ctx.slot_for(args)
        exp = await asyncio.to_thread(self.exposures.set, slot.id, args.address)
        if exp is not None:
            ctx.add_secret(exp.api_key)
        ctx.bus.publish(protocol.SlotExposed(client=client, slot=slot.id, address=args.address))
        applied = (
            slot.state == READY and slot.server_host == exp.address and slot.api_key == exp.api_key
            if exp is not None
            else slot.server_host == "127.0.0.1"
        )
        url = None
        if exp is not None and applied:
            host = f"[{exp.address}]" if ":" in exp.address else exp.address
            url = f"http://{host}:{slot.port}"
        return protocol.Exposed(
            slot=slot.id,
            url=url,
            api_key=exp.api_key if exp else None,
            applied=applied,
            profile=slot.profile_name if applied else None,
        )

    async def op_remote_pool(
        self, args: protocol.RemotePoolArgs, client: str | None
    ) -> protocol.PoolStatus:
        """A gateway here whose workers the fleet side names (agent/pools/pools.py, remote pools)."""
        for w in args.workers:
            if w.api_key:
                self.ctx.add_secret(w.api_key)
        return msgspec.convert(await self.pools.remote_set(args), protocol.PoolStatus)

    async def op_subscribe(
        self, args: protocol.SubscribeArgs, client: str | None
    ) -> protocol.Subscribed:
        return protocol.Subscribed(subscribed=True)  # the connection handler registers the queue

    async def op_logs(self, args: protocol.LogsArgs, client: str | None) -> protocol.LogsReply:
        ctx = self.ctx
        n = args.lines
        launch_id = args.launch_id
        path: Path | None
        if launch_id:
            if not re.fullmatch(r"[A-Za-z0-9._-]+", str(launch_id)):
                raise OpError(f"bad launch id {launch_id!r}", "invalid")
            path = ctx.server_log_path(str(launch_id))
        else:
            slot = ctx.slot_for(args)
            path = slot.log_path
            if path is None:
                logs = sorted(
                    Path(ctx.session.path, SERVERS_DIR).glob("*.log"),
                    key=lambda p: p.stat().st_mtime,
                )
                path = logs[-1] if logs else None
        if path is None or not Path(path).exists():
            raise OpError(
                "no server log yet in this session",
                "not_found",
                fix="start a profile first (`sgltui start PROFILE`)",
                tui="start a profile first (highlight it and press {key:server.start})",
            )
        lines = await asyncio.to_thread(_tail_file, Path(path), n)
        return protocol.LogsReply(
            lines=[ctx.redactor.text(ln) for ln in lines],
            path=str(path),
            launch_id=Path(path).stem,
        )

    async def op_timeline(
        self, args: protocol.TimelineArgs, client: str | None
    ) -> protocol.TimelineReply:
        tele = self.ctx.telemetry
        if tele is None:
            return protocol.TimelineReply(series={})
        series = tele.series(args.series, args.since)["series"]
        return protocol.TimelineReply(series=series)

    async def op_events(self, args: protocol.Args, client: str | None) -> list[dict[str, Any]]:
        """The session's last EVENTS_TAIL events as recorded (events.jsonl, redacted as
        written): what happened before a client came, for one that cannot read this host's
        files (`sgltui agent events`, a TUI over ssh)."""
        try:
            lines = await asyncio.to_thread(
                _tail_file, Path(self.ctx.session.path, EVENTS_FILE), EVENTS_TAIL
            )
        except FileNotFoundError:  # a session not written yet
            return []
        events = []
        for line in lines:
            with contextlib.suppress(ValueError):  # a line cut by a full disk
                ev = json.loads(line)
                if isinstance(ev, dict):
                    events.append(ev)
        return events

    async def op_shutdown(
        self, args: protocol.ShutdownArgs, client: str | None
    ) -> protocol.ShutdownReply:
        self.shutdown(args.stop_servers)
        return protocol.ShutdownReply(stopping=True, stop_servers=args.stop_servers)

    # ---- bench runs and demo load (sgltui/agent/children.py) -----------------------------------

    async def op_bench_start(
        self, args: protocol.BenchStartArgs, client: str | None
    ) -> protocol.BenchStarted:
        return _child(lambda: self.children.bench_start(args.spec, client))

    async def op_bench_progress(
        self, args: protocol.BenchProgressArgs, client: str | None
    ) -> protocol.Noted:
        return self.children.bench_progress(args, client)

    async def op_bench_stop(
        self, args: protocol.BenchStopArgs, client: str | None
    ) -> protocol.BenchRun:
        try:
            return await self.children.bench_stop(args.run_id)
        except ChildError as exc:
            raise OpError(str(exc), exc.code) from None

    async def op_bench_list(
        self, args: protocol.Args, client: str | None
    ) -> list[protocol.BenchRun]:
        return self.children.bench_list()

    async def op_demo_load(
        self, args: protocol.DemoLoadArgs, client: str | None
    ) -> protocol.DemoLoadReply:
        return await self.children.demo_load(args.on)


def _child(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except ChildError as exc:
        raise OpError(str(exc), exc.code) from None


def _tail_file(path: Path, n: int) -> list[str]:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        block, data = 64 * 1024, b""
        while size > 0 and data.count(b"\n") <= n:
            step = min(block, size)
            size -= step
            fh.seek(size)
            data = fh.read(step) + data
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[-n:] if n > 0 else []
