"""CLI: sgltui start | stop | restart | swap | status | logs | agent.

Every command is a client of the agent (started on demand). Lifecycle commands wait for the
outcome by default and print progress from the agent's event stream; Ctrl-C only stops the
watching: the agent carries the command through.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from sgltui import __version__, protocol
from sgltui.agent import keeper
from sgltui.agent.state import AgentState
from sgltui.client import AgentClient, AgentError, VersionMismatch, bridge, call_sync, decode_reply
from sgltui.client.errors import ConnectionLost
from sgltui.client.paths import paths
from sgltui.commands import CliError, Subparsers, agent_service
from sgltui.core import locations, units
from sgltui.core.pids import pid_alive


def register(sub: Subparsers) -> None:
    p = sub.add_parser("start", help="launch a profile into a slot and wait until it is ready")
    p.add_argument("profile", help="profile name or .toml path")
    _slot_opts(p)
    force_opt(p, drain=False)
    p.set_defaults(handler=cmd_start)

    p = sub.add_parser("stop", help="drain and stop the server in a slot")
    _slot_opts(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="do not wait for running requests; shorter grace period",
    )
    p.add_argument(
        "--timeout", type=float, default=30.0, help="longest drain wait in seconds (default 30)"
    )
    p.set_defaults(handler=cmd_stop)

    p = sub.add_parser("restart", help="stop and relaunch the slot's profile (re-read from disk)")
    _slot_opts(p)
    force_opt(p)
    p.add_argument(
        "--yes", action="store_true", help="go ahead although a batch job is pinned to the slot"
    )
    p.set_defaults(handler=cmd_restart)

    p = sub.add_parser("swap", help="switch a slot to another profile, rolling back if it fails")
    p.add_argument("profile", help="profile name or .toml path")
    _slot_opts(p)
    p.add_argument(
        "--no-rollback",
        action="store_true",
        help="leave the slot failed instead of relaunching the old profile",
    )
    force_opt(p)
    p.add_argument(
        "--yes", action="store_true", help="go ahead although a batch job is pinned to the slot"
    )
    p.set_defaults(handler=cmd_swap)

    p = sub.add_parser("status", help="slots, profiles, phases, ports, pids, uptime")
    p.add_argument("--json", action="store_true", help="print the agent's STATUS object")
    p.add_argument("--slot", help="this slot only")
    p.add_argument("--pool", help="this pool and its slots only")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("logs", help="a slot's server log")
    p.add_argument("--slot", help="slot name (default: the agent's only slot)")
    p.add_argument("--pool", help="the logs of each slot of this pool, one after the other")
    p.add_argument("-n", "--lines", type=int, default=100, help="lines to show (default 100)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p.add_argument("--launch-id", help="an earlier launch of this session")
    p.set_defaults(handler=cmd_logs)

    p = sub.add_parser(
        "agent", help="the background agent: status | events | stop | start | install-service"
    )
    asub = p.add_subparsers(dest="agent_command", metavar="ACTION")
    a = asub.add_parser("status", help="is the agent running, and where")
    a.add_argument("--json", action="store_true")
    a.set_defaults(handler=cmd_agent_status)
    a = asub.add_parser("events", help="what happened lately: the Activity tab's lines, as text")
    a.add_argument("-n", "--last", type=int, default=20, metavar="N", help="the last N (<= 200)")
    a.add_argument("--slot", help="only this slot's events")
    a.add_argument("--all", action="store_true", help="every event type, not only Activity's")
    a.add_argument("--json", action="store_true", help="the events as recorded, one a line")
    a.set_defaults(handler=cmd_agent_events)
    a = asub.add_parser("stop", help="stop the agent (servers keep running unless --stop-servers)")
    a.add_argument("--stop-servers", action="store_true", help="also stop every server it runs")
    a.set_defaults(handler=cmd_agent_stop)
    a = asub.add_parser("start", help="start the agent now (any command starts it on demand)")
    a.set_defaults(handler=cmd_agent_start)
    a = asub.add_parser(
        "install-service", help="write a systemd user unit that starts the agent at boot"
    )
    a.add_argument("--print", action="store_true", help="print the unit instead of writing it")
    a.set_defaults(handler=agent_service.cmd_install_service)
    a = asub.add_parser(
        "bridge",
        help="connect stdin/stdout to this host's agent socket (what `ssh HOST` runs for fleets)",
    )
    a.set_defaults(handler=cmd_agent_bridge)
    p.set_defaults(handler=lambda args: _usage(p))


PREFLIGHT_CHECKS = ("flags", "interpreter", "model", "port", "gpu-memory", "host-memory")


def force_opt(p: argparse.ArgumentParser, drain: bool = True) -> None:
    what = "bare: do not wait for running requests; " if drain else ""
    p.add_argument(
        "--force",
        nargs="?",
        const="drain",
        action="append",
        default=[],
        metavar="CHECK",
        help=f"{what}--force CHECK skips that preflight check ({', '.join(PREFLIGHT_CHECKS)}); "
        "repeatable",
    )


def forced(args: argparse.Namespace, drain: bool = True) -> tuple[str, dict]:
    """(drain mode, {"force": [checks]} or {}) from --force / --force CHECK."""
    values = list(getattr(args, "force", None) or [])
    allowed = PREFLIGHT_CHECKS + (("drain",) if drain else ())
    for v in values:
        if v not in allowed:
            raise CliError(
                f"--force takes a preflight check ({', '.join(PREFLIGHT_CHECKS)})"
                + (" or nothing (do not wait for running requests)" if drain else "")
                + f", not {v!r}; put the profile name before --force",
                2,
            )
    skip = [v for v in values if v != "drain"]
    return ("force" if "drain" in values else "wait"), ({"force": skip} if skip else {})


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _slot_opts(p: argparse.ArgumentParser) -> None:
    p.add_argument("--slot", help="slot name (default: the agent's only slot)")
    p.add_argument(
        "--pool",
        help="every slot of this host.toml pool (a swap rolls, one slot at a time)",
    )
    p.add_argument(
        "--no-wait", action="store_true", help="return once the agent accepted the command"
    )


def state_of(args: argparse.Namespace) -> Path:
    return locations.state_dir(getattr(args, "state_dir", None))


def profile_dirs_of(args: argparse.Namespace) -> list[str]:
    return [str(Path(d).expanduser().resolve()) for d in (getattr(args, "profiles", None) or [])]


def call_op(
    args: argparse.Namespace, op: str | protocol.Args, autostart: bool = True, **kw: Any
) -> Any:
    """The op's typed reply (protocol.OPS); an agent error is one CliError line. `op`: its
    name, or its arguments' Struct (which names it)."""
    # call_sync sends its profiles_dirs with the ops that take them: passing them once more in
    # the op's arguments was the `--no-wait` crash ("multiple values for 'profiles_dirs'").
    dirs = kw.pop("profiles_dirs", None) or profile_dirs_of(args)
    name = op if isinstance(op, str) else protocol.op_for(op)
    try:
        res = call_sync(state_of(args), op, autostart=autostart, profiles_dirs=dirs, **kw)
        return decode_reply(name, res)
    except AgentError as exc:
        raise CliError(str(exc)) from None


