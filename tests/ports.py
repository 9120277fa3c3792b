"""Ports for servers the tests start later (simulators, agents, gateways, web).

They are picked below the kernel's ephemeral range (32768 up on Linux): a port that bind(0)
hands out is in that range, and by the time the server binds it, a client socket (an ssh
connection that lives for a whole test module, an HTTP keep-alive) can hold it as its local
port; the launch then fails as 'port in use'. CI saw exactly that: a fleet test's profile port
was taken for the module's whole life. A port is also never handed out twice by one process,
so two servers of one test cannot be given the same one.
"""

from __future__ import annotations

import secrets
import socket

LOW, SPAN = 20000, 12000  # 20000-31999: below 32768, above the usual service ports
_handed_out: set[int] = set()


def server_port() -> int:
    for _ in range(500):
        port = LOW + secrets.randbelow(SPAN)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {LOW}-{LOW + SPAN - 1}")
