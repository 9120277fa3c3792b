"""CLI: sgltui attach URL | adopt | detach, and `profiles import --from URL` (issue 38).

A server the user started outside sgltui becomes a slot (attach), is taken over (adopt: its
configuration written as a profile, then stop and swap work on it), or is let go (detach). The
agent does the work (agent/slot/attach.py); these print its one-line answers.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from sgltui import protocol
from sgltui.commands import CliError, Subparsers


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "attach",
        help="watch a server you started yourself (memory, throughput, bench, jobs)",
        description="Make a running SGLang server a slot: watched, benched and used like one "
        "sgltui launched; its lifecycle stays yours until `sgltui adopt`.",
    )
    p.add_argument("url", help="the server's URL, e.g. http://127.0.0.1:30000")
    p.add_argument(
        "--slot", help="the slot it becomes (default: the idle only slot, else ext-PORT)"
    )
    _key_file_args(p)
    p.set_defaults(handler=cmd_attach)

    p = sub.add_parser(
        "adopt",
        help="take over an attached server: its configuration becomes a profile",
        description="Write the attached server's effective configuration as a profile; from then "
        "on stop, swap and restart treat it as launched by sgltui (drain, rollback to it).",
    )
    p.add_argument("--slot", help="the attached slot (default: the only one)")
    p.add_argument("--name", help="the profile's name (default: ext-PORT)")
    _key_file_args(p, " (default: the one given to attach)")
    p.set_defaults(handler=cmd_adopt)

    p = sub.add_parser("detach", help="stop watching an attached server (it runs on)")
    p.add_argument("--slot", help="the attached slot (default: the only one)")
    p.set_defaults(handler=cmd_detach)


def _key_file_args(p: argparse.ArgumentParser, default: str = "") -> None:
    # An adopted profile names these files (read at each launch), never the keys themselves.
    p.add_argument(
        "--api-key-file", metavar="FILE", help=f"a file holding the server's API key{default}"
    )
    p.add_argument(
        "--admin-api-key-file",
        metavar="FILE",
        help=f"a file holding the server's admin API key{default}",
    )


def _key_paths(args: argparse.Namespace, kw: dict[str, Any]) -> None:
    """The key files' absolute paths into `kw` (each read first: an unreadable one is said
    here, in one line)."""
    for name in ("api_key_file", "admin_api_key_file"):
        path = getattr(args, name, None)
        if path:
            _key(path, "--" + name.replace("_", "-"))
            kw[name] = str(Path(path).expanduser().absolute())


def _call(args: argparse.Namespace, op: str, **kw: Any) -> Any:
    from sgltui.commands.server import call_op as call

    return call(args, op, **kw)


def _key(path: str | None, flag: str = "--api-key-file") -> str | None:
    if not path:
        return None
    try:
        key = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise CliError(f"cannot read {flag} {path}: {why}") from None
    if not key:
        raise CliError(f"{flag} {path} is empty; write the key in it")
    return key


def cmd_attach(args: argparse.Namespace) -> int:
    kw: dict[str, Any] = {"url": args.url}
    if args.slot:
        kw["slot"] = args.slot
    key = _key(args.api_key_file)
    if key:
        kw["api_key"] = key
    _key_paths(args, kw)
    r: protocol.Attached = _call(args, "attach", **kw)
    where = f"pid {r.pid}" if r.pid else "remote: no lifecycle, no GPU"
    print(
        f"slot {r.slot}: attached {r.url} ({where}; {r.model or '?'}, SGLang {r.version or '?'}, "
        f"server_info {r.info_hash})"
    )
    if r.pid:
        print(f"  it stays yours: `sgltui adopt --slot {r.slot}` lets sgltui stop and swap it")
    return 0


def cmd_adopt(args: argparse.Namespace) -> int:
    kw: dict[str, Any] = {}
    if args.slot:
        kw["slot"] = args.slot
    if args.name:
        kw["name"] = args.name
    _key_paths(args, kw)
    r: protocol.Attached = _call(args, "adopt", **kw)
    print(f"slot {r.slot}: adopted pid {r.pid} as profile {r.profile} ({r.path})")
    print("  stop, swap and restart now work on it; a failed swap relaunches it from that profile")
    return 0


def cmd_detach(args: argparse.Namespace) -> int:
    kw: dict[str, Any] = {"slot": args.slot} if args.slot else {}
    r: protocol.Attached = _call(args, "detach", **kw)
    print(f"slot {r.slot}: let go of {r.url} (it runs on)")
    return 0


# ---- profiles import --from URL ------------------------------------------------------------------


def import_from(args: argparse.Namespace) -> int:
    """`sgltui profiles import --from URL [-o FILE]`: a running server's resolved args as a
    profile, checked against the catalog of the version it reports."""
    from sgltui.agent.errors import OpError
    from sgltui.agent.slot import attach, discovery
    from sgltui.core import provenance
    from sgltui.core.launch_secrets import SECRET_FLAGS
    from sgltui.core.profiles import ProfileError

    if args.cmd and args.cmd != ["--"]:
        raise CliError("give either --from URL or a command line after --, not both", code=2)
    out = Path(args.output).expanduser() if args.output else None
    if out is not None and out.exists() and not args.force:
        raise CliError(f"{out} exists; pass --force to overwrite it or choose another -o FILE")
    try:
        url, host, port = attach.split_url(args.from_url)
        info = attach.fetch_info_blocking(url, _key(getattr(args, "api_key_file", None)))
    except OpError as exc:
        raise CliError(str(exc).replace("cannot attach", "cannot import from")) from None
    # On this host the process says which program runs it (the simulator reports itself as
    # SGLang, as it should) and which interpreter.
    cmdline = attach.listener(port)[1] if attach.is_local(host) else []
    kind = discovery.server_kind(cmdline)
    name = args.name or (out.stem if out else "imported")
    try:
        profile, catalog = provenance.profile_from_info(
            info,
            name,
            launcher="sim" if kind == "sim" else "sglang",
            python=cmdline[0] if kind == "sglang" and cmdline else None,
            description=args.description or f"imported from {url} (SGLang {info.get('version')})",
            cmdline=cmdline,
        )
    except ProfileError as exc:
        raise CliError(str(exc)) from None
    dropped = [k for k in profile.server if k in SECRET_FLAGS]
    profile = dataclasses.replace(
        profile, server={k: v for k, v in profile.server.items() if k not in SECRET_FLAGS}
    )
    if dropped or info.get("api_key"):
        print(
            "sgltui: note: left out the API key: write it in the profile's [server] "
            "or keep it where sgltui keeps keys",
            file=sys.stderr,
        )
    from sgltui.commands.profile_out import write_imported

    return write_imported(profile, out, catalog)
