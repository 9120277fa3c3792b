"""`sgltui agent bridge`: this host's agent socket on stdin/stdout, byte for byte.

Another host reaches this agent with `ssh HOST sgltui agent bridge` (sgltui/fleet/), as
`docker -H ssh://` does with `docker system dial-stdio`: SSH authenticates and encrypts, and the
wire protocol is the local socket's, unchanged (the far client does its own hello, so a version
mismatch is reported there, with the host's name). The agent is started on demand, as for any
command.

Two threads copy the two directions independently: one copy blocked on a full pipe (a client
not reading pushes) never stops the other, so no deadlock between the agent's backpressure and
ours.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from sgltui.client.connection import START_TIMEOUT_S, spawn_agent
from sgltui.client.errors import AgentError, Unavailable
from sgltui.client.paths import paths

CHUNK = 1 << 16


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


def _stdin_to_socket(sock: socket.socket, stdin_fd: int) -> None:
    try:
        while True:
            data = os.read(stdin_fd, CHUNK)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    # The far side closed its end: let the agent see the end of the requests; its replies
    # still come back until it closes the connection.
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def pump(sock: socket.socket, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Copy stdin to the socket and the socket to stdout until the agent closes the connection
    (or stdout goes away)."""
    t = threading.Thread(target=_stdin_to_socket, args=(sock, stdin_fd), daemon=True)
    t.start()
    try:
        while True:
            data = sock.recv(CHUNK)
            if not data:
                break
            view = memoryview(data)
            while view:
                n = os.write(stdout_fd, view)
                view = view[n:]
    except OSError:  # stdout closed (ssh went away) or the connection was reset
        pass
    finally:
        sock.close()


def run(state_dir: Path, profiles_dirs: Sequence[str] = ()) -> int:
    try:
        sock = open_agent_socket(state_dir, profiles_dirs)
    except (AgentError, OSError) as exc:
        print(f"sgltui agent bridge: {exc}", file=sys.stderr)
        return 1
    pump(sock)
    return 0
