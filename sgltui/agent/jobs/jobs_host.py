"""Batch jobs in the agent: one runner child per job (sgltui/jobs/worker.py), driven from here.

Why a child process: the runner's HTTP and JSON work (thousands of completions a second against
a fast server) would otherwise share the agent's event loop with every viewer; here the agent
reads two progress lines a second per job and writes a few control lines.

What this holds:
- each job's record in STATE_DIR/jobs/ID.json (atomic writes), so a restarted agent (crash,
  kill -9, reboot) starts a new runner that resumes from the output file;
- when a job may send: not paused by the user, its slot ready, no swap of the slot under way.
  `before_swap` holds the slot's jobs and waits until nothing is in flight (or, forced, cancels
  and requeues what is), `after_swap` points them at the new server and lets them go;
- per-profile segments (completions, tokens, time on each launch) for status and the report;
- the ops: job_run, job_status, job_list, job_pause, job_resume, job_cancel, job_set.

Its parts, each in its own module: the records on disk and their counters (job_records), the
runner child (job_runner), where a job sends: a slot or a pool (job_target), its segments
(job_segments), automatic concurrency (job_concurrency), the stall watch (job_stall), the view
(job_view), job_run's checks (job_run_args), a --choose trial's side (job_choice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import msgspec

from sgltui import protocol
from sgltui.agent.jobs import segments as job_segments
from sgltui.agent.jobs.choice import ChoiceHost, integrate_energy
from sgltui.agent.jobs.concurrency import (
    DEFAULT_CONCURRENCY,
    auto_concurrency,
    initial_concurrency,
    maybe_auto,
)
from sgltui.agent.jobs.records import (
    ACTIVE,
    FINISHED,
    JobRecord,
    JobStore,
    answered,
    failed,
    new_record,
    out_tokens,
)
from sgltui.agent.jobs.run_args import JobError, check_paths, concurrency, find_job, trial
from sgltui.agent.jobs.runner_child import (
    MAX_CONCURRENCY,
    Runner,
    read_lines,
    say_launch,
    start_runner,
)
from sgltui.agent.jobs.site_interface import JobsSite
from sgltui.agent.jobs.stall_watch import Stalls
from sgltui.agent.jobs.target import send_to, target_of
from sgltui.agent.jobs.view import job_view
from sgltui.core.tasks import spawn
from sgltui.jobs.chooser import Chooser
from sgltui.jobs.progress import Rates
from sgltui.protocol import JobView

__all__ = [
    "ACTIVE",
    "DEFAULT_CONCURRENCY",
    "FINISHED",
    "MAX_CONCURRENCY",
    "Deferred",
    "JobError",
    "JobsHost",
]

log = logging.getLogger("sgltui.agent.jobs")

CHECK_TIMEOUT_S = 600.0
PROGRESS_EVENT_S = 15.0
RESPAWN_MAX = 5


class Deferred:
    """A reply computed after the command lock is released (like operations.Wait)."""

    def __init__(self, coro: Any) -> None:
        self.coro = coro

    async def wait(self) -> Any:
        return await self.coro


class JobsHost:
    # what agent/jobs/choice.py reads and calls (the trial's narrow view of the jobs host)
    answered = staticmethod(answered)
    failed = staticmethod(failed)
    out_tokens = staticmethod(out_tokens)
    publish = property(lambda self: self._publish)

    def __init__(self, site: JobsSite) -> None:
        self.site = site  # all it sees of the agent (agent/jobs/site_interface.py)
        self.store = JobStore(site.jobs_dir)  # the records on disk (agent/jobs/records.py)
        self.jobs: dict[str, JobRecord] = {}  # id -> record (what is persisted)
        self.runners: dict[str, Runner] = {}
        self.rates: dict[str, Rates] = {}
        self._tick_task: asyncio.Task | None = None
        self._closing = False
        self._progress_ev: dict[str, float] = {}
        self.stalls = Stalls(site, self._publish)  # agent/jobs/stall_watch.py
        self.choosers: dict[str, Chooser] = {}  # --choose jobs' trials (jobs/chooser.py)
        self._choice_host = ChoiceHost(self)

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        for rec in self.store.load():
            self.jobs[rec.id] = rec
            self.rates[rec.id] = Rates()
            if rec.state in ACTIVE:
                rec.respawns = 0
                self._publish(rec, protocol.JobResumeAfterRestart(answered=answered(rec)))
                self._choose(rec)
                await self._spawn(rec)
        self._tick_task = spawn(self._tick(), "jobs: tick")

    async def close(self) -> None:
        """Agent exit: runners stop (what they hold is written); records stay resumable."""
        self._closing = True
        if self._tick_task:
            self._tick_task.cancel()
        for ch in self.choosers.values():
            ch.close()
        for r in list(self.runners.values()):
            r.send({"op": "stop"})
        for jid, r in list(self.runners.items()):
            await r.reap(10.0)
            self._persist(self.jobs[jid], force=True)

    # ---- records ---------------------------------------------------------------------------

    def persist(self, rec: JobRecord) -> None:
        self.store.save(rec, force=True)

    def _persist(self, rec: JobRecord, force: bool = False) -> None:
        self.store.save(rec, force)

    def _publish(self, rec: JobRecord, event: protocol.JobEvent) -> None:
        """A job's event, stamped with the job, its client and its slot."""
        self.site.publish(
            msgspec.structs.replace(event, job=rec.id, client=rec.client, slot=rec.slot)
        )

    def _choose(self, rec: JobRecord) -> None:
        """A --choose job gets its trial's driver (jobs/chooser.py); its state is rec.choose."""
        if rec.choose and rec.id not in self.choosers:
            watch_s = float(self.site.jobs_config.choose_watch_s)
            self.choosers[rec.id] = Chooser(self._choice_host, rec, watch_s=watch_s)

    def find(self, ref: object) -> JobRecord:
        """A job by id or name; without one, the newest active job (else the newest)."""
        return find_job(self.jobs, ref)

    # ---- the runner child ------------------------------------------------------------------

    async def _spawn(self, rec: JobRecord) -> Runner:
        r = await start_runner(rec, self.store.log_path(rec.id))
        self.runners[rec.id] = r
        rec.state = "checking"
        rec.pid = r.proc.pid
        r.reader = spawn(self._read(rec, r), f"job {rec.id}: runner reader")
        return r

    async def _read(self, rec: JobRecord, r: Runner) -> None:
        try:
            async for msg in read_lines(r):
                self._on_message(rec, r, msg)
        finally:
            await r.proc.wait()
            await self._on_exit(rec, r)

    def _on_message(self, rec: JobRecord, r: Runner, msg: dict) -> None:
        t = msg.get("t")
        if t == "checked":
            r.checked = msg
            # The output file is the truth (agent/jobs/segments.py)
            job_segments.place_resumed(rec, msg)
            rec.total = msg["total"]
            rec.stamp = msg.get("stamp")
            rec.base_ok = msg["resumed_ok"]
            rec.base_failed = msg["resumed_failed"]
            rec.base_out_tokens = msg["resumed_out_tokens"]
            rec.run_done = rec.run_failed = rec.run_out_tokens = 0
            rec.state = "waiting"
            if msg.get("repaired_bytes"):
                self._publish(rec, protocol.JobRepaired(cut_bytes=msg["repaired_bytes"]))
            self._publish(
                rec,
                protocol.JobChecked(
                    total=msg["total"],
                    already_answered=msg["resumed_ok"],
                    already_failed=msg["resumed_failed"],
                ),
            )
            r.checked_ev.set()
            self._sync(rec)
            self._persist(rec, force=True)
        elif t in ("progress", "paused", "done"):
            self._on_progress(rec, r, msg)
            if t == "paused":
                r.paused_ev.set()
            if t == "done":
                r.final = msg
        elif t == "error":
            r.error = str(msg.get("message"))
            r.checked_ev.set()

    def _on_progress(self, rec: JobRecord, r: Runner, msg: dict) -> None:
        prev = r.progress
        r.progress = msg
        disk = msg.get("disk_error")
        if disk != rec.disk_error:
            # the runner stopped sending (or goes on) because the output cannot (or can again)
            # be written: said at once, not after the figures have gone stale
            if disk:
                rec.disk_error = disk
                log.warning("job %s: %s", rec.id, disk)
                self._publish(rec, protocol.JobDiskError(message=disk))
            else:
                rec.disk_error = None
                self._publish(rec, protocol.JobDiskOk())
            self._sync(rec)
        d_done = msg["done"] - prev.get("done", 0)
        d_failed = msg["failed"] - prev.get("failed", 0)
        d_out = msg["out_tokens"] - prev.get("out_tokens", 0)
        d_in = msg["in_tokens"] - prev.get("in_tokens", 0)
        new_segment = False
        if d_done or d_failed:
            n_segs = len(rec.segments)
            seg = job_segments.current(rec, self.site.info_hash, self._publish)
            new_segment = len(rec.segments) != n_segs
            if seg is not None:
                seg.completions += d_done
                seg.failed += d_failed
                seg.out_tokens += d_out
                seg.in_tokens += d_in
                seg.last = time.time()
        # the totals and the segments change together: a record saved between the two would
        # count answers a restarted agent could not place in any segment
        rec.run_done, rec.run_failed = msg["done"], msg["failed"]
        rec.run_out_tokens = msg["out_tokens"]
        done = answered(rec)
        self.rates[rec.id].add(time.monotonic(), done, out_tokens(rec), wall=time.time())
        rec.rate_history = list(self.rates[rec.id].history)
        now = time.monotonic()
        if now - self._progress_ev.get(rec.id, 0.0) >= PROGRESS_EVENT_S:
            self._progress_ev[rec.id] = now
            v = self.view(rec)
            self._publish(
                rec,
                protocol.JobProgress(
                    answered=done,
                    failed=failed(rec),
                    total=rec.total,
                    completions_s=v.completions_s,
                    tok_s=v.tok_s,
                    in_flight=msg["in_flight"],
                ),
            )
        if rec.id in self.choosers:
            self.choosers[rec.id].on_progress()
        # a new segment is saved at once: a restarted agent must not close the old one again
        self._persist(rec, force=new_segment)

    async def _on_exit(self, rec: JobRecord, r: Runner) -> None:
        if self.runners.get(rec.id) is r:
            del self.runners[rec.id]
        rec.pid = None
        if r.error is None and r.checked is None and rec.total is None:
            # a new job whose runner died before it could check anything: one line now, not
            # respawns while `job run` waits for a check that never comes
            r.error = (
                f"the job's runner exited (code {r.proc.returncode}) before it checked the "
                f"input; see {self.store.log_path(rec.id)}"
            )
            r.checked_ev.set()
        if r.error is not None:
            rec.state, rec.error = "failed", r.error
            rec.finished = time.time()
            self._publish(rec, protocol.JobErrored(message=r.error))
        elif r.final is not None and r.final.get("state") in ("done", "cancelled"):
            rec.state = r.final["state"]
            rec.finished = finished = time.time()
            self.stalls.end(rec)
            ch = self.choosers.pop(rec.id, None)
            if ch is not None:
                ch.close()
                if rec.state == "done":
                    ch.on_finished()
            for seg in rec.segments:
                job_segments.close(rec, seg, self._publish)
            self._publish(
                rec,
                protocol.JobDone(
                    state=rec.state,
                    answered=answered(rec),
                    failed=failed(rec),
                    total=rec.total,
                    out_tokens=out_tokens(rec),
                    seconds=round(finished - rec.created, 3),
                    joules=rec.joules,
                ),
            )
        elif self._closing:
            pass  # the agent exits; the next one resumes the job
        elif rec.state in ACTIVE:
            # the runner died (crash, OOM, killed): resume from the output file
            rec.respawns += 1
            code = r.proc.returncode
            if rec.respawns > RESPAWN_MAX:
                rec.state, rec.finished = "failed", time.time()
                rec.error = error = (
                    f"the runner exited {RESPAWN_MAX} times (last code {code}); "
                    f"see {self.store.log_path(rec.id)} and `sgltui job resume` to try again"
                )
                self._publish(rec, protocol.JobErrored(message=error))
            else:
                self._publish(rec, protocol.JobRunnerExit(code=code, respawn=rec.respawns))
                await asyncio.sleep(min(2.0 * rec.respawns, 10.0))
                if not self._closing and rec.state in ACTIVE:
                    await self._spawn(rec)
        if rec.id in self.jobs:  # a job refused at its check leaves no record
            self._persist(rec, force=True)

    # ---- when a job may send ----------------------------------------------------------------

    def _sync(self, rec: JobRecord) -> None:
        """Tell the runner what it may do now (idempotent; called on every change and each second)."""
        r = self.runners.get(rec.id)
        if r is None or r.checked is None:
            return
        url, key, why = send_to(self.site, rec)
        want_pause = rec.user_paused or url is None
        if url is not None and url != r.url:
            r.url = url
            slot = self.site.slot(rec.slot)
            if slot is not None and not rec.pool:
                rec.target_launch, rec.target_profile = slot.launch_id, slot.profile_name
            r.send({"op": "target", "url": url, "api_key": key})
            self.rates[rec.id].reset()
        if url is not None:
            say_launch(self.site, rec, r)  # before the resume below: its pass comes first
        if rec.pool:
            job_segments.follow_pool(rec, self.site.pool_profiles(rec.pool))
        if want_pause != r.sent_paused:
            r.sent_paused = bool(want_pause)
            if want_pause:
                r.paused_ev.clear()
            r.send({"op": "pause"} if want_pause else {"op": "resume"})
        if r.concurrency != rec.concurrency:
            r.concurrency = rec.concurrency
            r.send({"op": "concurrency", "n": rec.concurrency})
        ch = self.choosers.get(rec.id)
        r.set_cadence(ch.reading_s() if ch is not None else None)
        new_state = "paused" if rec.user_paused else ("waiting" if url is None else "running")
        if rec.disk_error and new_state == "running":
            new_state, why = "waiting", rec.disk_error
        rec.waiting_for = why or None
        if new_state != rec.state:
            rec.state = new_state
            self._persist(rec, force=True)

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            power = self.site.gpu_power_w() if self.jobs else None
            for rec in list(self.jobs.values()):
                if rec.state not in ACTIVE:
                    continue
                try:
                    self._release_stale_hold(rec)
                    maybe_auto(self.site, rec, self._publish)
                    self._sync(rec)
                    self.stalls.watch(rec, self.runners.get(rec.id))
                    integrate_energy(rec, power, now - last)
                    if rec.id in self.choosers:
                        self.choosers[rec.id].tick()
                except Exception:  # one job's fault must not stop every job's second
                    log.exception("job %s: its second's checks failed", rec.id)
            last = now

    def _release_stale_hold(self, rec: JobRecord) -> None:
        """A hold whose swap or stop is over without saying so (cancelled, failed): let go."""
        if not rec.hold:
            return
        slot = self.site.slot(rec.slot)
        if slot is not None and not slot.swapping and not slot.busy:
            self.after_swap(rec.slot)

    async def before_swap(self, slot_id: str, force: bool) -> None:
        """A swap of `slot_id` is about to stop its server: hold its jobs, let (or make) what
        is in flight finish. Bounded by [jobs] drain_s, after which in-flight is cancelled."""
        waits = []
        for rec in self.jobs.values():
            if rec.slot != slot_id or rec.state not in ACTIVE or rec.pool:
                continue
            rec.hold = "swap"
            r = self.runners.get(rec.id)
            self._publish(rec, protocol.JobHold(reason="swap", force=force))
            if r is None or r.checked is None:
                continue
            r.paused_ev.clear()
            r.sent_paused = True
            r.send({"op": "pause", "force": force})
            waits.append((rec, r))
        for rec, r in waits:
            try:
                await asyncio.wait_for(r.paused_ev.wait(), self.site.jobs_config.drain_s)
            except asyncio.TimeoutError:
                r.send({"op": "pause", "force": True})
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(r.paused_ev.wait(), 10.0)
            self._publish(rec, protocol.JobHeld(in_flight=r.progress.get("in_flight", 0)))

    def after_swap(self, slot_id: str) -> None:
        for rec in self.jobs.values():
            if rec.slot == slot_id and rec.hold:
                rec.hold = None
                self._publish(rec, protocol.JobRelease())
                r = self.runners.get(rec.id)
                if r is not None:
                    r.url = None  # a new server: a new connection pool, even on the same port
                maybe_auto(self.site, rec, self._publish)
                self._sync(rec)

    def active_on(self, slot_id: str) -> bool:
        """A job that has not ended and that the user has not paused uses the slot."""
        return any(
            rec.slot == slot_id and rec.state in ACTIVE and not rec.user_paused
            for rec in self.jobs.values()
        )

    def pinned_on(self, slot_id: str) -> JobRecord | None:
        for rec in self.jobs.values():
            if rec.slot == slot_id and rec.pinned and rec.state in ACTIVE:
                return rec
        return None

    # ---- views -----------------------------------------------------------------------------

    def view(self, rec: JobRecord, full: bool = False) -> JobView:
        return job_view(rec, self.rates.get(rec.id), self.runners.get(rec.id), full)

    def auto_concurrency(self, slot_id: str) -> tuple[int, str]:
        return auto_concurrency(self.site, slot_id)

    def views(self) -> list[JobView]:
        return [self.view(j) for j in sorted(self.jobs.values(), key=lambda j: j.created)]

    # ---- ops -------------------------------------------------------------------------------

    async def op_run(self, args: protocol.JobRunArgs, client: str | None) -> Any:
        inp, out = check_paths(args, self.jobs.values())
        slot_id = str(args.slot)  # the agent named the slot (its only one when none was given)
        slot = self.site.slot(slot_id)
        if slot is None:
            slots = ", ".join(self.site.slot_ids())
            raise JobError(f"no slot {slot_id!r}; slots: {slots}", "not_found")
        if args.pool:
            self.site.pool_members(str(args.pool))  # an unknown pool: one line
        chosen = trial(args)
        mode, conc, why = initial_concurrency(self.site, args, slot_id, chosen is not None)
        jid = time.strftime("%Y%m%d-%H%M%S") + f"-{len(self.jobs) % 100:02d}"
        while jid in self.jobs:
            jid += "x"
        rec = new_record(jid, args, inp, out, slot_id, conc, mode, client)
        if chosen is not None:
            rec.choose = chosen
        self.jobs[jid] = rec
        self.rates[jid] = Rates()
        if mode == "auto" and slot.state == "ready" and not why.startswith("default"):
            rec.auto_for = slot.launch_id  # else: chosen again once the capacity card comes
        self._publish(
            rec,
            protocol.JobStart(
                name=rec.name,
                input=rec.input,
                output=rec.output,
                concurrency=conc,
                concurrency_why=why,
                pinned=rec.pinned,
                target=target_of(rec),
            ),
        )
        r = await self._spawn(rec)
        self._choose(rec)
        return Deferred(self._await_checked(rec, r))

    async def _await_checked(self, rec: JobRecord, r: Runner) -> JobView:
        try:
            await asyncio.wait_for(r.checked_ev.wait(), CHECK_TIMEOUT_S)
        except asyncio.TimeoutError:
            pass
        if r.error is not None:
            await r.proc.wait()
            # nothing was sent or written: the job leaves no record behind
            self.jobs.pop(rec.id, None)
            ch = self.choosers.pop(rec.id, None)
            if ch is not None:
                ch.close()
            self.store.remove(rec.id)
            raise JobError(r.error)
        return self.view(rec)

    def _active(self, args: protocol.JobArgs, otherwise: str) -> JobRecord:
        """The job the op names, if it has not ended (else one line: its state, `otherwise`)."""
        rec = self.find(args.job)
        if rec.state not in ACTIVE:
            raise JobError(f"job {rec.id} is {rec.state}; {otherwise}")
        return rec

    def _changed(self, rec: JobRecord, event: protocol.JobEvent) -> JobView:
        """A command changed the job: recorded, passed on to its runner, saved; the job now."""
        self._publish(rec, event)
        self._sync(rec)
        self._persist(rec, force=True)
        return self.view(rec)

    async def op_status(self, args: protocol.JobArgs, client: str | None) -> JobView:
        return self.view(self.find(args.job), full=True)

    async def op_list(self, args: protocol.Args, client: str | None) -> list[JobView]:
        return self.views()

    async def op_pause(self, args: protocol.JobArgs, client: str | None) -> JobView:
        rec = self._active(args, "nothing to pause")
        rec.user_paused = True
        return self._changed(rec, protocol.JobPause())

    async def op_resume(self, args: protocol.JobArgs, client: str | None) -> JobView:
        rec = self.find(args.job)
        if rec.state == "failed" or (rec.state in ACTIVE and rec.id not in self.runners):
            rec.respawns = 0
            rec.error = None
            rec.user_paused = False
            self._publish(rec, protocol.JobResume(restart=True))
            await self._spawn(rec)
            return self.view(rec)
        rec = self._active(args, "start a new one with `sgltui job run`")
        rec.user_paused = False
        return self._changed(rec, protocol.JobResume())

    async def op_cancel(self, args: protocol.JobArgs, client: str | None) -> JobView:
        rec = self._active(args, "nothing to cancel")
        r = self.runners.get(rec.id)
        if r is None:
            rec.state, rec.finished = "cancelled", time.time()
            return self._changed(rec, protocol.JobCancel())
        self._publish(rec, protocol.JobCancel())
        r.send({"op": "cancel"})
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(r.reader), 15.0)  # type: ignore[arg-type]
        return self.view(rec)

    async def op_set(self, args: protocol.JobSetArgs, client: str | None) -> JobView:
        rec = self.find(args.job)
        changed = protocol.JobSet()
        if args.concurrency is not msgspec.UNSET:
            raw = args.concurrency
            if raw == "auto":
                rec.concurrency_mode = "auto"
                rec.auto_for = None
                n, _ = self.auto_concurrency(rec.slot)
            else:
                n = concurrency(raw)
                rec.concurrency_mode = "fixed"
            rec.concurrency = changed.concurrency = n
        if args.pinned is not msgspec.UNSET:
            rec.pinned = changed.pinned = bool(args.pinned)
        if changed.concurrency is None and changed.pinned is None:
            raise JobError(
                "job_set needs concurrency (N or auto) or pinned (true/false)", "invalid"
            )
        return self._changed(rec, changed)
