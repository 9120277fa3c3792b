"""The demo's ports: its own free ones when the usual are held (a second user, or a second
`sgltui demo`, on the same host). The usual ones stay the first choice: clients keep their URL.
"""

from __future__ import annotations

import socket

from sgltui.core import placement

LOOPBACK = "127.0.0.1"
SERVER_PORT = 30000  # the demo profiles' [server] port (profiles/base.toml)
SCAN = 40  # slot ports looked at from placement.SLOT_PORT_BASE, in its steps


def free(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def front_port(usual: int = placement.DEFAULT_POOL_PORT) -> int:
    """The usual front port if free, else the first free one above it (else one the OS picks)."""
    for port in range(usual, usual + 200):
        if free(port):
            return port
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def busy_slot_ports() -> dict[int, str]:
    """Ports that slots would be given (placement.assign_ports' candidates and their DP-attention
    range) and something already holds: the layout keeps its slots clear of them."""
    out: dict[int, str] = {}
    for k in range(SCAN):
        for port in placement.footprint(placement.SLOT_PORT_BASE + k * placement.SLOT_PORT_STEP):
            if not free(port):
                out[port] = "in use"
    return out
