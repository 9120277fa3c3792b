"""`sgltui agent bridge`: this host's agent socket on stdin/stdout, byte for byte.

Another host reaches this agent with `ssh HOST sgltui agent bridge` (sgltui/fleet/), as
`docker -H ssh://` does with `docker system dial-stdio`: SSH authenticates and encrypts, and the
wire protocol is the local socket's, unchanged (the far client does its own hello, so a version
mismatch is reported there, with the host's name). The agent is started on demand, as for any
command.

The copy is sgltui/byte_pump.py's; with the agent already running, the CLI's main gives it the
socket before loading any command (sgltui/dial.py): this module is for the agent's start.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sgltui.byte_pump import pump
from sgltui.client.connection import START_TIMEOUT_S, spawn_agent
from sgltui.client.errors import AgentError, Unavailable
from sgltui.client.paths import paths


def open_agent_socket(state_dir: Path, profiles_dirs: Sequence[str] = ()) -> socket.socket:
    """A connected socket to the agent of `state_dir`, starting the agent when none answers."""
    path = str(paths(state_dir)["socket"])

    def attempt() -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except OSError:
            s.close()
            raise
        return s

    try:
        return attempt()
    except OSError:
        pass
    spawn_agent(state_dir, profiles_dirs)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            return attempt()
        except OSError:
            if time.monotonic() > deadline:
                raise Unavailable(
                    f"the agent did not come up within {START_TIMEOUT_S:.0f}s; "
                    f"see {paths(state_dir)['log']}"
                ) from None
            time.sleep(0.05)


def run(state_dir: Path, profiles_dirs: Sequence[str] = ()) -> int:
    try:
        sock = open_agent_socket(state_dir, profiles_dirs)
    except (AgentError, OSError) as exc:
        print(f"sgltui agent bridge: {exc}", file=sys.stderr)
        return 1
    pump(sock)
    return 0
