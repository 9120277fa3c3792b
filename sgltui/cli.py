"""The `sgltui` command.

Each area registers its own subcommands from a module in sgltui/commands/ (one module per area,
each with `register(subparsers)`), so this file only wires them together and turns every
expected error into one line on stderr and a non-zero exit: no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys

from sgltui import __version__
from sgltui.commands import CliError
from sgltui.core import hangup

__all__ = ["CliError", "build_parser", "main"]  # CliError lives in sgltui.commands

# Modules under sgltui.commands, each exposing register(subparsers). Order = order in --help.
COMMAND_MODULES = (
    "tui",  # sgltui (no subcommand), sgltui demo
    "profiles",  # sgltui profiles list|show|validate|import
    "server",  # sgltui start|stop|restart|swap|status|logs|agent
    "attach",  # sgltui attach|adopt|detach (servers you started yourself)
    "telemetry",  # sgltui top
    "bench",  # sgltui bench
    "sessions",  # sgltui sessions list, report, replay
    "web",  # sgltui web (the TUI in a browser tab)
    "jobs",  # sgltui job run|status|list|pause|resume|cancel|set|verify
    "host",  # sgltui host init|show (host.toml: slots and pools)
    "fleet",  # sgltui fleet status; the root option --host NAME (fleet.toml, over ssh)
    "standby",  # sgltui standby add|remove|list (profiles kept warm: agent/standby.py)
    "lease",  # sgltui lease PROFILE|list|drop (what the endpoint never evicts: agent/leases.py)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sgltui",
        description="Terminal control panel for SGLang servers: launch, watch, hot-swap, benchmark, record.",
    )
    parser.add_argument("--version", action="version", version=f"sgltui {__version__}")
    parser.add_argument(
        "--state-dir",
        help="agent state directory (default: $SGLTUI_STATE_DIR or ~/.local/state/sgltui)",
    )
    parser.add_argument(
        "--profiles",
        action="append",
        default=[],
        metavar="DIR",
        help="extra profile directory (repeatable)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"sgltui.commands.{name}")
        module.register(sub)
        # An area may also claim options or the default action of the root parser (the TUI
        # opens on a bare `sgltui`).
        register_root = getattr(module, "register_root", None)
        if register_root is not None:
            register_root(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(words)
    if argv is None:  # a process of its own (not a caller's main([...])): see core/hangup.py
        hangup.watch()  # the far end of `ssh HOST sgltui ...` ends when the connection does
    handler = getattr(args, "handler", None)
    if getattr(args, "remote_host", None):
        # --host NAME: the whole command runs on that host (sgltui/fleet/remote.py).
        # (imported here: sgltui.commands imports this module)
        from sgltui.commands import fleet

        handler = functools.partial(fleet.run_on_host, argv=words)
    if handler is None:
        # No subcommand: open the TUI when it exists, else show help.
        default = getattr(args, "default_handler", None)
        if default is None:
            parser.print_help()
            return 0
        handler = default
    try:
        rc = handler(args)
    except CliError as exc:
        print(f"sgltui: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("sgltui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # disk full, permission denied, ...: one line, not a traceback
        print(f"sgltui: error: {exc.strerror or exc} ({exc.filename or 'I/O'})", file=sys.stderr)
        return 1
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
