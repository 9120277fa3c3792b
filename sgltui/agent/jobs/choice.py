"""The agent's side of a --choose job (jobs/chooser.py drives; this answers it) and job energy.

`ChoiceHost` is the narrow interface the trial needs from the agent: what the job's slot runs,
the job's counters, and lifecycle commands sent through the jobs' site (agent/jobs/agent_site.py) like
any client's (so a trial's swap is paused around, drained, recorded and refused exactly as a
user's would be). `integrate_energy` adds each second's GPU power of the job's slot to the job
and its current segment (joules), from the telemetry the agent already samples (NVML, or the
simulator's published power).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import msgspec

from sgltui import protocol
from sgltui.agent.jobs.records import JobRecord
from sgltui.jobs.chooser import Refused

if TYPE_CHECKING:
    from sgltui.agent.jobs.runner_child import Runner
    from sgltui.agent.jobs.site_interface import JobsSite
    from sgltui.jobs.progress import Rates


class ChoiceJobs(Protocol):
    """What the trial reads and calls of the jobs host (agent/jobs/jobs_host.py JobsHost)."""

    site: JobsSite
    rates: dict[str, Rates]
    runners: dict[str, Runner]

    def answered(self, rec: JobRecord) -> int: ...
    def failed(self, rec: JobRecord) -> int: ...
    def out_tokens(self, rec: JobRecord) -> int: ...
    def publish(self, rec: JobRecord, event: protocol.JobEvent) -> None: ...
    def persist(self, rec: JobRecord) -> None: ...


class ChoiceHost:
    def __init__(self, jobs: ChoiceJobs) -> None:
        self.jobs = jobs

    def slot_now(self, rec: JobRecord) -> tuple[str | None, str, str | None]:
        """What the job's slot runs; for a pool job, what every slot of the pool runs (a pool
        serving mixed profiles, or rolling, is "swapping": no candidate is measured on it)."""
        site = self.jobs.site
        slot = site.slot(rec.slot)
        if slot is None:
            return None, "missing", None
        pool = rec.pool
        if pool and site.has_pool(pool):
            members = site.pool_members(pool)
            profiles = {m.profile_name for m in members}
            states = {"swapping" if m.swapping else m.state for m in members}
            if site.pool_rolling(pool):
                states.add("swapping")
            if len(profiles) == 1 and len(states) == 1:
                return profiles.pop(), states.pop(), slot.launch_id
            return None, "swapping" if "swapping" in states else "mixed", slot.launch_id
        state = "swapping" if slot.swapping else slot.state
        return slot.profile_name, state, slot.launch_id

    def counters(self, rec: JobRecord) -> tuple[int, int, float]:
        j = self.jobs
        return j.answered(rec), j.out_tokens(rec), float(rec.joules or 0.0)

    def warm_first(self, rec: JobRecord) -> dict | None:
        """The runner's last word on its warm-first pass (jobs/warm_first.py), if any."""
        r = self.jobs.runners.get(rec.id)
        wf = r.progress.get("warm_first") if r is not None else None
        return wf if isinstance(wf, dict) else None

    def remaining(self, rec: JobRecord) -> int | None:
        if rec.total is None:
            return None
        return max(0, rec.total - self.jobs.answered(rec) - self.jobs.failed(rec))

    def concurrency_for(self, rec: JobRecord) -> int | None:
        slot = self.jobs.site.slot(rec.slot)
        if slot is None or rec.auto_for != slot.launch_id:
            return None
        return rec.concurrency

    def time_scale(self, rec: JobRecord) -> float:
        slot = self.jobs.site.slot(rec.slot)
        return slot.time_scale if slot is not None else 1.0

    def job_tok_s(self, rec: JobRecord) -> float:
        rates = self.jobs.rates.get(rec.id)
        return rates.tok_s() if rates is not None else 0.0

    def power_w(self, rec: JobRecord) -> float | None:
        return self.jobs.site.gpu_power_w()

    async def command(self, rec: JobRecord, op: str, args: protocol.PreflightArgs) -> dict:
        from sgltui.agent.errors import OpError

        # a pool job's swap is the pool's rolling swap (never zero routable slots)
        if rec.pool:
            args = msgspec.structs.replace(args, pool=rec.pool)
        else:
            args = msgspec.structs.replace(args, slot=rec.slot)
        try:
            res = await self.jobs.site.command(op, args, f"job {rec.id}")
        except OpError as exc:
            raise Refused(str(exc), exc.code) from None
        except protocol.ProtocolError as exc:  # arguments it cannot take: refused, never a hang
            raise Refused(str(exc), "invalid") from None
        # the trial reads the reply as the wire carries it (JSON values)
        res = protocol.to_builtins(res)
        return res if isinstance(res, dict) else {}

    def publish(self, rec: JobRecord, event: protocol.JobEvent) -> None:
        self.jobs.publish(rec, event)

    def persist(self, rec: JobRecord) -> None:
        self.jobs.persist(rec)


def integrate_energy(rec: JobRecord, power_w: float | None, dt: float) -> None:
    """Add `dt` seconds at `power_w` to the running job and its newest segment."""
    if power_w is None or rec.state != "running":
        return
    joules = power_w * min(5.0, max(0.0, dt))  # a stalled loop does not invent energy
    rec.joules = round(float(rec.joules or 0.0) + joules, 2)
    segs = rec.segments
    if segs and not segs[-1].closed:
        segs[-1].joules = round(float(segs[-1].joules or 0.0) + joules, 2)
