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
from typing import Any

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
    "standby",  # sgltui standby add|remove|list (profiles kept warm: agent/swap/standby_ops.py)
    "k8s",  # sgltui k8s render (Kubernetes manifests: docs/kubernetes.md)
    "advise",  # sgltui advise (profiles proposed from the serving one's figures)
    # sgltui lease PROFILE|list|drop (what the endpoint never evicts: agent/endpoint/leases.py)
    "lease",
)


# The top-level words each module registers: a command imports its own module only, so that
# `sgltui status` does not load the TUI, the web server or the bench to parse its arguments.
# tests/agent/test_cli_table.py holds this table to what the modules register.
COMMAND_WORDS = {
    "tui": "tui",
    "demo": "tui",
    "profiles": "profiles",
    "start": "server",
    "stop": "server",
    "restart": "server",
    "swap": "server",
    "status": "server",
    "logs": "server",
    "agent": "server",
    "attach": "attach",
    "adopt": "attach",
    "detach": "attach",
    "top": "telemetry",
    "bench": "bench",
    "sessions": "sessions",
    "report": "sessions",
    "replay": "sessions",
    "web": "web",
    "job": "jobs",
    "host": "host",
    "fleet": "fleet",
    "standby": "standby",
    "k8s": "k8s",
    "advise": "advise",
    "lease": "lease",
}
# Root options that take a value: the word after one is not the command.
ROOT_VALUE_OPTIONS = ("--state-dir", "--profiles", "--host", "--fleet", "--theme")


def command_word(words: list[str]) -> str | None:
    """The command named on the line (the first word that is neither a root option nor its
    value), or None (a bare `sgltui`, `--help`, `--version`)."""
    skip = False
    for w in words:
        if skip:
            skip = False
        elif w in ROOT_VALUE_OPTIONS:
            skip = True
        elif not w.startswith("-"):
            return w
    return None


def open_tui(args: argparse.Namespace) -> int:
    """A bare `sgltui`: the app on this host's agent (or the fleet's, with a fleet.toml)."""
    from sgltui.commands import tui

    return tui.open_tui(args)


def build_parser(modules: tuple[str, ...] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """The parser with the commands of `modules` (all of them by default: --help lists them)."""
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
    parser.add_argument(
        "--host",
        dest="remote_host",
        metavar="NAME",
        help="run the command on this fleet.toml host, over ssh",
    )
    parser.add_argument(
        "--fleet",
        dest="fleet_file",
        metavar="FILE",
        help="the fleet file (default: $SGLTUI_FLEET or ~/.config/sgltui/fleet.toml)",
    )
    parser.add_argument("--theme", default=None, help="colour theme for the app (see themes/)")
    parser.set_defaults(default_handler=open_tui)  # a bare `sgltui` opens the app
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(f"sgltui.commands.{name}").register(sub)
    return parser


class _Words:
    """Subparsers that only note the words registered on them (registered_words)."""

    def __init__(self) -> None:
        self.words: list[str] = []

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.words.append(name)
        return argparse.ArgumentParser(prog=name)


def registered_words() -> dict[str, str]:
    """Each top-level word the command modules register, with its module (what COMMAND_WORDS
    must say)."""
    found: dict[str, str] = {}
    for name in COMMAND_MODULES:
        words = _Words()
        importlib.import_module(f"sgltui.commands.{name}").register(words)
        found.update(dict.fromkeys(words.words, name))
    return found


def parser_for(words: list[str]) -> argparse.ArgumentParser:
    """Only the named command's module when the line names a known command; none for a bare
    `--version`; every module otherwise (help, a typo: argparse lists the choices)."""
    word = command_word(words)
    if word in COMMAND_WORDS:
        return build_parser((COMMAND_WORDS[word],))
    if word is None and "--version" in words and "-h" not in words and "--help" not in words:
        return build_parser(())
    return build_parser()


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if argv is None and words[-2:] == ["agent", "bridge"]:
        # `agent bridge` to a running agent (each host's part of every fleet command): its
        # bytes copied without the commands' modules (asyncio, the protocol's types) loaded.
        # (imported here: the socket module is 2 ms of every other command's start)
        from sgltui import dial

        if dial.try_bridge(words):
            return 0
    parser = parser_for(words)
    args = parser.parse_args(words)
    if argv is None:  # a process of its own (not a caller's main([...])): see core/hangup.py
        hangup.watch()  # the far end of `ssh HOST sgltui ...` (or kubectl exec) ends with it
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
