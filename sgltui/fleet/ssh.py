"""The ssh command line for a host, and ssh's failures as one line naming the host and the fix.

The remote command reaches the far host's shell as one string (ssh joins its words), so each
word is quoted there; locally ssh itself is run from an argv list, never a shell.
"""

from __future__ import annotations

import shlex

from sgltui.fleet import mux
from sgltui.fleet.config import Fleet, Host

# BatchMode: never a password or host-key prompt that would hang a background connection (the
# TUI has no terminal to give ssh); ServerAlive: a dead link is noticed in ~15 s, not hours.
BASE_OPTIONS = (
    "-T",
    "-o",
    "BatchMode=yes",
    "-o",
    "ServerAliveInterval=5",
    "-o",
    "ServerAliveCountMax=3",
    "-o",
    "ConnectTimeout=10",
)


def argv(fleet: Fleet, host: Host, *words: str, tty: bool = False) -> list[str]:
    opts = list(BASE_OPTIONS)
    if tty:  # an interactive command (the TUI, logs -f with colours): a terminal over there
        opts = ["-t", *[o for o in opts if o != "-T"]]
    remote = " ".join(shlex.quote(w) for w in host.remote_argv(*words))
    shared = mux.options(fleet.ssh_command, fleet.ssh_options, fleet.ssh_multiplex)
    return [fleet.ssh_command, *opts, *shared, *fleet.ssh_options, host.ssh, "--", remote]


def bridge_argv(fleet: Fleet, host: Host) -> list[str]:
    return argv(fleet, host, "agent", "bridge")


def explain(host: Host, returncode: int | None, stderr: str, retrying: bool = True) -> str:
    """ssh's exit and stderr as one line: the host, what went wrong, what to do (`retrying`:
    a link that tries again says so; a one-shot command, which exits, says what to check)."""
    err = stderr.strip()
    last = err.splitlines()[-1].strip() if err else ""
    low = err.lower()
    h = f"host {host.name} ({host.ssh})"
    if "host key verification failed" in low or "remote host identification has changed" in low:
        return (
            f"{h}: host key verification failed; connect once with `ssh {host.ssh}` to check "
            f"and accept its key (or fix known_hosts)"
        )
    if "permission denied" in low and ("publickey" in low or "password" in low):
        return (
            f"{h}: ssh authentication failed ({last}); make `ssh {host.ssh}` work without a "
            f"password (a key in ssh-agent or IdentityFile in ~/.ssh/config)"
        )
    if "could not resolve hostname" in low or "name or service not known" in low:
        return f"{h}: unknown host name ({last}); fix ssh = ... in fleet.toml or ~/.ssh/config"
    if "connection refused" in low:
        return f"{h}: no ssh server answers ({last}); is sshd running there, on that port?"
    if "timed out" in low or "no route to host" in low or "network is unreachable" in low:
        then = "retrying" if retrying else "check the network and the address in fleet.toml"
        return f"{h}: unreachable ({last}); {then}"
    if returncode == 127 or "command not found" in low or "no such file or directory" in low:
        return (
            f"{h}: `{host.sgltui}` is not on the remote PATH; install sgltui there or set "
            f'sgltui = "/path/to/bin/sgltui" for this host in fleet.toml'
        )
    if returncode == 126 or "permission denied" in low:
        return f"{h}: cannot run `{host.sgltui}` there ({last}); check its path and mode"
    if "invalid choice: 'bridge'" in low or "invalid choice: 'agent'" in low:
        return (
            f"{h}: its sgltui has no `agent bridge` (an older release); upgrade sgltui there "
            f"to this version"
        )
    if returncode == 255:
        return f"{h}: ssh failed ({last or 'exit 255'}); try `ssh {host.ssh}` by hand"
    if last:
        return f"{h}: {last}"
    return f"{h}: the connection ended (exit {returncode})"
