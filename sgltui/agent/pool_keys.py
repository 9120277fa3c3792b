"""Which API key a pool's gateway asks its clients for, and the restart that changes it.

smg checks one client key (`--api-key`), fixed when it starts (smg 1.13 has no flag file, no
environment variable and no control-plane call for it), and sends each worker the key given for
it in POST /workers. A gateway started without a key therefore serves anyone, even through a
worker whose profile has a key: the gateway authenticates to that worker with the worker's own
key. So the gateway must ask for the key of the keyed workers before the first of them is
routed: `close_door` restarts it with that key (the workers routable now registered again, each
with its own key) just before a keyed worker is added, the rolling swap's step "add back".

A mixed pool (a roll under way) asks for the newest keyed profile's key: the keyless workers
still routed answer only clients that hold it (stricter than they were, never looser). A roll
back to a keyless profile keeps the key until the roll is over (the pool's sync then restarts
the gateway keyless, as it restarts it for a new model). Why not the agent's front in front of
smg: it would cost each relayed token the front's 35-52 us instead of smg's 10 us
(docs/host-and-pools.md), for a check smg can do itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sgltui.agent.endpoints import slot_url

if TYPE_CHECKING:
    from sgltui.agent.gateway import Gateway
    from sgltui.agent.slot import Slot


def wanted(ready: Sequence[Slot], now: str | None) -> str | None:
    """The key a gateway routing `ready` must ask for: the first keyed slot's, else none.
    `now` (the gateway's) when no slot is ready: an empty pool changes nothing."""
    if not ready:
        return now
    return next((s.api_key for s in ready if s.api_key), None)


async def close_door(gw: Gateway, slot: Slot, routed: Sequence[Slot]) -> bool:
    """Before `slot` is added to `gw`: restart the gateway asking for `slot`'s key when it does
    not already (True), with the workers `routed` now, each registered with its own key. A
    keyless slot, or one whose key the gateway asks already, changes nothing (False)."""
    if not slot.api_key or slot.api_key == gw.api_key:
        return False
    for s in routed:
        if s.api_key:  # its own key, not the gateway's new one
            gw.keys[slot_url(s)] = s.api_key
    gw.api_key = slot.api_key
    await gw.stop()
    await gw.start([slot_url(s) for s in routed])
    return True
