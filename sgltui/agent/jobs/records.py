"""Batch jobs' records: one JSON file per job in STATE_DIR/jobs/ (atomic writes), and the
counters every part of the jobs host reads from a record.

A record is what a restarted agent (crash, kill -9, reboot) needs to resume the job: its input,
output, target (a slot or a pool), concurrency, state and per-launch segments. Counters are split
in two: `base_*` is what the output file held when the current runner checked it, `run_*` what
that runner has done since; their sums are the job's.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Literal

import msgspec

from sgltui import protocol
from sgltui.agent.state import read_json
from sgltui.core.files import write_json_atomic

log = logging.getLogger("sgltui.agent.jobs")  # these lines were the jobs host's in agent.log

ACTIVE = ("checking", "waiting", "running", "paused")  # protocol.JobState's first four
FINISHED = ("done", "cancelled", "failed")
PERSIST_S = 5.0  # a record's progress is written at most this often (a change of state at once)

ConcurrencyMode = Literal["auto", "fixed"]


class SegmentRecord(msgspec.Struct, kw_only=True):
    """A job's share of one launch (agent/jobs/segments.py), as its record keeps it."""

    profile: str | None = None
    launch_id: str | None = None
    info_hash: str | None = None  # what its server ran (agent/provenance.py), once kept
    started: float
    last: float  # its latest answer's wall time
    completions: int = 0
    failed: int = 0
    out_tokens: int = 0
    in_tokens: int = 0
    joules: float | None = None  # GPU energy on this launch (None: no power readings)
    closed: bool = False  # its job.segment_done was said

    def view(self) -> protocol.JobSegment:
        return protocol.JobSegment(
            profile=self.profile,
            launch_id=self.launch_id,
            info_hash=self.info_hash,
            started=self.started,
            last=self.last,
            completions=self.completions,
            failed=self.failed,
            out_tokens=self.out_tokens,
            in_tokens=self.in_tokens,
            joules=self.joules,
        )


class JobRecord(msgspec.Struct, kw_only=True):
    """One batch job's record: what STATE_DIR/jobs/ID.json holds (every field written; a file
    of an older agent, without the fields it did not know, loads with their defaults)."""

    v: int = 1
    id: str
    name: str | None = None
    input: str
    output: str
    slot: str  # a pool job's reference slot (agent/jobs/target.py)
    pool: str | None = None
    target: protocol.JobTarget | None = None  # where it sends; None only in an older file
    concurrency: int
    concurrency_mode: ConcurrencyMode = "fixed"
    pinned: bool = False
    client: str | None = None
    created: float
    state: str = "checking"  # protocol.JobState's values
    segments: list[SegmentRecord] = []
    choose: dict | None = None  # a --choose job's trial state (jobs/choose.py)
    auto_for: str | None = None  # the launch its automatic concurrency was chosen for
    auto_tries: int | None = None  # set while the capacity card of a new launch is awaited
    respawns: int = 0  # runners started again since the agent started (or `job resume`)
    pid: int | None = None  # its runner's
    total: int | None = None  # requests in its input, once checked
    stamp: dict | None = None  # the input's check (jobs/batchfile.py): unchanged, not re-read
    base_ok: int = 0  # what the output file held when the current runner checked it
    base_failed: int = 0
    base_out_tokens: int = 0
    run_done: int = 0  # what the current runner has done since
    run_failed: int = 0
    run_out_tokens: int = 0
    target_launch: str | None = None  # the launch (a pool's mix) its segment is of
    target_profile: str | None = None
    pool_mixes: int = 0  # a pool job's mixes of profiles so far (its segments' ids)
    waiting_for: str | None = None
    rate_history: list[tuple[float, float]] = []  # (wall time, tok/s), for the view's plot
    joules: float | None = None
    finished: float | None = None
    error: str | None = None
    disk_error: str | None = None  # why its output cannot be written now
    stalled: str | None = None  # why it gets no answers now (agent/jobs/stall_watch.py)
    user_paused: bool = False
    hold: str | None = None  # "swap" while a swap of its slot holds it


