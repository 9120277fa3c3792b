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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from sgltui import protocol
from sgltui.agent.job_choice import ChoiceHost, integrate_energy
from sgltui.agent.jobs_site import JobsSite
from sgltui.agent.state import read_json
from sgltui.core.files import write_json_atomic
from sgltui.core.tasks import spawn
from sgltui.jobs import choose
from sgltui.jobs.chooser import Chooser
from sgltui.jobs.output import OutputError, default_output, ensure_writable, errors_path
from sgltui.jobs.progress import Rates, eta_s
from sgltui.jobs.stall import StallWatch
from sgltui.protocol import JobChoice, JobSegment, JobState, JobView

log = logging.getLogger("sgltui.agent.jobs")

ACTIVE = ("checking", "waiting", "running", "paused")
FINISHED = ("done", "cancelled", "failed")
CHECK_TIMEOUT_S = 600.0
PERSIST_S = 5.0
PROGRESS_EVENT_S = 15.0
RESPAWN_MAX = 5
MAX_CONCURRENCY = 4096
DEFAULT_CONCURRENCY = 16


# What a segment (one launch's share of a job) counts, as its job.segment event says it.
class JobError(Exception):
    """A refused job command: one line for the client, and its code (protocol.ErrorCode)."""

    def __init__(self, message: str, code: protocol.ErrorCode = "refused") -> None:
        super().__init__(message)
        self.code: protocol.ErrorCode = code


class Deferred:
    """A reply computed after the command lock is released (like operations.Wait)."""

    def __init__(self, coro: Any) -> None:
        self.coro = coro

    async def wait(self) -> Any:
        return await self.coro


