"""What holds a slot, so that a swap or restart of it asks first (confirm=true, `--yes`): a
lease by hand on what it serves (agent/endpoint/leases.py), a batch job pinned to it (agent/jobs/jobs_host.py),
a bench run sweeping it (agent/children.py). The operations refuse with these words (`swap
refused: ` before them); the preflight reply carries them, so that the TUI asks every question
after one round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sgltui import protocol

if TYPE_CHECKING:
    from sgltui.agent.children import Children
    from sgltui.agent.endpoint.leases import Leases
    from sgltui.agent.jobs.jobs_host import JobsHost


def held(leases: Leases, batch: JobsHost, slot_id: str) -> protocol.Pin | None:
    """A lease by hand, else a pinned batch job (the order the refusals take)."""
    lease = leases.by_hand_on(slot_id)
    if lease is not None:
        what = f"{lease.profile} on slot {slot_id} is leased by {lease.holder}"
        return protocol.Pin(by="lease", what=what)
    rec = batch.pinned_on(slot_id)
    if rec is not None:
        what = f"batch job {rec.name} ({rec.id}) is pinned to slot {slot_id}"
        return protocol.Pin(by="job", what=what)
    return None


def bench(
    children: Children, slot_id: str, client: str | None
) -> tuple[dict[str, Any], protocol.Pin] | None:
    """The bench run sweeping the slot (none for its own runner's swaps), and its words."""
    run = children.bench_on(slot_id, client)
    if run is None:
        return None
    progress = run.get("progress") or {}
    at = ""
    if progress.get("point") and progress.get("points"):
        at = f", point {progress['point']}/{progress['points']}"
    return run, protocol.Pin(
        by="bench", what=f"bench run {run['run_id']} is using slot {slot_id}{at}"
    )


def of(
    leases: Leases, batch: JobsHost, children: Children, slot_id: str, client: str | None
) -> protocol.Pin | None:
    """The first that holds the slot, in the order a swap checks them."""
    found = bench(children, slot_id, client)
    return held(leases, batch, slot_id) or (found[1] if found else None)
