"""`sgltui standby add|remove|list`: profiles kept warm beside a slot's server (agent/swap/standby.py).

A standby is a second server process of its profile, asleep (SGLang's memory saver): its
weights wait in pinned host RAM, and `sgltui swap PROFILE` wakes it in seconds instead of
loading it cold. Adding one costs one cold start of the profile, while the serving one sleeps
and its clients wait at the slot's front.
"""

from __future__ import annotations

import argparse
from typing import Any

from sgltui import protocol
from sgltui.client import AgentError, call_sync, decode_reply
from sgltui.commands import CliError, Subparsers
from sgltui.commands.server import call_op, profile_dirs_of, state_of
from sgltui.core import units


def register(sub: Subparsers) -> None:
    p = sub.add_parser("standby", help="profiles kept warm for swaps in seconds: add|remove|list")
    ssub = p.add_subparsers(dest="standby_command", metavar="ACTION")
    a = ssub.add_parser(
        "add",
        help="keep PROFILE warm beside the slot's server (one cold start of it, now)",
    )
    a.add_argument("profile", help="profile name or .toml path")
    _where(a)
    a.add_argument("--no-wait", action="store_true", help="return once the agent accepted it")
    a.set_defaults(handler=cmd_add)
    r = ssub.add_parser("remove", help="stop a standby (its host RAM and GPU remainder are freed)")
    r.add_argument("profile")
    _where(r)
    r.set_defaults(handler=cmd_remove)
    ls = ssub.add_parser("list", help="the standbys of every slot, and what each pins")
    ls.set_defaults(handler=cmd_list)
    p.set_defaults(handler=lambda args: _usage(p))


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--slot", help="slot name (default: the agent's only slot)")
    p.add_argument("--pool", help="every slot of this host.toml pool")


def _target(args: argparse.Namespace) -> dict[str, Any]:
    if args.slot and args.pool:
        raise CliError("give --slot or --pool, not both")
    return {"slot": args.slot, "pool": args.pool}


def cmd_add(args: argparse.Namespace) -> int:
    wait = not args.no_wait
    if wait:
        print(
            f"keeping {args.profile} warm: one cold start of it now, while the serving profile "
            "sleeps (its clients wait at the front)",
            flush=True,
        )
    reply: protocol.Accepted = call_op(
        args,
        "standby_add",
        profile=args.profile,
        wait=wait,
        profiles_dirs=profile_dirs_of(args),
        **_target(args),
    )
    slot = reply.slot
    if not wait:
        print(f"slot {slot.id}: standby add {args.profile} accepted (`sgltui standby list`)")
        return 0
    result = reply.result or protocol.Outcome()
    if result.error:
        raise CliError(f"standby add failed inside the agent: {result.error} (see the agent log)")
    if not result.ok:
        cause = result.cause
        if cause is not None and cause.fix:  # the agent's words say what to do, and what serves
            raise CliError(f"{args.profile} not kept warm: {cause.summary}; {cause.fix}")
        why = cause.summary if cause else "it did not start"
        raise CliError(f"{args.profile} not kept warm: {why}; {slot.profile or '-'} serves on")
    took = units.span(result.timings_s.get("total"))
    sb = next((s for s in slot.standbys if s.profile == args.profile), None)
    pins = f", pins {units.gib(sb.host_bytes)} host RAM" if sb else ""
    print(
        f"slot {slot.id}: {args.profile} kept warm (asleep{pins}) in {took}; "
        f"`sgltui swap {args.profile}` wakes it in seconds"
    )
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    reply: protocol.Accepted = call_op(
        args, "standby_remove", profile=args.profile, **_target(args)
    )
    print(f"slot {reply.slot.id}: {args.profile} no longer kept warm")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    try:
        st: protocol.StatusReply = decode_reply(
            "status", call_sync(state_of(args), "status", autostart=False)
        )
    except AgentError as exc:
        raise CliError(f"{exc}; no agent, no standbys") from None
    rows = [(s, sb) for s in st.slots for sb in s.standbys]
    if not rows:
        print("no standbys; `sgltui standby add PROFILE` keeps one warm")
        return 0
    # What it pins and keeps, measured after its release, beside what was said before it
    # was added (the estimate the add's room check used).
    print(
        f"{'SLOT':<6}{'PROFILE':<22}{'STATE':<10}{'HOST RAM':<11}{'(SAID)':<11}{'GPU':<9}"
        f"{'(SAID)':<11}{'PORT':<7}SERVING"
    )
    for s, sb in rows:
        host = units.gib(sb.host_bytes) if sb.measured else "-"
        gpu = units.gib(sb.gpu_bytes) if sb.measured else "-"
        print(
            f"{s.id:<6}{sb.profile:<22}{sb.state:<10}{host:<11}"
            f"{units.gib(sb.host_estimate_bytes):<11}{gpu:<9}"
            f"{units.gib(sb.gpu_estimate_bytes):<11}{sb.port or '-':<7}{s.profile or '-'}"
        )
    return 0