def _any_version_status(state: Path) -> protocol.StatusReply | protocol.PingReply:
    """STATUS without the version check (finding and stopping an agent of another version):
    an agent whose STATUS this version cannot read answers `ping` (pid and version) instead."""
    try:
        # An agent of another version refuses STATUS (it answers ops only after a hello that
        # agrees) or answers it in a shape this version cannot read: then ping.
        raw = call_sync(state, "status", autostart=False, check_version=False)
        st: protocol.StatusReply = decode_reply("status", raw)
        return st
    except AgentError:
        ping: protocol.PingReply = decode_reply(
            "ping", call_sync(state, "ping", autostart=False, check_version=False)
        )
        return ping


# ---- lifecycle commands --------------------------------------------------------------------------


# Each sends its op's arguments' Struct, which names the op (AgentClient.call_args).
def cmd_start(args: argparse.Namespace) -> int:
    skip = forced(args, drain=False)[1]
    return _lifecycle(args, protocol.StartArgs(profile=args.profile, **skip))


def cmd_stop(args: argparse.Namespace) -> int:
    drain = protocol.Drain.FORCE if args.force else protocol.Drain.WAIT
    return _lifecycle(args, protocol.StopArgs(drain=drain, timeout=args.timeout))


def cmd_restart(args: argparse.Namespace) -> int:
    drain, skip = forced(args)
    return _lifecycle(
        args, protocol.RestartArgs(drain=protocol.Drain(drain), confirm=bool(args.yes), **skip)
    )


