"""fleet.toml (~/.config/sgltui/fleet.toml): the hosts one sgltui drives.

    [ssh]                       # optional: the user's own ssh, and options for every host
    command = "ssh"
    options = ["-F", "/home/alice/.ssh/fleet_config"]

    [[host]]
    name = "gpu1"
    ssh = "alice@gpu1"          # any ssh destination; options come from ~/.ssh/config
    sgltui = "/opt/venvs/sgl/bin/sgltui"   # the remote command, when not on the remote PATH
    address = "10.0.0.11"       # where other hosts reach its servers (cross-host pools)
    state_dir = "..."           # the remote agent's state dir, when not the default

Every bad value is one FleetConfigError line naming the file, the key and the fix.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgltui.core import locations

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
HOST_KEYS = {"name", "ssh", "sgltui", "address", "state_dir"}
SSH_KEYS = {"command", "options"}


class FleetConfigError(Exception):
    """One line: which file, which key, what to write instead."""


@dataclass(frozen=True)
class Host:
    name: str
    ssh: str  # the ssh destination ([user@]host[:port] is ssh's own syntax: user@host)
    sgltui: str = "sgltui"
    address: str | None = None
    state_dir: str | None = None

    def remote_argv(self, *words: str) -> list[str]:
        """The remote sgltui command with `words` (global options first)."""
        argv = [self.sgltui]
        if self.state_dir:
            argv += ["--state-dir", self.state_dir]
        return argv + list(words)


@dataclass(frozen=True)
class Fleet:
    path: Path
    hosts: tuple[Host, ...]
    ssh_command: str = "ssh"
    ssh_options: tuple[str, ...] = field(default_factory=tuple)

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        known = ", ".join(h.name for h in self.hosts) or "none"
        raise FleetConfigError(
            f"no host named {name!r} in {self.path} (hosts: {known}); add a [[host]] for it"
        )


def default_path() -> Path:
    env = os.environ.get("SGLTUI_FLEET")
    return Path(env).expanduser() if env else locations.config_dir() / "fleet.toml"


def load(path: Path | None = None) -> Fleet:
    path = path or default_path()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FleetConfigError(
            f"no fleet file at {path}: write one with a [[host]] name = ..., ssh = ... per host"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise FleetConfigError(f"{path}: {exc}; fix the TOML syntax there") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetConfigError(f"{path}: cannot read it ({exc})") from None
    return parse(raw, path)


def parse(raw: dict[str, Any], path: Path) -> Fleet:
    unknown = set(raw) - {"host", "ssh", "pool"}
    if unknown:
        raise FleetConfigError(
            f"{path}: unknown table or key {sorted(unknown)[0]!r}; "
            f"fleet.toml holds [ssh] and [[host]] entries"
        )
    if "pool" in raw:
        raise FleetConfigError(
            f"{path}: [[pool]] across hosts is not supported yet; "
            f"remove it and run pools per host (host.toml)"
        )
    ssh = raw.get("ssh", {})
    if not isinstance(ssh, dict):
        raise FleetConfigError(f'{path}: ssh must be a table: [ssh] command = "ssh"')
    bad = set(ssh) - SSH_KEYS
    if bad:
        raise FleetConfigError(f"{path}: [ssh] has no key {sorted(bad)[0]!r}; use command, options")
    command = ssh.get("command", "ssh")
    options = ssh.get("options", [])
    if not isinstance(command, str) or not command:
        raise FleetConfigError(f'{path}: [ssh] command must be a string: command = "ssh"')
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise FleetConfigError(
            f'{path}: [ssh] options must be a list of strings: options = ["-F", "FILE"]'
        )
    hosts_raw = raw.get("host", [])
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise FleetConfigError(
            f'{path}: no hosts; add one: [[host]] name = "gpu1", ssh = "you@gpu1"'
        )
    hosts: list[Host] = []
    for i, h in enumerate(hosts_raw, 1):
        hosts.append(_host(h, i, path))
    names = [h.name for h in hosts]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise FleetConfigError(f"{path}: two hosts are named {dup!r}; give each a name of its own")
    return Fleet(path=path, hosts=tuple(hosts), ssh_command=command, ssh_options=tuple(options))


def _host(h: Any, i: int, path: Path) -> Host:
    where = f"{path}: host #{i}"
    if not isinstance(h, dict):
        raise FleetConfigError(f"{where} must be a table: [[host]] name = ..., ssh = ...")
    bad = set(h) - HOST_KEYS
    if bad:
        raise FleetConfigError(
            f"{where} has no key {sorted(bad)[0]!r}; keys are {', '.join(sorted(HOST_KEYS))}"
        )
    for key in ("name", "ssh"):
        if not isinstance(h.get(key), str) or not h[key]:
            raise FleetConfigError(f'{where} needs {key} = "..." (a string)')
    name, dest = h["name"], h["ssh"]
    where = f"{path}: host {name!r}"
    if not NAME_RE.match(name):
        raise FleetConfigError(
            f"{where}: a name is letters, digits, '.', '_' or '-' (it prefixes slots: {name}/a)"
        )
    if dest.startswith("-"):  # ssh would read it as an option
        raise FleetConfigError(f"{where}: ssh = {dest!r} starts with '-'; write a destination")
    for key in ("sgltui", "address", "state_dir"):
        if key in h and (not isinstance(h[key], str) or not h[key]):
            raise FleetConfigError(f"{where}: {key} must be a non-empty string")
    return Host(
        name=name,
        ssh=dest,
        sgltui=h.get("sgltui", "sgltui"),
        address=h.get("address"),
        state_dir=h.get("state_dir"),
    )


def split_address(target: str) -> tuple[str | None, str]:
    """`host/slot` -> (host, slot); a bare `slot` -> (None, slot)."""
    host, sep, slot = target.partition("/")
    return (host, slot) if sep else (None, target)
