"""OpenSSH connection sharing for fleet hosts: one kept connection per host, reused by every
later ssh of a fleet command, the TUI and `--host`.

Without it each `fleet status` pays a full ssh handshake per host (key exchange, host key and
user key checks): ~77 ms of CPU on the operator's side per host measured here, 5 s for 64
hosts. With it, a later ssh to the same host is a mux client (~4 ms) that asks the kept
connection for a new session. The options added to every ssh of the fleet:

    -o ControlMaster=auto -o ControlPath=STATE/ssh/%C -o ControlPersist=60s

`auto`: the first ssh to a host becomes its master, the others use it (or, when the master
refuses a session, e.g. past sshd's MaxSessions, connect on their own: ssh falls back by
itself). ControlPersist keeps the master 60 s after its last session, in the background (ssh
detaches it from our process group, so closing a link does not end it). %C is a hash of the
local host, the destination, its port and user: hosts with the same destination share a
connection. The control sockets live in a directory of their own under the state dir, 0700
and ours (whoever can open a control socket can run commands on that host as us).

Never added when the user has a say already: `[ssh] multiplex = false` in fleet.toml; an [ssh]
command that is not OpenSSH's `ssh` (a wrapper may not take these options); any Control*
option in [ssh] options; or any ControlMaster/ControlPath/ControlPersist line in the ssh
config files that ssh reads (the -F file of [ssh] options, else ~/.ssh/config and
/etc/ssh/ssh_config, with their Includes): their multiplexing is theirs to set.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from sgltui.core import locations

PERSIST = "60s"
KEYWORDS = ("controlmaster", "controlpath", "controlpersist")
# A unix socket's path holds at most 107 bytes; ssh binds the master at ControlPath plus a
# 17-character temporary suffix first, and %C is 40 hex characters.
SUN_PATH_MAX = 107
HASH_LEN, TEMP_SUFFIX = 40, 17
INCLUDE_DEPTH = 16  # ssh's own limit on nested Include


def options(command: str, ssh_options: Iterable[str], enabled: bool = True) -> list[str]:
    """The -o options that share one connection per host, or [] where the user decides."""
    opts = list(ssh_options)
    if not enabled or Path(command).name != "ssh" or _control_in_options(opts):
        return []
    config = _config_file(opts)
    files = (config,) if config else (Path.home() / ".ssh" / "config", Path("/etc/ssh/ssh_config"))
    if any(sets_control(f) for f in files):
        return []
    d = control_dir(locations.state_dir())
    if d is None:
        return []
    return [
        "-o",
        "ControlMaster=auto",
        "-o",
        f"ControlPath={d}/%C",
        "-o",
        f"ControlPersist={PERSIST}",
    ]


def _control_in_options(opts: list[str]) -> bool:
    # -S is ControlPath's short option, -M ControlMaster's.
    return any(o in ("-S", "-M") or any(k in o.lower() for k in KEYWORDS) for o in opts)


def _config_file(opts: list[str]) -> Path | None:
    for i, o in enumerate(opts):
        if o == "-F" and i + 1 < len(opts):
            return Path(opts[i + 1]).expanduser()
        if o.startswith("-F") and len(o) > 2:
            return Path(o[2:]).expanduser()
    return None


def sets_control(path: Path, depth: int = 0) -> bool:
    """Whether the ssh config `path` (or a file it includes) has a Control* line, in any Host
    or Match block: read once per process (a fleet command reads it for every host)."""
    return _sets_control(str(path), depth)


@cache
def _sets_control(path: str, depth: int) -> bool:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    base = Path(path).parent
    for line in text.splitlines():
        words = line.replace("=", " ", 1).split()
        if not words or words[0].startswith("#"):
            continue
        key = words[0].lower()
        if key in KEYWORDS:
            return True
        if key == "include" and depth < INCLUDE_DEPTH:
            for pattern in words[1:]:
                p = Path(pattern).expanduser()
                # ssh reads a relative Include from ~/.ssh for the user's file, /etc/ssh for the
                # system's: the including file's directory is both of those.
                full = str(p if p.is_absolute() else base / p)
                if any(_sets_control(f, depth + 1) for f in sorted(glob.glob(full))):
                    return True
    return False


@cache
def control_dir(state_dir: Path) -> Path | None:
    """STATE/ssh, 0700 and ours, made if missing; None when it cannot be made private or its
    control sockets' paths would not fit (ssh would fail to connect: better no sharing)."""
    d = state_dir.expanduser().absolute() / "ssh"
    if len(os.fsencode(d)) + 1 + HASH_LEN + TEMP_SUFFIX > SUN_PATH_MAX:
        return None
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = d.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return None
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(d, 0o700)
    except OSError:
        return None
    return d
