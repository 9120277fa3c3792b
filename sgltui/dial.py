"""`sgltui agent bridge` without the CLI: what every fleet command runs on each host over ssh
(`ssh HOST sgltui agent bridge`), so its start is in every host's answer, and in every
`fleet status` once per host. Loading the CLI for it (argparse, asyncio, the protocol's types)
costs ~150 ms of CPU where connecting the socket and copying bytes needs the standard library.

The CLI's main comes here first: for exactly `[--state-dir DIR] agent bridge` with the
agent already answering on its socket, the bytes are copied here; anything else (another
command, or no agent yet, which the full command starts) goes to the CLI as before.
"""

from __future__ import annotations

import socket

from sgltui.byte_pump import pump
from sgltui.core import hangup, locations

SOCKET = "agent.sock"  # client/paths.py's name (a test holds them equal): that package is heavy


def bridge_state_dir(words: list[str]) -> str | None:
    """The --state-dir of `[--state-dir DIR] agent bridge` ("" for none), else None."""
    if words == ["agent", "bridge"]:
        return ""
    if len(words) == 4 and words[0] == "--state-dir" and words[2:] == ["agent", "bridge"]:
        return words[1]
    return None


def try_bridge(words: list[str]) -> bool:
    """Bridge stdin/stdout to a running agent when `words` ask exactly that; False: the CLI's
    turn (another command, or no agent answers: the CLI's bridge starts one)."""
    state = bridge_state_dir(words)
    if state is None:
        return False
    path = str(locations.state_dir(state or None) / SOCKET)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return False
    hangup.watch()  # the ssh connection gone: end, as the CLI's bridge does
    pump(sock)
    return True
