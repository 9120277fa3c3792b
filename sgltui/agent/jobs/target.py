"""Where a batch job sends: its target, a slot or a pool (first-class in its record, its view,
its job.start event and the report), and the URL it may send to now.

A job through a pool keeps the pool's first slot as its reference slot (`rec.slot`: whose
capacity card and engine readings its automatic concurrency and stall watch read), but it is
the pool's job: the gateway spreads it over every slot of the pool, and one slot's swap does
not hold it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sgltui.agent.jobs.records import JobRecord, target_record
from sgltui.protocol import JobTarget

if TYPE_CHECKING:
    from sgltui.agent.jobs.site_interface import JobsSite


def target_of(rec: JobRecord) -> JobTarget:
    """The job's target; a record written before targets existed says it by `pool`/`slot`."""
    return rec.target or target_record(rec.slot, rec.pool)


def send_to(site: JobsSite, rec: JobRecord) -> tuple[str | None, str | None, str]:
    """(url, api_key, why not) for the job's slot (or pool) now."""
    if rec.pool:
        # Through the pool's gateway: one slot's swap does not hold the job (the gateway
        # sends its requests to the other slots meanwhile).
        if rec.hold:
            return None, None, "held"
        return site.pool_target(rec.pool)
    slot = site.slot(rec.slot)
    if slot is None:
        return None, None, f"slot {rec.slot} does not exist"
    if slot.swapping or rec.hold:
        return None, None, "held for a swap"
    if slot.state != "ready":
        return None, None, f"waiting for slot {slot.id} to be ready ({slot.state})"
    # Straight to the server by default: the job holds itself across swaps (so the front's
    # holding adds nothing), and the front passes every answer through the agent's own
    # event loop: measured at zero time scale (bench/bench_job.py part 2), 5,000 requests
    # took 24 s through the front with the agent at 15% of a core, 16.5 s direct at 4%.
    # SGLTUI_JOB_VIA_FRONT=1 sends through the slot's front when it routes (read from the
    # front itself: slot.status() walks the process tree, and this runs every second).
    via_front = slot.front_url if site.jobs_config.via_front else None
    return via_front or slot.url, slot.api_key, ""
