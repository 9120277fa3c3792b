"""`sgltui web`: serve the TUI to a browser tab (textual-serve), behind a token; `--stop`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import psutil

from sgltui.commands import CliError, Subparsers
from sgltui.core.locations import state_dir

STOP_TIMEOUT_S = 15.0


def register(sub: Subparsers) -> None:
    from sgltui.web.server import DEFAULT_MAX_TABS, DEFAULT_PORT

    p = sub.add_parser(
        "web",
        help="serve the control panel to a browser tab (needs sgltui[web])",
        description="Serve the same TUI to browser tabs through textual-serve. Every request "
        "needs the token printed at start (a cookie after the first visit). Binds to 127.0.0.1: "
        "from a laptop use an SSH tunnel, ssh -L 8765:127.0.0.1:8765 HOST, and open "
        "http://127.0.0.1:8765/?token=... there.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="keep the token in PATH (reused if present) instead of a new one in the state dir",
    )
    p.add_argument(
        "--read-only", action="store_true", help="tabs can watch but not start/stop/swap/bench"
    )
    p.add_argument(
        "--max-tabs",
        type=int,
        default=DEFAULT_MAX_TABS,
        help=f"browser tabs (app processes) at once (default {DEFAULT_MAX_TABS})",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host (traffic is NOT encrypted: prefer an SSH tunnel)",
    )
    p.add_argument("--stop", action="store_true", help="stop the running `sgltui web`")
    p.set_defaults(handler=run_web)


def run_web(args: argparse.Namespace) -> int:
    from sgltui.web.server import PID_FILE

    root = state_dir(getattr(args, "state_dir", None))
    pid_path = root / PID_FILE
    if args.stop:
        return _stop(pid_path)
    try:
        import textual_serve  # noqa: F401  (the optional extra)

        from sgltui.web.server import (
            WebError,
            WebServer,
            app_command,
            is_loopback,
            load_or_create_token,
            write_private,
        )
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("textual_serve", "aiohttp_jinja2", "jinja2"):
            raise CliError("sgltui web needs the web extra: pip install 'sgltui[web]'") from None
        raise
    if not is_loopback(args.host) and not args.allow_remote:
        raise CliError(
            f"--host {args.host} would expose the control panel beyond this machine, unencrypted; "
            f"use an SSH tunnel (ssh -L {args.port}:127.0.0.1:{args.port} HOST) or add "
            f"--allow-remote"
        )
    if args.max_tabs < 1:
        raise CliError("--max-tabs must be at least 1")
    running = _running_pid(pid_path)
    if running is not None:
        raise CliError(f"sgltui web already runs (pid {running}); stop it with `sgltui web --stop`")
    try:
        token, token_path = load_or_create_token(
            root, Path(args.token_file).expanduser() if args.token_file else None
        )
    except WebError as exc:
        raise CliError(str(exc)) from None
    command = app_command(root, getattr(args, "profiles", None) or [], args.read_only)
    server = WebServer(token=token, command=command, max_tabs=args.max_tabs)
    shown = f"[{args.host}]" if ":" in args.host else args.host

    def ready() -> None:
        write_private(pid_path, f"{os.getpid()}\n")
        mode = " (read-only)" if args.read_only else ""
        print(f"sgltui web{mode}: http://{shown}:{args.port}/?token={token}", flush=True)
        print(f"token in {token_path} (0600); stop with Ctrl-C or `sgltui web --stop`", flush=True)
        if not is_loopback(args.host):
            print(
                "warning: traffic to this address is NOT encrypted and the token travels in it; "
                f"prefer an SSH tunnel: ssh -L {args.port}:127.0.0.1:{args.port} HOST",
                file=sys.stderr,
                flush=True,
            )

    try:
        asyncio.run(server.run(args.host, args.port, ready))
    except WebError as exc:
        raise CliError(str(exc)) from None
    finally:
        if _running_pid(pid_path) in (os.getpid(), None):
            with contextlib.suppress(FileNotFoundError):
                pid_path.unlink()
    print("sgltui web stopped", flush=True)
    return 0


def _running_pid(pid_path: Path) -> int | None:
    """The pid in web.pid if that process still runs (a stale file is ignored)."""
    try:
        pid = int(pid_path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        return None
    return pid


def _stop(pid_path: Path) -> int:
    pid = _running_pid(pid_path)
    if pid is None:
        print("sgltui web is not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if _running_pid(pid_path) is None:
            print(f"sgltui web stopped (pid {pid})")
            return 0
        time.sleep(0.1)
    raise CliError(f"sgltui web (pid {pid}) did not stop in {STOP_TIMEOUT_S:.0f} s: kill {pid}")
