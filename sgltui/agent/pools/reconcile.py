"""Reconcile, don't assume: what a pool's gateway routes is compared with what it must route.

The agent knows what each host.toml pool's gateway must route: the pool's ready, routable slots
(pools.Pools.routable: ready, no swap under way, not held out by a roll). smg says what it routes
(GET /workers). After every change and every RECONCILE_S seconds, `reconcile` compares the two
and repairs the difference, the way a Kubernetes controller reconciles desired and observed
state:

- a routable slot smg does not list is added (POST /workers, with the slot's API key: smg's
  backend detection asks the worker with it, and got 401 without, issue 35 F2);
- a worker smg routes that no routable slot stands for (a dead server, a slot stopped, a URL
  nobody asked for) is removed.

A worker smg lists as draining is left to its 5 s timer (a POST for its URL meanwhile answers
409 and adds nothing); the next pass adds it again. A slot a roll holds out is the roll's.

Expected changes (a slot became ready, a slot stopped) are the ordinary path; a difference the
agent did not make (it believed the worker routed, smg had lost it: issue 35 F1, a kill -9 mid-
roll; or someone removed it behind its back) is a repair, said in a `pool.worker` event with
`repair` set and a line in agent.log.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sgltui import protocol
from sgltui.agent.pools.gateway import Gateway, WorkerState
from sgltui.agent.slot.slot import Slot

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger("sgltui.agent.reconcile")

RECONCILE_S = 2.0  # how often a gateway's workers are compared when nothing changed
POSTED_GRACE_S = 3.0  # a worker POSTed this recently and not yet listed is not missing


@dataclass
class Plan:
    """What one pass does: slots to add, worker URLs to remove (and which are repairs)."""

    add: list[Slot] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    repairs: dict[str, str] = field(default_factory=dict)  # url -> what was wrong


def plan(
    gw: Gateway,
    members: list[Slot],
    routable: Callable[[Slot], bool],
    held_out: set[str],
    observed: list[WorkerState],
    url_of: Callable[[Slot], str],
) -> Plan:
    """The difference between what `gw` must route and what it says it routes (`observed`)."""
    out = Plan()
    now = time.monotonic()
    seen: dict[str, set[str]] = {}
    for w in observed:
        seen.setdefault(w.url, set()).add(w.status)
    by_url = {url_of(s): s for s in members}
    for url, s in by_url.items():
        if s.id in held_out or not routable(s):
            continue
        statuses = seen.get(url, set())
        if not statuses and now - gw.posted.get(url, -POSTED_GRACE_S) < POSTED_GRACE_S:
            continue  # POSTed a moment ago: smg lists it once its registration job runs
        if not statuses:
            out.add.append(s)
            if url in gw.urls:  # the agent believed it routed
                out.repairs[url] = f"slot {s.id} is ready but the gateway had lost it"
        elif statuses == {"failed"}:
            # smg gave up on it (its registration failed while the server was down): a ready
            # server is registered afresh
            out.remove.append(url)
            out.add.append(s)
            out.repairs[url] = f"slot {s.id} is ready but the gateway had it as failed"
        # draining only: smg's timer ends it in seconds; a later pass adds it again
    for url, statuses in seen.items():
        if statuses == {"draining"}:
            continue
        owner = by_url.get(url)
        if owner is not None and (owner.id in held_out or routable(owner)):
            continue
        out.remove.append(url)
        if owner is None:
            # One the agent added itself is its own leftover, not a repair: a slot whose server
            # moved to another port, as a warm swap's does (agent/swap/standby.py).
            if url not in gw.urls:
                out.repairs[url] = f"the gateway routed {url}, which no slot of the pool serves"
        elif url not in gw.urls:
            out.repairs[url] = f"the gateway routed slot {owner.id}, which is {owner.state}"
    return out


async def apply(gw: Gateway, p: Plan, url_of: Callable[[Slot], str], publish: Callable) -> None:
    """Carry out `p` on `gw`; each repair is said (event and agent.log)."""
    for s in p.add:
        url = url_of(s)
        if url in p.remove:  # a failed entry: gone before it is registered again
            await gw.remove_worker(url)
            await gw.wait_gone(url, timeout=2.0)
        await gw.add_worker(url, s.api_key)
        why = p.repairs.get(url)
        if why is not None:
            log.warning("gateway %s: slot %s: %s; added it again", gw.pool, s.id, why)
            publish(
                protocol.PoolWorkerChanged(
                    pool=gw.pool, worker=s.id, url=url, step="added", repair=why
                )
            )
    for url in p.remove:
        if any(url_of(s) == url for s in p.add):
            continue  # removed just above (a failed entry registered afresh)
        await gw.remove_worker(url)
        why = p.repairs.get(url)
        if why is not None:
            log.warning("gateway %s: %s; removed it", gw.pool, why)
            publish(protocol.PoolWorkerChanged(pool=gw.pool, url=url, step="removed", repair=why))
