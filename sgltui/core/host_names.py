"""Whether a host name can be a server's --host: an IP address, or a name (RFC 1123) that this
host resolves, asked with a time limit and remembered a minute (core/validate.py's check)."""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time

from sgltui.core.safe_text import printable

_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
# A name that does not resolve within this long is let through (DNS may be slow right now; the
# start would then say so); one that fails is refused. Answers are kept a minute.
RESOLVE_TIMEOUT_S = 2.0
_RESOLVE_TTL_S = 60.0
_resolved: dict[str, tuple[float, str | None]] = {}


def host_problem(host: str) -> str | None:
    """Why `host` cannot be a server's --host, or None: an IP address, or a host name (RFC 1123)
    that resolves here."""
    shown = f'"{printable(host, 60)}"'
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host
    if not name or len(name) > 253 or not all(_HOST_LABEL.fullmatch(p) for p in name.split(".")):
        return f"{shown} is not an IP address or a host name"
    now = time.monotonic()
    hit = _resolved.get(name)
    if hit is not None and now - hit[0] < _RESOLVE_TTL_S:
        return hit[1]
    answer: list[str | None] = []

    def resolve() -> None:
        try:
            socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
            answer.append(None)
        except OSError as exc:  # socket.gaierror: the name does not resolve
            answer.append(
                f"{shown} is not an IP address or a host name this host resolves "
                f"({exc.strerror or exc})"
            )

    # A daemon thread: getaddrinfo has no timeout, and a hung lookup must not hold up the exit.
    lookup = threading.Thread(target=resolve, name="sgltui-resolve", daemon=True)
    lookup.start()
    lookup.join(RESOLVE_TIMEOUT_S)
    if not answer:
        return None  # not known yet: neither refused nor cached
    problem = answer[0]
    _resolved[name] = (now, problem)
    return problem