def cmd_swap(args: argparse.Namespace) -> int:
    drain, skip = forced(args)
    swap = protocol.SwapArgs(
        profile=args.profile,
        rollback=not args.no_rollback,
        drain=protocol.Drain(drain),
        confirm=bool(args.yes),
        **skip,
    )
    return _lifecycle(args, swap)


Lifecycle = protocol.StartArgs | protocol.StopArgs | protocol.RestartArgs


def _lifecycle(args: argparse.Namespace, sent: Lifecycle) -> int:
    op = protocol.op_for(sent)
    if getattr(args, "pool", None):
        if args.slot:
            raise CliError("give --slot or --pool, not both")
        return _pool_lifecycle(args, sent)
    sent = msgspec.structs.replace(sent, slot=args.slot)
    if not isinstance(sent, protocol.StopArgs):
        sent = msgspec.structs.replace(sent, profiles_dirs=profile_dirs_of(args))
    if args.no_wait:
        slot = call_op(args, sent).slot
        print(
            f"slot {slot.id}: {op} accepted ({slot.state}{', ' + slot.profile if slot.profile else ''})"
        )
        return 0
    try:
        outcome = asyncio.run(_follow(args, sent))
    except AgentError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        raise CliError(
            f"stopped watching; the agent carries on with the {op} (see `sgltui status`)", 130
        ) from None
    return _report(op, outcome)


def _pool_lifecycle(args: argparse.Namespace, sent: Lifecycle) -> int:
    """start/stop/restart/swap of a pool: the agent runs it on each slot (a swap rolls) and
    answers with the slots as they end."""
    op = protocol.op_for(sent)
    sent = msgspec.structs.replace(sent, pool=args.pool, wait=not args.no_wait)
    try:
        res = call_sync(state_of(args), sent, autostart=True, profiles_dirs=profile_dirs_of(args))
    except AgentError as exc:
        if op == "swap" and isinstance(exc, ConnectionLost):
            # the agent died mid-roll (its keeper starts another, which re-adopts the servers):
            # the pool may serve two profiles; the same command finishes the roll
            raise CliError(
                f"{exc} during the roll of pool {args.pool}; it may serve mixed now: "
                f"`sgltui status --pool {args.pool}` shows it, and `sgltui swap "
                f"{getattr(sent, 'profile', None)} --pool {args.pool}` again finishes the roll"
            ) from None
        raise CliError(str(exc)) from None
    if args.no_wait:
        print(f"pool {args.pool}: {op} accepted (sgltui status shows its slots)")
        return 0
    result = res.get("pool") or {}  # protocol.PoolResult
    for slot in result.get("slots") or []:
        if isinstance(slot, dict):
            print(
                f"slot {slot.get('id')}: {slot.get('profile') or '-'} {slot.get('state')} "
                f"on {slot.get('host')}:{slot.get('port')}"
            )
    roll = result.get("roll")
    if op == "swap" and isinstance(roll, dict):
        took = ""
        started, finished = roll.get("started"), roll.get("finished")
        if isinstance(started, (int, float)) and isinstance(finished, (int, float)):
            took = f" in {units.span(finished - started)}"
        print(
            f"pool {args.pool}: rolled to {roll.get('profile')} "
            f"({', '.join(roll.get('done') or [])}){took}"
        )
    return 0


async def _follow(args: argparse.Namespace, sent: Lifecycle) -> protocol.Accepted:
    client = AgentClient(state_of(args), "cli")
    await client.connect(profiles_dirs=profile_dirs_of(args))
    printer = _Progress(sent.slot)

    async def watch() -> None:
        async for msg in client.pushes():
            printer.push(msg)

    await client.call("subscribe")  # before the command: none of its events is missed
    watcher = asyncio.get_running_loop().create_task(watch())
    try:
        reply = await client.call_args(msgspec.structs.replace(sent, wait=True))
        outcome: protocol.Accepted = decode_reply(protocol.op_for(sent), reply)
        return outcome
    finally:
        watcher.cancel()
        await client.close()


