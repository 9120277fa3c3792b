"""CLI: `sgltui fleet status [--json]` (every host of fleet.toml at once) and the root option
`--host NAME` (any command run by that host's sgltui, over ssh)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from sgltui.commands import CliError, Subparsers
from sgltui.commands.fleet_file import load
from sgltui.commands.server import force_opt, forced
from sgltui.fleet import config as fleet_config
from sgltui.fleet import link, remote, view

INTERACTIVE = {None, "tui", "demo", "top"}  # commands that draw on a terminal


def register(sub: Subparsers) -> None:
    p = sub.add_parser("fleet", help="several hosts over ssh (fleet.toml): status")
    fs = p.add_subparsers(dest="fleet_command", metavar="ACTION")
    s = fs.add_parser("status", help="every host at once: reachable, GPUs, slots, tok/s")
    s.add_argument("--json", action="store_true", help='{"hosts": [{"name", "reachable", ...}]}')
    s.add_argument(
        "--json-lines",
        action="store_true",
        help="one JSON object per host as it answers (a slow host holds up no other's line)",
    )
    s.add_argument("--timeout", type=float, default=30.0, help="seconds per host (default 30)")
    s.set_defaults(handler=cmd_status)
    r = fs.add_parser("report", help="every host's session merged on one clock")
    r.add_argument("session", nargs="?", help="a session name on every host (default: the latest)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(handler=cmd_report)
    t = fs.add_parser("tui", help="the Hosts view: every host and its slots as host/slot")
    t.add_argument("--interval", type=float, default=2.0, help="seconds between polls (default 2)")
    t.set_defaults(handler=cmd_tui)
    pl = fs.add_parser("pool", help="a pool across hosts (fleet.toml [[pool]]): up, swap, down")
    ps = pl.add_subparsers(dest="pool_action", metavar="ACTION")
    up = ps.add_parser("up", help="serve its slots to its gateway and start the gateway")
    up.add_argument("pool", metavar="NAME")
    up.add_argument("--profile", help="start stopped slots with this profile")
    force_opt(up, drain=False)
    up.set_defaults(handler=cmd_pool)
    sw = ps.add_parser("swap", help="rolling swap across hosts, one slot at a time")
    sw.add_argument("pool", metavar="NAME")
    sw.add_argument("profile", metavar="PROFILE")
    force_opt(sw, drain=False)  # each member is drained: the roll never drops a request
    sw.set_defaults(handler=cmd_pool)
    dn = ps.add_parser("down", help="end the pool's gateway (its slots keep running)")
    dn.add_argument("pool", metavar="NAME")
    dn.set_defaults(handler=cmd_pool)
    st = ps.add_parser("status", help="the gateway's word on each worker")
    st.add_argument("pool", metavar="NAME")
    st.add_argument("--json", action="store_true")
    st.set_defaults(handler=cmd_pool)
    pl.set_defaults(handler=lambda args: _usage(pl))
    p.set_defaults(handler=lambda args: _usage(p))


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def strip_root_host(argv: list[str], command: str | None) -> list[str]:
    """argv without the root `--host NAME` (before the command word: `web --host` is web's)."""
    end = argv.index(command) if command in argv else len(argv)
    out: list[str] = []
    i = 0
    while i < len(argv):
        w = argv[i]
        if i < end and w == "--host":
            i += 2
            continue
        if i < end and w.startswith("--host="):
            i += 1
            continue
        if i < end and w == "--fleet":  # a local file: not the far host's business
            i += 2
            continue
        if i < end and w.startswith("--fleet="):
            i += 1
            continue
        out.append(w)
        i += 1
    return out


def run_on_host(args: argparse.Namespace, argv: list[str]) -> int:
    # an ssh host or a named pod needs no `kubectl get pods`: a selector's pod (NAME.POD) does
    fleet = load(args, list_pods=False)
    if not any(h.name == args.remote_host for h in fleet.hosts):
        fleet = load(args)
    try:
        host = fleet.host(args.remote_host)
    except fleet_config.FleetConfigError as exc:
        raise CliError(str(exc)) from None
    command = getattr(args, "command", None)
    return remote.run(fleet, host, strip_root_host(argv, command), command in INTERACTIVE)


def cmd_report(args: argparse.Namespace) -> int:
    from sgltui.fleet import report

    fleet = load(args)
    merged = asyncio.run(report.gather(fleet, args.session))
    if args.json:
        print(json.dumps(merged))
    else:
        sys.stdout.write(report.render_markdown(merged))
    return 3 if any(h.get("error") for h in merged["hosts"]) else 0


def cmd_tui(args: argparse.Namespace) -> int:
    """`sgltui fleet tui`: the same app as a bare `sgltui` with a fleet.toml."""
    from sgltui.commands.tui import open_fleet

    return open_fleet(args, interval_s=args.interval)


def cmd_status(args: argparse.Namespace) -> int:
    fleet = load(args)
    if args.json_lines:
        return asyncio.run(_status_lines(fleet, args.timeout))
    states = asyncio.run(link.poll_once(fleet, args.timeout))
    if args.json:
        print(json.dumps(view.as_json(states)))
    else:
        for h in states:
            r = view.host_row(h)
            if not r.reachable:
                print(f"{r.name:<12} {r.error or r.state}")
                continue
            tok = f"{r.tok_s:,.0f} tok/s" if r.tok_s is not None else "- tok/s"
            print(
                f"{r.name:<12} reachable  sgltui {r.version}  {r.gpus} GPU  "
                f"{r.running}/{r.slots} slots running  {tok}  status in {r.rtt_ms or 0:.1f} ms"
            )
            for s in r.slot_rows:
                print(f"  {s['id']:<20} {s['profile'] or '-':<16} {s['state']}")
            for p in view.pool_rows(
                h
            ):  # host.toml's pools, and fleet.toml's whose gateway runs here
                print("  " + pool_line(p["name"], h.name, p))
    down = [h for h in states if not h.reachable]
    if down and not args.json:
        print(f"{len(down)} of {len(states)} hosts unreachable", file=sys.stderr)
    return 3 if down else 0


async def _status_lines(fleet: fleet_config.Fleet, timeout_s: float) -> int:
    """`fleet status --json-lines`: each host's line as soon as it answers (or is refused)."""
    down = 0
    async for h in link.poll_each(fleet, timeout_s):
        down += not h.reachable
        print(json.dumps(view.host_json(h)), flush=True)
    return 3 if down else 0


def cmd_pool(args: argparse.Namespace) -> int:
    """`sgltui fleet pool up|swap|down|status NAME`: sgltui/fleet/xpool.py over the bridges."""
    from sgltui.fleet import xpool

    fleet = load(args)
    try:
        pool = fleet.pool(args.pool)
    except fleet_config.FleetConfigError as exc:
        raise CliError(str(exc)) from None

    force = forced(args, drain=False)[1].get("force") if "force" in args else None

    async def go() -> dict:
        async with xpool.CrossPool(fleet, pool, say=print, force=force) as xp:
            action = args.pool_action
            if action == "up":
                return await xp.up(args.profile)
            if action == "swap":
                return await xp.swap(args.profile)
            if action == "down":
                return await xp.down()
            return await xp.gateway_status() or {"name": pool.name, "gateway": None}

    try:
        result = asyncio.run(go())
    except xpool.PoolError as exc:
        raise CliError(str(exc)) from None
    status = result.get("status", result) if args.pool_action == "swap" else result
    if getattr(args, "json", False):
        print(json.dumps(status))
        return 0
    print(pool_line(pool.name, pool.gateway, status))
    return 0


def pool_line(name: str, gateway_host: str, st: dict | None) -> str:
    """`pool xp on h1 http://127.0.0.1:30090 gateway running: h1/0 ready, h2/0 ready`."""
    if not st or not st.get("gateway"):
        return f"pool {name} on {gateway_host}: no gateway (sgltui fleet pool up {name})"
    gw = st["gateway"]
    workers = ", ".join(
        f"{w.get('slot')} {w.get('gateway_status') or 'not seen yet'}"
        for w in st.get("workers") or []
    )
    where = st.get("endpoint") or ""
    return f"pool {name} on {gateway_host} {where} gateway {gw.get('state')}: {workers or 'no workers'}"
