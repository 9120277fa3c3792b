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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.slot.server_url import slot_url
from sgltui.core import launch_secrets
from sgltui.core.profiles import ProfileError

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext
    from sgltui.agent.pools.gateway import Gateway
    from sgltui.agent.slot.slot import Slot


def wanted(ready: Sequence[Slot], now: str | None) -> str | None:
    """The key a gateway routing `ready` must ask for: the first keyed slot's, else none.
    `now` (the gateway's) when no slot is ready: an empty pool changes nothing."""
    if not ready:
        return now
    return next((s.api_key for s in ready if s.api_key), None)


def key_of(ctx: AgentContext, profile: str, args: protocol.Args) -> str | None:
    """The API key `profile` will serve with, its key files read (blocking); None when it has
    none or it cannot be read (the launch then refuses, in the swap's own words)."""
    try:
        return launch_secrets.with_key_files(ctx.get_profile(profile, args).profile).api_key
    except (OpError, ProfileError, OSError):
        return None


async def close_door(
    gw: Gateway, slot: Slot, routed: Sequence[Slot], publish: Callable[[Any], object]
) -> None:
    """Before `slot` is added to `gw`: restart the gateway asking for `slot`'s key when it does
    not already, with the workers `routed` now, each registered with its own key. A keyless
    slot, or one whose key the gateway asks already, changes nothing."""
    await close_door_with(gw, slot.api_key, routed, publish)


async def close_door_with(
    gw: Gateway, key: str | None, routed: Sequence[Slot], publish: Callable[[Any], object]
) -> None:
    """`close_door` for a key known before any slot serves it (a roll to a keyed profile closes
    the door before the slot is swapped: then nothing that routes the new worker, the roll's
    add back, a sync or a restart, can find a gateway that serves without the key)."""
    if not key or key == gw.api_key:
        return
    for s in routed:
        if s.api_key:  # its own key, not the gateway's new one
            gw.keys[slot_url(s)] = s.api_key
    gw.api_key = key
    await gw.stop()
    await gw.start([slot_url(s) for s in routed])
    publish(protocol.GatewayStart(pool=gw.pool, pid=gw.pid, endpoint=gw.endpoint))
