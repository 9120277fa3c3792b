"""CLI: `sgltui top [--once] [--interval S] [--json]`: the agent's telemetry as plain text.

For scripts and dumb terminals: no curses, ASCII only. Refreshing output clears the screen only on
a capable terminal; elsewhere (a pipe, TERM=dumb) frames are separated by a blank line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from sgltui.client import AgentClient, AgentError, decode_reply
from sgltui.commands import CliError, Subparsers
from sgltui.commands.top_text import render
from sgltui.core import locations


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "top", help="GPU, host and engine readings as plain text (once or refreshing)"
    )
    p.add_argument("--once", action="store_true", help="print one reading and exit")
    p.add_argument(
        "--interval", default="1.0", metavar="S", help="seconds between refreshes (default 1.0)"
    )
    p.add_argument(
        "--json", action="store_true", help="print STATUS.telemetry as one JSON line per reading"
    )
    p.set_defaults(handler=cmd_top)


def parse_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise CliError(f"--interval {text!r} is not a positive number of seconds; try --interval 2")
    return value


def _frame(status: dict[str, Any], as_json: bool) -> str:
    if as_json:  # as the agent sent it
        return json.dumps(status.get("telemetry") or {}, separators=(",", ":"))
    return render(decode_reply("status", status))


def _can_clear() -> bool:
    return sys.stdout.isatty() and os.environ.get("TERM", "dumb") not in ("", "dumb")


async def _run(args: argparse.Namespace, interval: float) -> int:
    client = AgentClient(locations.state_dir(args.state_dir), "top")
    await client.connect(autostart=True, profiles_dirs=getattr(args, "profiles", ()) or ())
    try:
        clear = _can_clear() and not args.json
        first = True
        while True:
            status = await client.call("status")
            text = _frame(status, args.json)
            if clear:
                sys.stdout.write("\x1b[H\x1b[2J")
            elif not first and not args.json:
                sys.stdout.write("\n")
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
            first = False
            if args.once:
                return 0
            await asyncio.sleep(interval)
    finally:
        await client.close()


def cmd_top(args: argparse.Namespace) -> int:
    interval = parse_interval(args.interval)
    try:
        return asyncio.run(_run(args, interval))
    except AgentError as exc:
        raise CliError(f"{exc} (is the agent running? `sgltui agent status` says)") from None