class _Runner:
    """The agent's side of one runner child."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.progress: dict = {}
        self.checked: dict | None = None
        self.checked_ev = asyncio.Event()
        self.paused_ev = asyncio.Event()
        self.error: str | None = None
        self.final: dict | None = None
        self.url: str | None = None
        self.sent_paused: bool | None = None
        self.concurrency: int | None = None
        self.reader: asyncio.Task | None = None

    def send(self, msg: dict) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            return
        with contextlib.suppress(ConnectionError, RuntimeError, OSError):
            stdin.write(json.dumps(msg).encode() + b"\n")


class JobsHost:
    # what agent/job_choice.py reads and calls (the trial's narrow view of the jobs host)
    answered = property(lambda self: self._answered)
    failed = property(lambda self: self._failed)
    out_tokens = property(lambda self: self._out_tokens)
    publish = property(lambda self: self._publish)

    def __init__(self, site: JobsSite) -> None:
        self.site = site  # all it sees of the agent (agent/jobs_site.py)
        self.dir = site.jobs_dir
        self.jobs: dict[str, dict] = {}  # id -> record (what is persisted)
        self.runners: dict[str, _Runner] = {}
        self.rates: dict[str, Rates] = {}
        self._tick_task: asyncio.Task | None = None
        self._closing = False
        self._persisted: dict[str, float] = {}
        self._progress_ev: dict[str, float] = {}
        self.stalls: dict[str, StallWatch] = {}  # sgltui/jobs/stall.py, per job
        self.choosers: dict[str, Chooser] = {}  # --choose jobs' trials (jobs/chooser.py)
        self._choice_host = ChoiceHost(self)

    # ---- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for path in sorted(self.dir.glob("*.json")):
            rec = read_json(path, None)
            if not isinstance(rec, dict) or "id" not in rec:
                continue
            self.jobs[rec["id"]] = rec
            self.rates[rec["id"]] = Rates()
            if rec.get("state") in ACTIVE:
                rec["respawns"] = 0
                self._publish(rec, protocol.JobResumeAfterRestart(answered=self._answered(rec)))
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
            await self._reap(r, 10.0)
            self._persist(self.jobs[jid], force=True)

    async def _reap(self, r: _Runner, timeout: float) -> None:
        try:
            await asyncio.wait_for(r.proc.wait(), timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(r.proc.pid, signal.SIGKILL)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(r.proc.wait(), 5.0)

    # ---- records ---------------------------------------------------------------------------

    def _path(self, jid: str) -> Path:
        return self.dir / f"{jid}.json"

    def persist(self, rec: dict) -> None:
        self._persist(rec, force=True)

    def _persist(self, rec: dict, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._persisted.get(rec["id"], 0.0) < PERSIST_S:
            return
        self._persisted[rec["id"]] = now
        try:
            write_json_atomic(self._path(rec["id"]), rec)
        except OSError as exc:
            log.warning("cannot write job record %s: %s", rec["id"], exc)

    def _publish(self, rec: dict, event: protocol.JobEvent) -> None:
        """A job's event, stamped with the job, its client and its slot."""
        event.job, event.client, event.slot = rec["id"], rec.get("client"), rec.get("slot")
        self.site.publish(event)

    def _choose(self, rec: dict) -> None:
        """A --choose job gets its trial's driver (jobs/chooser.py); its state is rec["choose"]."""
        if rec.get("choose") and rec["id"] not in self.choosers:
            watch_s = float(self.site.jobs_config.choose_watch_s)
            self.choosers[rec["id"]] = Chooser(self._choice_host, rec, watch_s=watch_s)

    @staticmethod
    def _answered(rec: dict) -> int:
        return int(rec.get("base_ok", 0)) + int(rec.get("run_done", 0))

    @staticmethod
    def _failed(rec: dict) -> int:
        return int(rec.get("base_failed", 0)) + int(rec.get("run_failed", 0))

    def find(self, ref: Any) -> dict:
        """A job by id or name; without one, the newest active job (else the newest)."""
        if ref:
            ref = str(ref)
            if ref in self.jobs:
                return self.jobs[ref]
            named = [j for j in self.jobs.values() if j.get("name") == ref]
            if named:
                return max(named, key=lambda j: j["created"])
            raise JobError(f"no job {ref!r}; see `sgltui job list`", "not_found")
        if not self.jobs:
            raise JobError("no job yet; start one with `sgltui job run INPUT.jsonl`", "not_found")
        active = [j for j in self.jobs.values() if j.get("state") in ACTIVE]
        return max(active or self.jobs.values(), key=lambda j: j["created"])

    # ---- the runner child ------------------------------------------------------------------

    async def _spawn(self, rec: dict) -> _Runner:
        log_path = self.dir / f"{rec['id']}.log"
        spec = {
            "id": rec["id"],
            "input": rec["input"],
            "output": rec["output"],
            "concurrency": rec["concurrency"],
            "max_concurrency": MAX_CONCURRENCY,
            "stamp": rec.get("stamp"),  # the input's earlier check: unchanged -> not re-read
        }
        with open(log_path, "ab") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sgltui.jobs.worker",
                "--spec-json",
                json.dumps(spec),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                start_new_session=True,  # its own group: stopped as a whole, never by a ^C
                limit=1 << 20,
            )
        r = _Runner(proc)
        r.concurrency = rec["concurrency"]
        self.runners[rec["id"]] = r
        rec["state"] = "checking"
        rec["pid"] = proc.pid
        r.reader = spawn(self._read(rec, r), f"job {rec['id']}: runner reader")
        return r

    async def _read(self, rec: dict, r: _Runner) -> None:
        assert r.proc.stdout is not None
        try:
            while True:
                raw = await r.proc.stdout.readline()
                if not raw:
                    break
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                self._on_message(rec, r, msg)
        finally:
            await r.proc.wait()
            await self._on_exit(rec, r)

    def _on_message(self, rec: dict, r: _Runner, msg: dict) -> None:
        t = msg.get("t")
        if t == "checked":
            r.checked = msg
            # The output file is the truth: what the last runner wrote after the record was last
            # saved (a kill -9 of the agent) belongs to the segment it was written in.
            segs = rec.get("segments") or []
            if segs:
                seg = segs[-1]
                seg["completions"] += max(0, msg["resumed_ok"] - self._answered(rec))
                seg["failed"] += max(0, msg["resumed_failed"] - self._failed(rec))
                seg["out_tokens"] += max(0, msg["resumed_out_tokens"] - self._out_tokens(rec))
            rec["total"] = msg["total"]
            rec["stamp"] = msg.get("stamp")
            rec["base_ok"] = msg["resumed_ok"]
            rec["base_failed"] = msg["resumed_failed"]
            rec["base_out_tokens"] = msg["resumed_out_tokens"]
            rec["run_done"] = rec["run_failed"] = rec["run_out_tokens"] = 0
            rec["state"] = "waiting"
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

    def _on_progress(self, rec: dict, r: _Runner, msg: dict) -> None:
        prev = r.progress
        r.progress = msg
        disk = msg.get("disk_error")
        if disk != rec.get("disk_error"):
            # the runner stopped sending (or goes on) because the output cannot (or can again)
            # be written: said at once, not after the figures have gone stale
            if disk:
                rec["disk_error"] = disk
                log.warning("job %s: %s", rec["id"], disk)
                self._publish(rec, protocol.JobDiskError(message=disk))
            else:
                rec.pop("disk_error", None)
                self._publish(rec, protocol.JobDiskOk())
            self._sync(rec)
        d_done = msg["done"] - prev.get("done", 0)
        d_failed = msg["failed"] - prev.get("failed", 0)
        d_out = msg["out_tokens"] - prev.get("out_tokens", 0)
        d_in = msg["in_tokens"] - prev.get("in_tokens", 0)
        new_segment = False
        if d_done or d_failed:
            n_segs = len(rec.get("segments") or [])
            seg = self._segment(rec)
            new_segment = len(rec.get("segments") or []) != n_segs
            if seg is not None:
                seg["completions"] += d_done
                seg["failed"] += d_failed
                seg["out_tokens"] += d_out
                seg["in_tokens"] += d_in
                seg["last"] = time.time()
        # the totals and the segments change together: a record saved between the two would
        # count answers a restarted agent could not place in any segment
        rec["run_done"], rec["run_failed"] = msg["done"], msg["failed"]
        rec["run_out_tokens"] = msg["out_tokens"]
        answered = self._answered(rec)
        self.rates[rec["id"]].add(
            time.monotonic(), answered, self._out_tokens(rec), wall=time.time()
        )
        rec["rate_history"] = list(self.rates[rec["id"]].history)
        now = time.monotonic()
        if now - self._progress_ev.get(rec["id"], 0.0) >= PROGRESS_EVENT_S:
            self._progress_ev[rec["id"]] = now
            v = self.view(rec)
            self._publish(
                rec,
                protocol.JobProgress(
                    answered=answered,
                    failed=self._failed(rec),
                    total=rec.get("total"),
                    completions_s=v.completions_s,
                    tok_s=v.tok_s,
                    in_flight=msg["in_flight"],
                ),
            )
        if rec["id"] in self.choosers:
            self.choosers[rec["id"]].on_progress()
        # a new segment is saved at once: a restarted agent must not close the old one again
        self._persist(rec, force=new_segment)

    @staticmethod
    def _average(rec: dict) -> tuple[float, float]:
        """(completions/s, output tok/s) over the job's segments: from each one's first to its
        last answer, so the time spent waiting for a server or paused does not count."""
        segs = rec.get("segments") or []
        secs = sum(max(0.0, s["last"] - s["started"]) for s in segs)
        if secs <= 0:
            return 0.0, 0.0
        done = sum(s["completions"] for s in segs)
        return done / secs, sum(s["out_tokens"] for s in segs) / secs

    @staticmethod
    def _out_tokens(rec: dict) -> int:
        return int(rec.get("base_out_tokens", 0)) + int(rec.get("run_out_tokens", 0))

    def _segment(self, rec: dict) -> dict | None:
        """The segment of the launch the runner was pointed at (a new one when that changed):
        answers reported after a swap began still belong to the server that gave them."""
        segs = rec.setdefault("segments", [])
        launch_id, profile = rec.get("target_launch"), rec.get("target_profile")
        if not launch_id:
            return segs[-1] if segs else None
        if segs and segs[-1]["launch_id"] == launch_id:
            if not segs[-1].get("info_hash"):  # kept a moment after the ready
                segs[-1]["info_hash"] = self.site.info_hash(launch_id)
            return segs[-1]
        if segs:
            self._close_segment(rec, segs[-1])
        seg = {
            "profile": profile,
            "launch_id": launch_id,
            "info_hash": self.site.info_hash(launch_id),
            "started": time.time(),
            "last": time.time(),
            "completions": 0,
            "failed": 0,
            "out_tokens": 0,
            "in_tokens": 0,
        }
        segs.append(seg)
        self._publish(
            rec,
            protocol.JobSegmentStart(
                profile=seg["profile"], launch_id=seg["launch_id"], info_hash=seg["info_hash"]
            ),
        )
        return seg

    def _close_segment(self, rec: dict, seg: dict) -> None:
        if seg.get("closed"):
            return
        seg["closed"] = True
        secs = max(0.0, seg["last"] - seg["started"])
        tok_s = round(seg["out_tokens"] / secs, 1) if secs > 0 else None
        self._publish(
            rec,
            protocol.JobSegmentDone(
                profile=seg["profile"],
                launch_id=seg["launch_id"],
                info_hash=seg.get("info_hash"),
                completions=seg["completions"],
                failed=seg["failed"],
                out_tokens=seg["out_tokens"],
                in_tokens=seg["in_tokens"],
                seconds=round(secs, 3),
                tok_s=tok_s,
                joules=seg.get("joules"),
            ),
        )

    async def _on_exit(self, rec: dict, r: _Runner) -> None:
        if self.runners.get(rec["id"]) is r:
            del self.runners[rec["id"]]
        rec["pid"] = None
        if r.error is None and r.checked is None and rec.get("total") is None:
            # a new job whose runner died before it could check anything: one line now, not
            # respawns while `job run` waits for a check that never comes
            r.error = (
                f"the job's runner exited (code {r.proc.returncode}) before it checked the "
                f"input; see {self.dir / (rec['id'] + '.log')}"
            )
            r.checked_ev.set()
        if r.error is not None:
            rec["state"], rec["error"] = "failed", r.error
            rec["finished"] = time.time()
            self._publish(rec, protocol.JobErrored(message=r.error))
        elif r.final is not None and r.final.get("state") in ("done", "cancelled"):
            rec["state"] = r.final["state"]
            rec["finished"] = time.time()
            self._end_stall(rec)
            ch = self.choosers.pop(rec["id"], None)
            if ch is not None:
                ch.close()
                if rec["state"] == "done":
                    ch.on_finished()
            for seg in rec.get("segments") or []:
                self._close_segment(rec, seg)
            self._publish(
                rec,
                protocol.JobDone(
                    state=rec["state"],
                    answered=self._answered(rec),
                    failed=self._failed(rec),
                    total=rec.get("total"),
                    out_tokens=self._out_tokens(rec),
                    seconds=round(rec["finished"] - rec["created"], 3),
                    joules=rec.get("joules"),
                ),
            )
        elif self._closing:
            pass  # the agent exits; the next one resumes the job
        elif rec.get("state") in ACTIVE:
            # the runner died (crash, OOM, killed): resume from the output file
            rec["respawns"] = int(rec.get("respawns", 0)) + 1
            code = r.proc.returncode
            if rec["respawns"] > RESPAWN_MAX:
                rec["state"], rec["finished"] = "failed", time.time()
                rec["error"] = (
                    f"the runner exited {RESPAWN_MAX} times (last code {code}); "
                    f"see {self.dir / (rec['id'] + '.log')} and `sgltui job resume` to try again"
                )
                self._publish(rec, protocol.JobErrored(message=rec["error"]))
            else:
                self._publish(rec, protocol.JobRunnerExit(code=code, respawn=rec["respawns"]))
                await asyncio.sleep(min(2.0 * rec["respawns"], 10.0))
                if not self._closing and rec.get("state") in ACTIVE:
                    await self._spawn(rec)
        if rec["id"] in self.jobs:  # a job refused at its check leaves no record
            self._persist(rec, force=True)

    # ---- when a job may send ----------------------------------------------------------------

    def _target(self, rec: dict) -> tuple[str | None, str | None, str]:
        """(url, api_key, why not) for the job's slot (or pool) now."""
        if rec.get("pool"):
            # Through the pool's gateway: one slot's swap does not hold the job (the gateway
            # sends its requests to the other slots meanwhile).
            if rec.get("hold"):
                return None, None, "held"
            return self.site.pool_target(rec["pool"])
        slot = self.site.slot(rec["slot"])
        if slot is None:
            return None, None, f"slot {rec['slot']} does not exist"
        if slot.swapping or rec.get("hold"):
            return None, None, "held for a swap"
        if slot.state != "ready":
            return None, None, f"waiting for slot {slot.id} to be ready ({slot.state})"
        # Straight to the server by default: the job holds itself across swaps (so the front's
        # holding adds nothing), and the front passes every answer through the agent's own
        # event loop: measured at zero time scale (bench/bench_job.py part 2), 5,000 requests
        # took 24 s through the front with the agent at 15% of a core, 16.5 s direct at 4%.
        # SGLTUI_JOB_VIA_FRONT=1 sends through the slot's front when it routes (read from the
        # front itself: slot.status() walks the process tree, and this runs every second).
        via_front = slot.front_url if self.site.jobs_config.via_front else None
        return via_front or slot.url, slot.api_key, ""

    def _sync(self, rec: dict) -> None:
        """Tell the runner what it may do now (idempotent; called on every change and each second)."""
        r = self.runners.get(rec["id"])
        if r is None or r.checked is None:
            return
        url, key, why = self._target(rec)
        want_pause = rec.get("user_paused") or url is None
        if url is not None and url != r.url:
            r.url = url
            slot = self.site.slot(rec["slot"])
            if slot is not None and not rec.get("pool"):
                rec["target_launch"], rec["target_profile"] = slot.launch_id, slot.profile_name
            r.send({"op": "target", "url": url, "api_key": key})
            self.rates[rec["id"]].reset()
        if rec.get("pool"):
            self._follow_pool(rec)
        if want_pause != r.sent_paused:
            r.sent_paused = bool(want_pause)
            if want_pause:
                r.paused_ev.clear()
            r.send({"op": "pause"} if want_pause else {"op": "resume"})
        if r.concurrency != rec["concurrency"]:
            r.concurrency = rec["concurrency"]
            r.send({"op": "concurrency", "n": rec["concurrency"]})
        new_state = (
            "paused" if rec.get("user_paused") else ("waiting" if url is None else "running")
        )
        if rec.get("disk_error") and new_state == "running":
            new_state, why = "waiting", rec["disk_error"]
        rec["waiting_for"] = why or None
        if new_state != rec.get("state"):
            rec["state"] = new_state
            self._persist(rec, force=True)

    def _follow_pool(self, rec: dict) -> None:
        """A pool job's segment is what the pool's routable slots run: the gateway spreads the
        job over all of them, so no one slot's launch says it (a rolling swap moves it from
        `a` through `mixed: a, b` to `b`). A new segment whenever that changes."""
        profiles = self.site.pool_profiles(rec["pool"])
        if not profiles:  # nothing routable now: the answers still coming belong where they were
            return
        label = profiles[0] if len(profiles) == 1 else "mixed: " + ", ".join(profiles)
        if rec.get("target_launch") and label == rec.get("target_profile"):
            return
        n = int(rec.get("pool_mixes") or 0) + 1
        rec["pool_mixes"] = n
        # Not a launch of one server: the pool's n-th mix (a segment id the report keeps apart)
        rec["target_launch"], rec["target_profile"] = f"pool {rec['pool']} #{n}", label

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            power = self.site.gpu_power_w() if self.jobs else None
            for rec in list(self.jobs.values()):
                if rec.get("state") not in ACTIVE:
                    continue
                try:
                    self._release_stale_hold(rec)
                    self._maybe_auto(rec)
                    self._sync(rec)
                    self._watch_stall(rec)
                    integrate_energy(rec, power, now - last)
                    if rec["id"] in self.choosers:
                        self.choosers[rec["id"]].tick()
                except Exception:  # one job's fault must not stop every job's second
                    log.exception("job %s: its second's checks failed", rec.get("id"))
            last = now

    def _tokens_at(self, slot_id: str) -> float | None:
        """When (time.monotonic()) the slot's latest engine reading showed tokens being made."""
        engine = self.site.engine(slot_id)
        if not engine or not float(engine.get("gen_throughput") or 0.0) > 0.0:
            return None
        age = time.time() - float(engine.get("ts") or 0.0)  # the reading's wall time
        return time.monotonic() - max(0.0, age)

    def _watch_stall(self, rec: dict) -> None:
        """A job that should be sending and gets no answer says so (sgltui/jobs/stall.py)."""
        watch = self.stalls.get(rec["id"])
        if watch is None:
            watch = self.stalls[rec["id"]] = StallWatch(float(self.site.jobs_config.stall_s))
        r = self.runners.get(rec["id"])
        slot = self.site.slot(rec["slot"])
        was = watch.stalled
        if (
            rec.get("state") != "running"
            or r is None
            or r.checked is None
            or r.sent_paused
            or slot is None
            or slot.state != "ready"
        ):
            watch.reset()  # not meant to send now: waiting, paused, held, its server down
        elif slot.unresponsive:
            # the slot knows why nothing comes back (agent/liveness.py): said at once, by name
            line = (
                f"stalled: slot {slot.id}'s server ({slot.profile_name}) is unresponsive: "
                f"{slot.unresponsive}"
            )
            if watch.stalled != line:
                watch.stalled = rec["stalled"] = line
                log.warning("job %s: %s", rec["id"], line)
                self._publish(rec, protocol.JobStalled(message=line))
            return
        else:
            server = f"slot {slot.id}'s server ({slot.profile_name})"
            answered = self._answered(rec) + self._failed(rec)
            new = watch.observe(
                time.monotonic(), answered, r.progress, server, self._tokens_at(slot.id)
            )
            if new:
                rec["stalled"] = new
                log.warning("job %s: %s", rec["id"], new)
                self._publish(rec, protocol.JobStalled(message=new))
                return
        if was and watch.stalled is None:
            rec.pop("stalled", None)
            self._publish(rec, protocol.JobStallOver())

    def _end_stall(self, rec: dict) -> None:
        """A job that finishes is stalled no more: answers that came back between two of the
        stall watch's ticks can finish it before the watch sees them (a server that resumed
        with little left to do), and a done job must not say 'stalled'."""
        watch = self.stalls.pop(rec["id"], None)
        if rec.pop("stalled", None) is not None or (watch is not None and watch.stalled):
            self._publish(rec, protocol.JobStallOver())

    def _release_stale_hold(self, rec: dict) -> None:
        """A hold whose swap or stop is over without saying so (cancelled, failed): let go."""
        if not rec.get("hold"):
            return
        slot = self.site.slot(rec["slot"])
        if slot is not None and not slot.swapping and not slot.busy:
            self.after_swap(rec["slot"])

    def _maybe_auto(self, rec: dict) -> None:
        if rec.get("concurrency_mode") != "auto":
            return
        slot = self.site.slot(rec["slot"])
        if slot is None or slot.state != "ready" or rec.get("auto_for") == slot.launch_id:
            return
        n, why = self.auto_concurrency(rec["slot"])
        if rec.get("pool") and self.site.has_pool(rec["pool"]):
            k = len(self.site.pool_members(rec["pool"]))
            n, why = n * k, f"{why}, x {k} slots of the pool"
        if why.startswith("default") and slot.launch_id and not rec.get("auto_tries"):
            rec["auto_tries"] = 1  # the capacity card may come a moment after ready
            return
        rec["auto_for"] = slot.launch_id
        rec.pop("auto_tries", None)
        if n != rec["concurrency"]:
            rec["concurrency"] = n
            self._publish(rec, protocol.JobConcurrency(concurrency=n, why=why))

    def auto_concurrency(self, slot_id: str) -> tuple[int, str]:
        slot = self.site.slot(slot_id)
        profile = slot.profile_name if slot else None
        best = self._bench_best(profile) if profile else None
        if best:
            return min(best, MAX_CONCURRENCY), f"the last bench's best point for {profile}"
        card = self.site.capacity(slot_id)
        mrr = (card or {}).get("max_running_requests")
        if isinstance(mrr, int) and mrr > 0:
            # what the scheduler admits at once: more would only wait in its queue
            return min(mrr, MAX_CONCURRENCY), f"the effective max_running_requests of {profile}"
        return DEFAULT_CONCURRENCY, "default (no capacity card or bench for this profile yet)"

    def _bench_best(self, profile: str) -> int | None:
        for run in reversed(self.site.bench_runs()):
            data = read_json(Path(run["path"]), {})
            best = ((data.get("comparison") or {}).get("best") or {}).get(profile)
            if best and best.get("concurrency"):
                return int(best["concurrency"])
        return None

    async def before_swap(self, slot_id: str, force: bool) -> None:
        """A swap of `slot_id` is about to stop its server: hold its jobs, let (or make) what
        is in flight finish. Bounded by [jobs] drain_s, after which in-flight is cancelled."""
        waits = []
        for rec in self.jobs.values():
            if rec.get("slot") != slot_id or rec.get("state") not in ACTIVE or rec.get("pool"):
                continue
            rec["hold"] = "swap"
            r = self.runners.get(rec["id"])
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
            if rec.get("slot") == slot_id and rec.pop("hold", None):
                self._publish(rec, protocol.JobRelease())
                r = self.runners.get(rec["id"])
                if r is not None:
                    r.url = None  # a new server: a new connection pool, even on the same port
                self._maybe_auto(rec)
                self._sync(rec)

    def active_on(self, slot_id: str) -> bool:
        """A job that has not ended and that the user has not paused uses the slot."""
        return any(
            rec.get("slot") == slot_id and rec.get("state") in ACTIVE and not rec.get("user_paused")
            for rec in self.jobs.values()
        )

    def pinned_on(self, slot_id: str) -> dict | None:
        for rec in self.jobs.values():
            if rec.get("slot") == slot_id and rec.get("pinned") and rec.get("state") in ACTIVE:
                return rec
        return None

    # ---- views -----------------------------------------------------------------------------

    def view(self, rec: dict, full: bool = False) -> JobView:
        rates = self.rates.get(rec["id"]) or Rates()
        answered, failed = self._answered(rec), self._failed(rec)
        total = rec.get("total")
        running = rec.get("state") == "running"
        if running:
            tok_s, comp_s = rates.tok_s(), rates.completions_s()
        elif rec.get("state") in FINISHED:  # its average over the time it was sent (0.0 read wrong)
            comp_s, tok_s = self._average(rec)
        else:  # paused or waiting: nothing is sent now, and a figure would be stale
            comp_s = tok_s = 0.0
        remaining = (total - answered - failed) if total is not None else None
        r = self.runners.get(rec["id"])
        progress = r.progress if r else {}
        return JobView(
            id=rec["id"],
            name=rec.get("name"),
            state=JobState(rec["state"]),
            slot=rec["slot"],
            pool=rec.get("pool"),
            input=rec["input"],
            output=rec["output"],
            errors_output=str(errors_path(Path(rec["output"]))),
            pinned=bool(rec.get("pinned")),
            hold=rec.get("hold"),
            waiting_for=rec.get("waiting_for"),
            concurrency=rec["concurrency"],
            concurrency_mode=rec.get("concurrency_mode", "fixed"),
            total=total,
            answered=answered,
            failed=failed,
            remaining=remaining,
            in_flight=progress.get("in_flight", 0),
            # the runner said it stopped sending and nothing is in flight
            quiet=bool(r is None or (r.sent_paused and r.paused_ev.is_set())),
            out_tokens=self._out_tokens(rec),
            retries=progress.get("retries", 0),
            conn_errors=progress.get("conn_errors", 0),
            completions_s=round(comp_s, 2),
            tok_s=round(tok_s, 1),
            eta_s=eta_s(remaining, answered, self._out_tokens(rec), tok_s)
            if remaining is not None and running
            else (0.0 if remaining == 0 else None),
            created=rec["created"],
            finished=rec.get("finished"),
            error=rec.get("error"),
            stalled=rec.get("stalled"),
            segments=[
                JobSegment(**{k: s.get(k) for k in JobSegment.__struct_fields__ if k in s})
                for s in rec.get("segments") or []
            ],
            runner_pid=rec.get("pid"),
            runner_cpu_s=progress.get("cpu_run_s"),
            rate_history=[tuple(p) for p in rec.get("rate_history") or []] if full else None,
            joules=rec.get("joules"),
            decision=msgspec.convert(choose.view(rec["choose"], rec.get("segments")), JobChoice)
            if rec.get("choose")
            else None,
        )

    def views(self) -> list[JobView]:
        return [self.view(j) for j in sorted(self.jobs.values(), key=lambda j: j["created"])]

    # ---- ops -------------------------------------------------------------------------------

    async def op_run(self, args: protocol.JobRunArgs, client: str | None) -> Any:
        raw_input = args.input
        if not raw_input or not isinstance(raw_input, str):
            raise JobError(
                "job_run needs input: the path of an OpenAI batch file (JSONL)", "invalid"
            )
        inp = Path(raw_input).expanduser()
        if not inp.is_absolute():
            raise JobError(f"input must be an absolute path, not {raw_input!r}", "invalid")
        if not inp.is_file():
            raise JobError(f"{inp} does not exist or is not a file; check the path")
        out = Path(args.output or default_output(inp)).expanduser()
        if not out.is_absolute():
            raise JobError(f"output must be an absolute path, not {out}", "invalid")
        if out.resolve() == inp.resolve():
            raise JobError("the output must not be the input file; choose another -o")
        if not out.parent.is_dir():
            raise JobError(f"{out.parent} does not exist; create it or choose another -o")
        try:
            ensure_writable(out)  # refused here, at once, not by a runner that cannot start
        except OutputError as exc:
            raise JobError(str(exc)) from None
        for other in self.jobs.values():
            if other.get("state") in ACTIVE and Path(other["output"]) == out:
                raise JobError(
                    f"job {other['id']} ({other.get('name')}) already writes {out}; "
                    "wait for it, cancel it, or choose another -o"
                )
        slot_id = str(args.slot)  # the agent named the slot (its only one when none was given)
        slot = self.site.slot(slot_id)
        if slot is None:
            slots = ", ".join(self.site.slot_ids())
            raise JobError(f"no slot {slot_id!r}; slots: {slots}", "not_found")
        if args.pool:
            members = self.site.pool_members(str(args.pool))  # an unknown pool: one line
        trial = _trial(args)
        conc_arg = args.concurrency
        if trial is not None and conc_arg not in (None, "auto"):
            raise JobError(
                "--choose measures each profile at its automatic concurrency; leave out --concurrency"
            )
        if conc_arg in (None, "auto"):
            mode = "auto"
            conc, why = self.auto_concurrency(slot_id)
            if args.pool:
                conc, why = conc * len(members), f"{why}, x {len(members)} slots of the pool"
        else:
            mode = "fixed"
            conc, why = _concurrency(conc_arg), "given"
        jid = time.strftime("%Y%m%d-%H%M%S") + f"-{len(self.jobs) % 100:02d}"
        while jid in self.jobs:
            jid += "x"
        rec: dict[str, Any] = {
            "v": 1,
            "id": jid,
            "name": str(args.name or inp.stem)[:80],
            "input": str(inp),
            "output": str(out),
            "slot": slot_id,
            "pool": args.pool,
            "concurrency": conc,
            "concurrency_mode": mode,
            "pinned": bool(args.pinned),
            "client": client,
            "created": time.time(),
            "state": "checking",
            "segments": [],
        }
        if trial is not None:
            rec["choose"] = trial
        self.jobs[jid] = rec
        self.rates[jid] = Rates()
        if mode == "auto" and slot.state == "ready" and not why.startswith("default"):
            rec["auto_for"] = slot.launch_id  # else: chosen again once the capacity card comes
        self._publish(
            rec,
            protocol.JobStart(
                name=rec["name"],
                input=rec["input"],
                output=rec["output"],
                concurrency=conc,
                concurrency_why=why,
                pinned=rec["pinned"],
            ),
        )
        r = await self._spawn(rec)
        self._choose(rec)
        return Deferred(self._await_checked(rec, r))

    async def _await_checked(self, rec: dict, r: _Runner) -> JobView:
        try:
            await asyncio.wait_for(r.checked_ev.wait(), CHECK_TIMEOUT_S)
        except asyncio.TimeoutError:
            pass
        if r.error is not None:
            await r.proc.wait()
            # nothing was sent or written: the job leaves no record behind
            self.jobs.pop(rec["id"], None)
            ch = self.choosers.pop(rec["id"], None)
            if ch is not None:
                ch.close()
            with contextlib.suppress(OSError):
                self._path(rec["id"]).unlink()
            raise JobError(r.error)
        return self.view(rec)

    def _active(self, args: protocol.JobArgs, otherwise: str) -> dict:
        """The job the op names, if it has not ended (else one line: its state, `otherwise`)."""
        rec = self.find(args.job)
        if rec.get("state") not in ACTIVE:
            raise JobError(f"job {rec['id']} is {rec.get('state')}; {otherwise}")
        return rec

    def _changed(self, rec: dict, event: protocol.JobEvent) -> JobView:
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
        rec["user_paused"] = True
        return self._changed(rec, protocol.JobPause())

    async def op_resume(self, args: protocol.JobArgs, client: str | None) -> JobView:
        rec = self.find(args.job)
        if rec.get("state") == "failed" or (
            rec.get("state") in ACTIVE and rec["id"] not in self.runners
        ):
            rec["respawns"] = 0
            rec.pop("error", None)
            rec["user_paused"] = False
            self._publish(rec, protocol.JobResume(restart=True))
            await self._spawn(rec)
            return self.view(rec)
        rec = self._active(args, "start a new one with `sgltui job run`")
        rec["user_paused"] = False
        return self._changed(rec, protocol.JobResume())

    async def op_cancel(self, args: protocol.JobArgs, client: str | None) -> JobView:
        rec = self._active(args, "nothing to cancel")
        r = self.runners.get(rec["id"])
        if r is None:
            rec["state"], rec["finished"] = "cancelled", time.time()
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
                rec["concurrency_mode"] = "auto"
                rec.pop("auto_for", None)
                n, _ = self.auto_concurrency(rec["slot"])
            else:
                n = _concurrency(raw)
                rec["concurrency_mode"] = "fixed"
            rec["concurrency"] = changed.concurrency = n
        if args.pinned is not msgspec.UNSET:
            rec["pinned"] = changed.pinned = bool(args.pinned)
        if changed.concurrency is None and changed.pinned is None:
            raise JobError(
                "job_set needs concurrency (N or auto) or pinned (true/false)", "invalid"
            )
        return self._changed(rec, changed)


def _trial(args: protocol.JobRunArgs) -> dict | None:
    """The trial state of a --choose job (jobs/choose.py), or None without --choose."""
    if not args.choose:
        return None
    try:
        names = choose.parse_candidates(args.choose)
        return choose.new_trial(
            names,
            objective=str(args.objective or "time"),
            cap_requests=int(args.trial_requests or choose.DEFAULT_CAP_REQUESTS),
            cap_minutes=float(args.trial_minutes or choose.DEFAULT_CAP_MINUTES),
            replan=bool(args.replan),
        )
    except ValueError as exc:
        raise JobError(str(exc)) from None


def _concurrency(raw: Any) -> int:
    try:
        n = int(raw)
    except (TypeError, ValueError):
        raise JobError(
            f"concurrency must be a whole number or auto, not {raw!r}", "invalid"
        ) from None
    if not 1 <= n <= MAX_CONCURRENCY:
        raise JobError(f"concurrency must be between 1 and {MAX_CONCURRENCY}, not {n}", "invalid")
    return n
