"""A pool's worker out of its gateway around a standby add or a warm swap of its slot (outside
a roll, which does the same for itself: agent/pools/pools.py): smg stops routing to the server
(the DELETE awaited, then its requests in flight drained) before the server is paused, so its
health probe never finds a paused server and marks it UnHealthy; afterwards the slot's server,
wherever it serves now, is added back and the gateway seen routing to it before the next slot
of the pool is taken out. The pool keeps a ready worker at every moment.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from sgltui.agent.pools import gateway as gw_mod
from sgltui.agent.pools import keys as pool_keys
from sgltui.agent.slot.server_url import slot_url
from sgltui.agent.slot.slot import READY

if TYPE_CHECKING:
    from sgltui.agent.slot.slot import Slot

WORKER_READY_S = 60.0  # as the roll's: smg sees a ready server within a health check or two
DRAIN_S = 30.0


def _pool_of(pools: Any, slot_id: str) -> str | None:
    for name, place in pools.places.items():
        if slot_id in place.slots and name in pools.gateways:
            return name
    return None


def refusal(pools: Any, slot: Slot, doing: str) -> str | None:
    """Why the slot's worker cannot leave its gateway now (it is the pool's only routable
    one: its clients would get 503 while it sleeps); None when it can, or has no gateway.
    Asked before the work begins (worker_out then proceeds)."""
    name = _pool_of(pools, slot.id)
    if name is None or slot.id in pools.out or slot.state != READY:
        return None
    if any(o is not slot and pools.routable(o) for o in pools.members(name)):
        return None
    return (
        f"{doing} refused: slot {slot.id} is pool {name}'s only routable worker (its clients "
        "would get 503 while it sleeps)"
    )


# What to do about a refusal (its fix, in the CLI's words and the TUI's).
REFUSAL_FIX = "start another slot of the pool first"
REFUSAL_FIX_TUI = "start another slot of the pool first (select it, then {key:server.start})"


@contextlib.asynccontextmanager
async def worker_out(pools: Any, slot: Slot) -> AsyncIterator[None]:
    """`pools`: the agent's (agent/pools/pools.py Pools)."""
    name = _pool_of(pools, slot.id)
    if name is None or slot.id in pools.out:  # no gateway, or a roll took it out already
        yield
        return
    gw = pools.gateways[name]
    routed = slot.state == READY  # (its swap may have begun: the gateway still routes it)
    pools.out.add(slot.id)
    try:
        if routed:
            url = slot_url(slot)
            async with pools.lock(name):
                await gw.remove_worker(url)
            await gw_mod.wait_in_flight_zero(url, DRAIN_S, slot.api_key)
        yield
    finally:
        pools.out.discard(slot.id)
        if slot.state == READY:
            url = slot_url(slot)
            async with pools.lock(name):
                # now keyed: the gateway asks for the key before the worker is routed
                others = [o for o in pools.members(name) if o is not slot and pools.routable(o)]
                await pool_keys.close_door(gw, slot, others, pools.ctx.bus.publish)
                await gw.add_worker(url, slot.api_key)
            await gw.wait_ready(url, WORKER_READY_S)
        pools.sync()
