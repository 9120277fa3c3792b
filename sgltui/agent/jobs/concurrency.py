"""A batch job's automatic concurrency: the last bench's best point for the profile its slot
runs, else the server's effective max_running_requests (its capacity card), else a default;
times the pool's slots for a job through a pool. Chosen again for each new launch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sgltui import protocol
from sgltui.agent.jobs.run_args import JobError, concurrency
from sgltui.agent.jobs.runner_child import MAX_CONCURRENCY
from sgltui.agent.jobs.segments import Publish
from sgltui.agent.state import read_json

if TYPE_CHECKING:
    from sgltui.agent.jobs.records import ConcurrencyMode, JobRecord
    from sgltui.agent.jobs.site_interface import JobsSite

DEFAULT_CONCURRENCY = 16


def bench_best(site: JobsSite, profile: str) -> int | None:
    for run in reversed(site.bench_runs()):
        data = read_json(Path(run["path"]), {})
        best = ((data.get("comparison") or {}).get("best") or {}).get(profile)
        if best and best.get("concurrency"):
            return int(best["concurrency"])
    return None


def auto_concurrency(site: JobsSite, slot_id: str) -> tuple[int, str]:
    slot = site.slot(slot_id)
    profile = slot.profile_name if slot else None
    best = bench_best(site, profile) if profile else None
    if best:
        return min(best, MAX_CONCURRENCY), f"the last bench's best point for {profile}"
    card = site.capacity(slot_id)
    mrr = (card or {}).get("max_running_requests")
    if isinstance(mrr, int) and mrr > 0:
        # what the scheduler admits at once: more would only wait in its queue
        return min(mrr, MAX_CONCURRENCY), f"the effective max_running_requests of {profile}"
    return DEFAULT_CONCURRENCY, "default (no capacity card or bench for this profile yet)"


def maybe_auto(site: JobsSite, rec: JobRecord, publish: Publish) -> None:
    """An auto job's concurrency, chosen again once its slot runs a new launch."""
    if rec.concurrency_mode != "auto":
        return
    slot = site.slot(rec.slot)
    if slot is None or slot.state != "ready" or rec.auto_for == slot.launch_id:
        return
    n, why = auto_concurrency(site, rec.slot)
    if rec.pool and site.has_pool(rec.pool):
        k = len(site.pool_members(rec.pool))
        n, why = n * k, f"{why}, x {k} slots of the pool"
    if why.startswith("default") and slot.launch_id and not rec.auto_tries:
        rec.auto_tries = 1  # the capacity card may come a moment after ready
        return
    rec.auto_for = slot.launch_id
    rec.auto_tries = None
    if n != rec.concurrency:
        rec.concurrency = n
        publish(rec, protocol.JobConcurrency(concurrency=n, why=why))


def initial_concurrency(
    site: JobsSite, args: protocol.JobRunArgs, slot_id: str, choose: bool
) -> tuple[ConcurrencyMode, int, str]:
    """A new job's (mode, concurrency, why): as given, or automatic (times the pool's slots
    for a job through a pool); a --choose job's is always automatic."""
    conc_arg = args.concurrency
    if choose and conc_arg not in (None, "auto"):
        raise JobError(
            "--choose measures each profile at its automatic concurrency; leave out --concurrency"
        )
    if conc_arg not in (None, "auto"):
        return "fixed", concurrency(conc_arg), "given"
    conc, why = auto_concurrency(site, slot_id)
    if args.pool:
        members = site.pool_members(str(args.pool))
        conc, why = conc * len(members), f"{why}, x {len(members)} slots of the pool"
    return "auto", conc, why