class _Progress:
    """Prints one line per step of the command in progress (events of this slot only)."""

    def __init__(self, slot: str | None) -> None:
        self.slot = slot  # None: the agent's only slot, so every slot event is this command's
        self.t0 = time.monotonic()

    def _out(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", flush=True)

    def push(self, msg: dict) -> None:
        if msg.get("push") != "event":
            return
        ev = msg["data"]
        if self.slot is not None and ev.get("slot") != self.slot:
            return
        t = ev.get("type")
        if t == "launch":
            self._out(
                f"launching {ev.get('profile')} (pid {ev.get('pid')}, log {ev.get('log_path')})"
            )
        elif t == "slot.phase":
            eta = f", eta {units.duration(ev['eta_s'])}" if ev.get("eta_s") is not None else ""
            prog = f" {ev['progress']:.0%}" if ev.get("progress") is not None else ""
            self._out(f"  {ev.get('phase')}{prog}{eta}")
        elif t == "slot.state":
            self._out(f"{ev.get('state')}: {ev.get('reason')}")
        elif t == "slot.drain":
            self._out(
                f"  draining: {ev.get('requests')} requests running or queued, "
                f"{float(ev.get('left_s') or 0):.0f}s left (of {float(ev.get('timeout_s') or 0):.0f}s)"
            )
        elif t == "swap.step" and ev.get("step") not in ("launching", "ready"):
            self._out(f"swap {ev.get('from') or '-'} -> {ev.get('to')}: {ev.get('step')}")


def _report(op: str, outcome: protocol.Accepted) -> int:
    slot = outcome.slot
    result = outcome.result or protocol.Outcome()
    if result.cancelled:
        raise CliError(f"{op} was cancelled (another client stopped slot {slot.id})")
    if result.error:
        raise CliError(f"{op} failed inside the agent: {result.error} (see the agent log)")
    if op == "stop":
        problems = result.report.problems if result.report else []
        for problem in problems:
            print(f"warning: {problem}", file=sys.stderr)
        print(f"slot {slot.id}: stopped")
        return 1 if problems else 0
    if op == "swap" and result.rolled_back:
        failed = result.cause
        _print_cause(failed)
        raise CliError(
            f"swap failed: {failed.summary if failed else 'new profile did not start'}; "
            f"rolled back to {slot.profile} (ready)"
        )
    if slot.state == protocol.SlotState.READY:
        total = result.timings_s.get("total")
        took = f" in {units.span(total)}" if total else ""
        if op == "swap" and slot.last_swap is not None and total:
            took = f" ({slot.last_swap.kind} swap in {units.span(total)})"  # agent/swap/standby.py
        front = slot.front.url if slot.front else None
        print(
            f"slot {slot.id}: {slot.profile} ready on {slot.host}:{slot.port}{took}"
            + (f" (clients: {front}, the same across swaps)" if front else "")
        )
        return 0
    cause = slot.cause or result.cause
    _print_cause(cause)
    if cause:
        raise CliError(f"{slot.profile} {slot.state}: {cause.summary}; fix: {cause.fix}")
    raise CliError(f"slot {slot.id} ended {slot.state}; see `sgltui logs`")


def _print_cause(cause: protocol.Cause | None) -> None:
    if not cause:
        return
    for line in cause.lines:
        print(f"  | {line}", file=sys.stderr)


# ---- status and logs ------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    # Never starts an agent: one started only to answer "what runs?" would open an empty session.
    try:
        raw = call_sync(state_of(args), "status", autostart=False)
    except VersionMismatch as exc:
        raise CliError(str(exc)) from None
    except AgentError:
        down = _keeper_down_line(state_of(args))
        if down:
            raise CliError(down, 3) from None
        left = _left_running(state_of(args))
        if left:
            raise CliError(
                f"no agent is running for {state_of(args)}; its last session recorded "
                f"{', '.join(left)} still running: `sgltui agent start` re-adopts them",
                3,
            ) from None
        found = _unmanaged_lines()
        for line in found:  # servers of yours sgltui did not start, found by this command
            print(line)
        raise CliError(
            f"no agent is running for {state_of(args)}"
            + ("" if found else ": no servers")
            + "; `sgltui start PROFILE` or `sgltui` starts one",
            3,
        ) from None
    if args.json:  # the agent's object as it sent it, keys this version does not know included
        print(json.dumps(_only_asked(raw, args), indent=1, default=str))
        return 0
    try:
        st: protocol.StatusReply = decode_reply("status", raw)
    except AgentError as exc:
        raise CliError(str(exc)) from None
    if getattr(args, "slot", None) or getattr(args, "pool", None):
        wanted: set[str] = set()  # the slots of --pool, or --slot alone
        for pool in st.pools:
            if pool.name == args.pool:
                wanted = set(pool.slots)
        if args.pool and not wanted:
            raise CliError(
                f"no pool {args.pool!r}; pools: {', '.join(p.name for p in st.pools) or 'none'}"
            )
        if args.slot:
            wanted.add(args.slot)
        st.slots = [s for s in st.slots if s.id in wanted]
        st.pools = [p for p in st.pools if not args.pool or p.name == args.pool]
    agent = st.agent
    print(f"agent {agent.pid} · session {agent.session_dir}")
    if not agent.disk.ok:
        print(f"  disk: {agent.disk.error}")
    kline = _keeper_line(agent.keeper)
    if kline:
        print(kline)
    id_w = max([5] + [len(s.id) + 1 for s in st.slots])  # ext-PORT (an attached one) is 9+
    print(f"{'SLOT':<{id_w}}{'PROFILE':<22}{'STATE':<11}{'PHASE':<24}{'PORT':<7}{'PIDS':<18}UPTIME")
    for s in st.slots:
        launching = s.state == protocol.SlotState.LAUNCHING
        phase = s.phase or "-"
        if launching and s.progress is not None:
            phase += f" {s.progress:.0%}"
            if s.eta_s is not None:
                phase += f" eta {units.duration(s.eta_s)}"
        pids = ",".join(map(str, s.pids)) or "-"
        if len(pids) > 16:
            pids = pids[:15] + "…"
        print(
            f"{s.id:<{id_w}}{(s.profile or '-'):<22}{s.state:<11}{phase if launching else '-':<24}"
            f"{s.port or '-':<7}{pids:<18}{units.duration(s.uptime_s)}"
        )
        if s.external:
            print(f"     {external_line(s)}")
        front = s.front
        if front:
            if front.error:
                print(f"     front: {front.error}")
            else:
                to = f" -> {front.backend}" if front.backend else ""
                held = f", holding {front.held_now}" if front.held_now else ""
                print(f"     front: {front.url} ({front.state}{to}{held})")
        if s.swap:
            print(f"     swap {s.swap.from_ or '-'} -> {s.swap.to}: {s.swap.step}")
        elif s.last_swap and s.last_swap.ok and s.last_swap.seconds is not None:
            ls = s.last_swap
            print(
                f"     last swap {ls.from_ or '-'} -> {ls.to}: {ls.kind}, {units.span(ls.seconds)}"
            )
        for sb in s.standbys:
            print(
                f"     warm: {sb.profile} ({sb.state}, pins {units.gib(sb.host_bytes)} host RAM, "
                f"{units.gib(sb.gpu_bytes)} GPU; "
                + ("measured, " if sb.measured else "")
                + f"said {units.gib(sb.host_estimate_bytes)} and "
                f"{units.gib(sb.gpu_estimate_bytes)})"
            )
        if s.restart:
            print(f"     restart: {s.restart}")
        if s.unresponsive:
            print(f"     unresponsive: {s.unresponsive}")
        if s.cause:
            print(f"     cause: {s.cause.summary}")
            print(f"     fix:   {s.cause.fix}")
    for u in st.unmanaged:
        print(unmanaged_line(u))
    for pool in st.pools:
        gw = pool.gateway
        via = f"gateway pid {gw.pid} ({gw.state})" if gw and gw.pid else (gw.state if gw else "-")
        print(f"pool {pool.name}: {pool.endpoint} via {via}; slots {', '.join(pool.slots)}")
        for w in pool.workers:
            print(f"     {w.slot}: {w.url} {w.gateway_status or '-'}")
        if pool.note:
            print(f"     {pool.note}")
        if pool.error:
            print(f"     error: {pool.error}")
    ep_line = endpoint_line(st.endpoint)
    if ep_line:
        print(ep_line)
    return 0


def endpoint_line(ep: protocol.EndpointView | None) -> str | None:
    """The agent endpoint in one line: where, what waits, who holds a lease (agent/endpoint/endpoint.py)."""
    if ep is None or ep.state == "off":
        return None
    if ep.error:
        return f"endpoint: {ep.error}"
    waits = ", ".join(f"{n} {k} waiting" for n, k in ep.queue.items())
    leases = ", ".join(f"{x.profile} by {x.holder}" for x in ep.leases)
    parts = [f"endpoint: {ep.url} (by model)"]
    if waits:
        parts.append(waits)
    if leases:
        parts.append(f"leased: {leases}")
    return " · ".join(parts)


def _unmanaged_lines() -> list[str]:
    from sgltui.agent.slot import discovery

    try:
        return [f.line() for f in discovery.scan()]
    except Exception:  # noqa: BLE001 - a look around must not hide the real answer
        return []


def unmanaged_line(u: protocol.Unmanaged) -> str:
    from sgltui.agent.slot.discovery import Found

    return Found(u.pid, u.port, u.url, u.model, u.kind, u.version, u.note).line()


def external_line(s: protocol.SlotStatus) -> str:
    ext = s.external
    assert ext is not None
    if ext.pid is None:
        return f"external: {ext.url} (remote; watched only)"
    return (
        f"external: {ext.url}, pid {ext.pid} (not started by sgltui; "
        f"`sgltui adopt --slot {s.id}` takes it over)"
    )


def _only_asked(raw: dict, args: argparse.Namespace) -> dict:
    """`status --pool P --json` / `--slot S --json`: that pool's (or slot's) entries only, as
    the text form shows (it printed every slot and pool)."""
    pool, slot = getattr(args, "pool", None), getattr(args, "slot", None)
    if not (pool or slot):
        return raw
    pools = [p for p in raw.get("pools") or [] if p.get("name") == pool]
    if pool and not pools:
        names = ", ".join(str(p.get("name")) for p in raw.get("pools") or []) or "none"
        raise CliError(f"no pool {pool!r}; pools: {names}")
    wanted = {str(s) for p in pools for s in p.get("slots") or []} | ({slot} if slot else set())
    return dict(
        raw,
        slots=[s for s in raw.get("slots") or [] if str(s.get("id")) in wanted],
        pools=pools if pool else raw.get("pools") or [],
    )


def _left_running(state: Path) -> list[str]:
    """Servers the latest session's events leave running (folded by protocol.apply, as the TUI,
    replay and report do): what an agent that was stopped without --stop-servers left behind.
    Read-only: no session is opened or created."""
    from sgltui.session.reader import SessionError, load_session, session_dirs

    dirs = session_dirs(state)
    if not dirs:
        return []
    try:
        events = load_session(dirs[-1], with_timeline=False).events
    except (SessionError, OSError):
        return []
    running = (protocol.SlotState.LAUNCHING, protocol.SlotState.READY, protocol.SlotState.DRAINING)
    return [
        f"slot {s.id}: {s.profile} ({s.state}{f', pid {s.pid}' if s.pid else ''})"
        for s in protocol.fold(events).slots.values()
        if s.state in running
    ]


def cmd_logs(args: argparse.Namespace) -> int:
    if args.lines < 0:
        raise CliError("--lines must be 0 or more")
    if getattr(args, "pool", None):
        if args.follow or args.slot:
            raise CliError("--pool prints each slot's tail; follow one slot with --slot NAME -f")
        raw = call_sync(state_of(args), "status", autostart=False)
        slots = next(
            (p.get("slots") for p in raw.get("pools") or [] if p.get("name") == args.pool), None
        )
        if not slots:
            raise CliError(f"no pool {args.pool!r} (sgltui host show)")
        for sid in slots:
            print(f"==> slot {sid} <==")
            sub = argparse.Namespace(**{**vars(args), "pool": None, "slot": sid})
            cmd_logs(sub)
        return 0
    kw: dict[str, Any] = {"slot": args.slot, "lines": args.lines}
    if args.launch_id:
        kw["launch_id"] = args.launch_id
    if not args.follow:
        for line in call_op(args, "logs", **kw).lines:
            print(line)
        return 0
    try:
        asyncio.run(_follow_logs(args, kw))
    except AgentError as exc:
        raise CliError(str(exc)) from None
    return 0


async def _follow_logs(args: argparse.Namespace, kw: dict) -> None:
    client = AgentClient(state_of(args), "cli")
    await client.connect(profiles_dirs=profile_dirs_of(args))
    try:
        launch = None
        try:
            res: protocol.LogsReply = decode_reply("logs", await client.call("logs", **kw))
            launch = res.launch_id
            for line in res.lines:
                print(line, flush=True)
        except AgentError:
            pass  # nothing logged yet: wait for the first launch
        async for msg in client.subscribe():
            if msg.get("push") != "log" or (
                args.slot is not None and msg["data"].get("slot") != args.slot
            ):
                continue
            data = msg["data"]
            if args.launch_id and data.get("launch_id") != args.launch_id:
                continue
            if data.get("launch_id") != launch:
                launch = data.get("launch_id")
                print(f"==> {launch} <==", flush=True)
            for line in data.get("lines") or []:
                print(line, flush=True)
        raise ConnectionLost("the agent went away")
    finally:
        await client.close()


# ---- the agent itself -------------------------------------------------------------------------


def cmd_agent_status(args: argparse.Namespace) -> int:
    state = state_of(args)
    try:
        st = _any_version_status(state)
    except AgentError:
        if args.json:
            kept = keeper.read_state(state)
            print(json.dumps({"running": False, "state_dir": str(state), "keeper": kept}))
        else:
            print(_keeper_down_line(state) or f"agent: not running (state dir {state})")
        return 3
    if isinstance(st, protocol.PingReply):  # an agent of another version
        if args.json:
            print(json.dumps({"running": True, "pid": st.pid, "version": st.version}))
        else:
            print(f"agent: running, pid {st.pid}, version {st.version} (this is {__version__})")
        return 0
    agent = st.agent
    if args.json:
        print(json.dumps({"running": True, **protocol.to_builtins(agent)}, default=str))
        return 0
    up = units.duration(time.time() - agent.started)
    running = [
        f"{s.id}:{s.profile}({s.state})" for s in st.slots if s.state != protocol.SlotState.STOPPED
    ]
    print(f"agent: running, pid {agent.pid}, up {up}, version {agent.version}")
    print(f"  socket  {paths(state)['socket']}")
    print(f"  log     {paths(state)['log']}")
    print(f"  session {agent.session_dir}")
    print(f"  slots   {', '.join(running) or 'none running'}")
    kline = _keeper_line(agent.keeper)
    if kline:
        print(kline)
    elif agent.keeper is None:
        print("  keeper  none (the agent is not started again if it dies)")
    return 0


def cmd_agent_events(args: argparse.Namespace) -> int:
    """The agent's recent events (the `events` op), in the Activity tab's words."""
    from sgltui.tui.activity_items import activity_item  # no Textual: the words only

    raw: list[dict[str, Any]] = call_op(args, "events", autostart=False)
    rows = []
    for data in raw:
        event = protocol.decode_event(data)
        if args.slot is not None and event.slot != args.slot:
            continue
        item = activity_item(event, None, time.time)
        if item is not None:
            rows.append((data, f"{units.clock(item.ts)}  {item.text}"))
        elif args.all:
            where = f" slot {event.slot}" if event.slot is not None else ""
            rows.append((data, f"{units.clock(event.ts)}  {data.get('type', '?')}{where}"))
    for data, line in rows[-max(args.last, 0) :] if args.last > 0 else []:
        print(json.dumps(data) if args.json else line)
    return 0


def cmd_agent_bridge(args: argparse.Namespace) -> int:
    return bridge.run(state_of(args), profile_dirs_of(args))


def cmd_agent_stop(args: argparse.Namespace) -> int:
    state = state_of(args)
    keeper_pid = keeper.keeper_pid(state)
    try:
        # Without the version check: this is how an agent of another version is replaced.
        st = _any_version_status(state)
        call_sync(
            state,
            "shutdown",
            autostart=False,
            check_version=False,
            stop_servers=args.stop_servers,
        )
    except AgentError:
        return _stop_without_agent(args, state, keeper_pid)
    pid = st.pid if isinstance(st, protocol.PingReply) else st.agent.pid
    # The keeper ends once its agent exits cleanly: wait for both, nothing is left behind.
    _wait_gone(state, [p for p in (pid, keeper_pid) if p])
    running = (protocol.SlotState.LAUNCHING, protocol.SlotState.READY, protocol.SlotState.DRAINING)
    slots = [] if isinstance(st, protocol.PingReply) else st.slots
    left = [f"{s.id}:{s.profile}" for s in slots if s.state in running]
    if left and not args.stop_servers:
        print(
            f"agent stopped; servers left running: {', '.join(left)} (the next agent re-adopts them)"
        )
    else:
        print("agent stopped")
    return 0


def stop_agent_and_wait(state: Path, pid: int) -> None:
    """Shut the agent down with its servers, gateways and standbys, and wait for it and its
    keeper to be gone (`sgltui demo --stop` on the demo's own agent)."""
    keeper_pid = keeper.keeper_pid(state)
    try:
        call_sync(state, "shutdown", autostart=False, stop_servers=True)
    except AgentError as exc:
        raise CliError(f"could not stop the agent: {exc}") from None
    _wait_gone(state, [p for p in (pid, keeper_pid) if p])


def _wait_gone(state: Path, pids: list[int], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.1)
    alive = [p for p in pids if pid_alive(p)]
    if alive:
        raise CliError(
            f"the agent (pid {', '.join(map(str, alive))}) did not exit within {timeout:.0f}s; "
            f"see {paths(state)['log']}"
        )


def _stop_without_agent(args: argparse.Namespace, state: Path, keeper_pid: int | None) -> int:
    """No agent answers. A keeper waiting to start one again is stopped; servers the dead agent
    left (agent-state.json) are, with --stop-servers, stopped by an agent started to re-adopt
    them (the one path that drains, stops and waits for their GPUs), else named."""
    import os
    import signal

    if keeper_pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(keeper_pid, signal.SIGTERM)
        _wait_gone(state, [keeper_pid])
    left = _servers_in_state_file(state)
    if not left:
        print(f"agent: not running (state dir {state})")
        return 0
    names = ", ".join(f"slot {sid}: {what}" for sid, what, _ in left)
    if not args.stop_servers:
        print(
            f"agent: not running; its servers are still running ({names}); "
            "`sgltui agent stop --stop-servers` stops them, `sgltui agent start` re-adopts them"
        )
        return 0
    print(f"agent: not running; starting one to stop the servers it left ({names})")
    try:
        pid = call_sync(state, "ping", profiles_dirs=profile_dirs_of(args))["pid"]
        keeper_pid = keeper.keeper_pid(state)
        call_sync(state, "shutdown", autostart=False, stop_servers=True)
    except AgentError as exc:
        groups = " ".join(f"-{pgid}" for _, _, pgid in left if pgid)
        raise CliError(
            f"could not start an agent to stop them ({exc}); stop them by hand: "
            f"`kill -TERM -- {groups}`"
        ) from None
    _wait_gone(state, [p for p in (pid, keeper_pid) if p])
    print("agent stopped; servers stopped")
    return 0


def _servers_in_state_file(state: Path) -> list[tuple[str, str, int | None]]:
    """(slot, 'PROFILE (pid N)', process group) of each live server in agent-state.json."""
    out = []
    for sid, rec in (AgentState(state).load().get("slots") or {}).items():
        tree = rec.get("tree") or {}
        pid = tree.get("pid")
        if isinstance(pid, int) and _same_process(pid, tree.get("create_time")):
            pgid = tree.get("pgid")
            out.append(
                (sid, f"{rec.get('profile')} (pid {pid})", pgid if isinstance(pgid, int) else None)
            )
    return out


def cmd_agent_start(args: argparse.Namespace) -> int:
    print(f"agent: running, pid {call_op(args, 'ping').pid}")
    return 0


def _same_process(pid: int, create_time: Any) -> bool:
    """`pid` runs and is the process recorded (not a later one given the same number)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return (
            not isinstance(create_time, (int, float)) or abs(proc.create_time() - create_time) < 2
        )
    except psutil.Error:
        return False


def _keeper_line(k: protocol.KeeperView | None) -> str | None:
    """What the keeper has had to do, for `status` and `agent status` (None: nothing to say)."""
    if k is None or not k.restarts:
        return None
    when = f", {units.duration(time.time() - k.last_exit_at)} ago" if k.last_exit_at else ""
    return (
        f"  keeper  pid {k.pid} started the agent again {k.restarts} time(s); "
        f"last: {k.last_exit}{when} (see agent.log)"
    )


def _keeper_down_line(state: Path) -> str | None:
    """Why no agent answers while its keeper lives (a back-off after crashes), or None."""
    raw = keeper.read_state(state)
    if raw is None:
        return None
    try:
        k = msgspec.convert(raw, protocol.KeeperView)
    except msgspec.ValidationError:
        return None
    if k.state == "backoff" and k.next_start_at:
        wait = max(0.0, k.next_start_at - time.time())
        return (
            f"agent: not running; it crashed {k.crashes_in_a_row} times in a row "
            f"(last: {k.last_exit}); its keeper (pid {k.pid}) starts it again in "
            f"{units.duration(wait)}, or now on any command; see {paths(state)['log']}"
        )
    return f"agent: starting (its keeper, pid {k.pid}, started it again after: {k.last_exit})"
