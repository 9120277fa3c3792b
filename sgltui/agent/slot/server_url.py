"""Where a slot's server answers, as an URL a client on this host can open (a server bound to
every address is reached on loopback). Pools (their gateway's workers), the batch jobs' site and
telemetry all need it; a leaf module so that none imports another for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sgltui.agent.slot.slot import Slot


def connect_host(host: str) -> str:
    """The address to connect to for a server bound on `host`."""
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def slot_url(slot: Slot) -> str:
    host = connect_host(slot.server_host)
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{slot.port}"
