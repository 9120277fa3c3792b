"""`sgltui lease PROFILE [--for 2h] [--slot S]`, `sgltui lease list`, `sgltui lease drop PROFILE`:
profiles the agent endpoint must never evict (agent/endpoint/leases.py; docs/endpoint.md). A running
batch job holds one on its profile by itself."""

from __future__ import annotations

import argparse
import re
import time

from sgltui import protocol
from sgltui.commands import CliError, Subparsers
from sgltui.commands.server import call_op
from sgltui.core import units

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "lease",
        help="keep a profile from being evicted by the endpoint: lease PROFILE | list | drop PROFILE",
        description="lease PROFILE [--for 2h] [--slot S]: the agent endpoint never evicts it; "
        "lease list: every lease (jobs hold one on their profile); lease drop PROFILE",
    )
    p.add_argument("action", metavar="PROFILE|list|drop", help="a profile to lease, or list, drop")
    p.add_argument("profile", nargs="?", help="with drop: the profile whose lease goes")
    p.add_argument("--for", dest="for_", metavar="TIME", help="for this long: 90s, 30m, 2h, 1d")
    p.add_argument("--slot", help="only while it runs on this slot")
    p.set_defaults(handler=cmd_lease)


def duration(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise CliError(f"--for {text!r}: give a time such as 90s, 30m, 2h or 1d")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def cmd_lease(args: argparse.Namespace) -> int:
    if args.action == "list":
        return _list(args)
    if args.action == "drop":
        if not args.profile:
            raise CliError("lease drop: which profile? `sgltui lease drop PROFILE`")
        dropped = call_op(args, "lease_drop", profile=args.profile, slot=args.slot)
        print(f"lease on {args.profile} dropped ({len(dropped)})")
        return 0
    name = args.profile if args.action == "add" else args.action
    if not name or args.profile and args.action != "add":
        raise CliError("give one profile: `sgltui lease PROFILE [--for 2h] [--slot S]`")
    for_s = duration(args.for_) if args.for_ else None
    lease: protocol.LeaseView = call_op(
        args, "lease_add", profile=name, slot=args.slot, for_s=for_s
    )
    until = f" until {units.timestamp(lease.until)}" if lease.until else " until dropped"
    where = f" on slot {lease.slot}" if lease.slot else ""
    print(f"{lease.profile} leased{where}{until}: the endpoint will not evict it")
    return 0


def _list(args: argparse.Namespace) -> int:
    leases: list[protocol.LeaseView] = call_op(args, "lease_list", autostart=False)
    if not leases:
        print("no leases; `sgltui lease PROFILE` holds one (a running job holds one by itself)")
        return 0
    print(f"{'PROFILE':<22}{'SLOT':<6}{'LEFT':<10}HOLDER")
    now = time.time()
    for x in leases:
        left = units.duration(x.until - now) if x.until else "-"
        print(f"{x.profile:<22}{x.slot or '-':<6}{left:<10}{x.holder}")
    return 0
