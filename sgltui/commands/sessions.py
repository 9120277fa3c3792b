"""`sgltui sessions list`, `sgltui report`, `sgltui replay`: reading recorded sessions.

These commands never talk to the agent: a session directory is all they need, so they work
on a copy of a session from another machine and while no agent runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sgltui.commands import CliError, Subparsers
from sgltui.core import locations, units
from sgltui.core.files import write_atomic
from sgltui.session.layout import sessions_root
from sgltui.session.reader import (
    SessionError,
    load_session,
    resolve_session,
    session_dirs,
    summarize,
)
from sgltui.session.report import FORMATS, build_report, render


def register(sub: Subparsers) -> None:
    sessions = sub.add_parser(
        "sessions", help="recorded sessions", description="List recorded sessions."
    )
    ssub = sessions.add_subparsers(dest="sessions_command", metavar="ACTION")
    lst = ssub.add_parser("list", help="list recorded sessions, newest last")
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(handler=cmd_list)
    sessions.set_defaults(handler=cmd_list, json=False)

    rep = sub.add_parser(
        "report",
        help="report on a session (default: the latest)",
        description="Launches, swaps (drain/stop/memory release/load/ready), crashes, time and throughput "
        "per profile, bench comparisons and the recommendation.",
    )
    rep.add_argument(
        "session",
        nargs="?",
        help="session name (or unique prefix) or directory; default: the latest",
    )
    rep.add_argument(
        "--format", choices=FORMATS, help="md (default), json or csv; default from -o's extension"
    )
    rep.add_argument(
        "-o", "--output", metavar="FILE", help="write to FILE instead of stdout (mode 0600)"
    )
    rep.add_argument(
        "--save", action="store_true", help="also write report.<format> into the session directory"
    )
    rep.set_defaults(handler=cmd_report)

    rp = sub.add_parser(
        "replay", help="open the TUI on a recorded session (read-only, with a time cursor)"
    )
    rp.add_argument(
        "session",
        nargs="?",
        help="session name (or unique prefix) or directory; default: the latest",
    )
    rp.add_argument(
        "--speed", type=float, default=10.0, help="playback speed when playing (default 10x)"
    )
    rp.add_argument(
        "--at",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start this many seconds into the session",
    )
    rp.set_defaults(handler=cmd_replay)


def _state(args: argparse.Namespace) -> Path:
    return locations.state_dir(getattr(args, "state_dir", None))


def _resolve(args: argparse.Namespace) -> Path:
    try:
        return resolve_session(_state(args), getattr(args, "session", None))
    except SessionError as exc:
        raise CliError(str(exc)) from None


def cmd_list(args: argparse.Namespace) -> int:
    dirs = session_dirs(_state(args))
    summaries = [summarize(d) for d in dirs]
    if getattr(args, "json", False):
        print(json.dumps([s.as_dict() for s in summaries], indent=2))
        return 0
    if not summaries:
        print(f"No sessions under {sessions_root(_state(args))} yet.")
        return 0
    rows = [("SESSION", "STARTED", "LAST EVENT", "LENGTH", "LAUNCHES", "BENCH", "SIZE", "STATE")]
    for s in summaries:
        length = (s.last_event - s.started) if s.started and s.last_event else None
        rows.append(
            (
                s.name,
                units.timestamp(s.started, seconds=False),
                units.timestamp(s.last_event, seconds=False),
                units.duration(length),
                str(s.launches),
                str(s.bench_runs),
                units.size(s.size_bytes),
                "ended" if s.ended else "open",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def _format_for(args: argparse.Namespace) -> str:
    if args.format:
        return args.format
    if args.output:
        ext = Path(args.output).suffix.lower().lstrip(".")
        if ext in FORMATS:
            return ext
        if ext == "markdown":
            return "md"
    return "md"


def cmd_report(args: argparse.Namespace) -> int:
    path = _resolve(args)
    fmt = _format_for(args)
    try:
        session = load_session(path)
    except SessionError as exc:
        raise CliError(str(exc)) from None
    text = render(build_report(session), fmt)
    targets: list[Path] = []
    if args.output and args.output != "-":
        targets.append(Path(args.output).expanduser())
    if args.save:
        targets.append(path / f"report.{fmt}")
    for target in targets:
        try:
            write_atomic(target, text)  # 0600: a report names models and paths
        except OSError as exc:
            raise CliError(
                f"cannot write {target}: {exc.strerror or exc}; choose another -o FILE"
            ) from None
        print(f"wrote {target}", file=sys.stderr)
    if not args.output or args.output == "-":
        sys.stdout.write(text)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    path = _resolve(args)
    if args.speed <= 0:
        raise CliError("--speed must be > 0, e.g. --speed 10")
    from sgltui.tui.replay.run import run_replay  # late: Textual loads only for the replay

    try:
        return int(run_replay(path, speed=args.speed, at=args.at) or 0)
    except SessionError as exc:
        raise CliError(str(exc)) from None
