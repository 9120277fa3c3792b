"""Whether a batch job that should be sending gets answers (sgltui/jobs/stall.py decides from
the job's counters and the slot's engine readings); said once as job.stalled, and job.stall_over
when answers come again."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from sgltui import protocol
from sgltui.agent.jobs.records import JobRecord, answered, failed
from sgltui.agent.jobs.runner_child import Runner
from sgltui.agent.jobs.segments import Publish
from sgltui.jobs.stall import StallWatch

if TYPE_CHECKING:
    from sgltui.agent.jobs.site_interface import JobsSite

log = logging.getLogger("sgltui.agent.jobs")  # these lines were the jobs host's in agent.log


class Stalls:
    def __init__(self, site: JobsSite, publish: Publish) -> None:
        self.site = site
        self.publish = publish
        self.watches: dict[str, StallWatch] = {}  # per job

    def _tokens_at(self, slot_id: str) -> float | None:
        """When (time.monotonic()) the slot's latest engine reading showed tokens being made."""
        engine = self.site.engine(slot_id)
        if not engine or not float(engine.get("gen_throughput") or 0.0) > 0.0:
            return None
        age = time.time() - float(engine.get("ts") or 0.0)  # the reading's wall time
        return time.monotonic() - max(0.0, age)

    def watch(self, rec: JobRecord, r: Runner | None) -> None:
        """A job that should be sending and gets no answer says so (sgltui/jobs/stall.py)."""
        watch = self.watches.get(rec.id)
        if watch is None:
            watch = self.watches[rec.id] = StallWatch(float(self.site.jobs_config.stall_s))
        slot = self.site.slot(rec.slot)
        was = watch.stalled
        if (
            rec.state != "running"
            or r is None
            or r.checked is None
            or r.sent_paused
            or slot is None
            or slot.state != "ready"
        ):
            watch.reset()  # not meant to send now: waiting, paused, held, its server down
        elif slot.unresponsive:
            # the slot knows why nothing comes back (agent/slot/liveness.py): said at once, by name
            line = (
                f"stalled: slot {slot.id}'s server ({slot.profile_name}) is unresponsive: "
                f"{slot.unresponsive}"
            )
            if watch.stalled != line:
                watch.stalled = rec.stalled = line
                log.warning("job %s: %s", rec.id, line)
                self.publish(rec, protocol.JobStalled(message=line))
            return
        else:
            server = f"slot {slot.id}'s server ({slot.profile_name})"
            done = answered(rec) + failed(rec)
            new = watch.observe(
                time.monotonic(), done, r.progress, server, self._tokens_at(slot.id)
            )
            if new:
                rec.stalled = new
                log.warning("job %s: %s", rec.id, new)
                self.publish(rec, protocol.JobStalled(message=new))
                return
        if was and watch.stalled is None:
            rec.stalled = None
            self.publish(rec, protocol.JobStallOver())

    def end(self, rec: JobRecord) -> None:
        """A job that finishes is stalled no more: answers that came back between two of the
        stall watch's ticks can finish it before the watch sees them (a server that resumed
        with little left to do), and a done job must not say 'stalled'."""
        watch = self.watches.pop(rec.id, None)
        stalled, rec.stalled = rec.stalled, None
        if stalled is not None or (watch is not None and watch.stalled):
            self.publish(rec, protocol.JobStallOver())