def target_record(slot: str, pool: str | None) -> protocol.JobTarget:
    """A new job's target as its record keeps it (and an older record's, from `pool`/`slot`):
    a job through a pool keeps the pool's first slot as its reference slot (agent/jobs/target.py)."""
    return (
        protocol.JobTarget(kind="pool", name=pool)
        if pool
        else protocol.JobTarget(kind="slot", name=slot)
    )


def answered(rec: JobRecord) -> int:
    return rec.base_ok + rec.run_done


def failed(rec: JobRecord) -> int:
    return rec.base_failed + rec.run_failed


def out_tokens(rec: JobRecord) -> int:
    return rec.base_out_tokens + rec.run_out_tokens


def average(rec: JobRecord) -> tuple[float, float]:
    """(completions/s, output tok/s) over the job's segments: from each one's first to its
    last answer, so the time spent waiting for a server or paused does not count."""
    segs = rec.segments
    secs = sum(max(0.0, s.last - s.started) for s in segs)
    if secs <= 0:
        return 0.0, 0.0
    done = sum(s.completions for s in segs)
    return done / secs, sum(s.out_tokens for s in segs) / secs


def new_record(
    jid: str,
    args: protocol.JobRunArgs,
    inp: Path,
    out: Path,
    slot_id: str,
    concurrency: int,
    mode: ConcurrencyMode,
    client: str | None,
) -> JobRecord:
    """A new job's record, as job_run was given it (checked: agent/jobs/run_args.py)."""
    return JobRecord(
        id=jid,
        name=str(args.name or inp.stem)[:80],
        input=str(inp),
        output=str(out),
        slot=slot_id,
        pool=args.pool,
        target=target_record(slot_id, args.pool),
        concurrency=concurrency,
        concurrency_mode=mode,
        pinned=bool(args.pinned),
        client=client,
        created=time.time(),
    )


def load_record(raw: object) -> JobRecord | None:
    """A record as read from its file (today's, or an older agent's); None if it is not one."""
    if not isinstance(raw, dict) or "id" not in raw:
        return None
    t = raw.get("target")
    if not (isinstance(t, dict) and t.get("kind") in ("slot", "pool") and t.get("name")):
        raw = {**raw, "target": None}  # none, or one this agent cannot read: from `pool`/`slot`
    try:
        rec = msgspec.convert(raw, JobRecord, strict=False)
    except msgspec.ValidationError as exc:
        log.warning("job record %s unreadable, left alone: %s", raw.get("id"), exc)
        return None
    if rec.target is None:  # written before targets existed: said by `pool`/`slot`
        rec.target = target_record(rec.slot, rec.pool)
    return rec


class JobStore:
    """The jobs' directory: records read at start, written (throttled or forced), removed."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._persisted: dict[str, float] = {}  # job id -> monotonic time last written

    def load(self) -> list[JobRecord]:
        """Every readable record, by file name (the ids sort by creation)."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        recs = []
        for path in sorted(self.dir.glob("*.json")):
            rec = load_record(read_json(path, None))
            if rec is not None:
                recs.append(rec)
        return recs

    def path(self, jid: str) -> Path:
        return self.dir / f"{jid}.json"

    def log_path(self, jid: str) -> Path:
        """The job's runner's stderr."""
        return self.dir / f"{jid}.log"

    def save(self, rec: JobRecord, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._persisted.get(rec.id, 0.0) < PERSIST_S:
            return
        self._persisted[rec.id] = now
        try:
            write_json_atomic(self.path(rec.id), msgspec.to_builtins(rec))
        except OSError as exc:
            log.warning("cannot write job record %s: %s", rec.id, exc)

    def remove(self, jid: str) -> None:
        try:
            self.path(jid).unlink()
        except OSError:
            pass
