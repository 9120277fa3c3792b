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
from typing import Any

from sgltui import protocol
from sgltui.agent.job_target import target_record
from sgltui.agent.state import read_json
from sgltui.core.files import write_json_atomic

log = logging.getLogger("sgltui.agent.jobs")  # these lines were the jobs host's in agent.log

ACTIVE = ("checking", "waiting", "running", "paused")  # protocol.JobState's first four
FINISHED = ("done", "cancelled", "failed")
PERSIST_S = 5.0  # a record's progress is written at most this often (a change of state at once)


def answered(rec: dict) -> int:
    return int(rec.get("base_ok", 0)) + int(rec.get("run_done", 0))


def failed(rec: dict) -> int:
    return int(rec.get("base_failed", 0)) + int(rec.get("run_failed", 0))


def out_tokens(rec: dict) -> int:
    return int(rec.get("base_out_tokens", 0)) + int(rec.get("run_out_tokens", 0))


def average(rec: dict) -> tuple[float, float]:
    """(completions/s, output tok/s) over the job's segments: from each one's first to its
    last answer, so the time spent waiting for a server or paused does not count."""
    segs = rec.get("segments") or []
    secs = sum(max(0.0, s["last"] - s["started"]) for s in segs)
    if secs <= 0:
        return 0.0, 0.0
    done = sum(s["completions"] for s in segs)
    return done / secs, sum(s["out_tokens"] for s in segs) / secs


def new_record(
    jid: str,
    args: protocol.JobRunArgs,
    inp: Path,
    out: Path,
    slot_id: str,
    concurrency: int,
    mode: str,
    client: str | None,
) -> dict[str, Any]:
    """A new job's record, as job_run was given it (checked: agent/job_run_args.py)."""
    return {
        "v": 1,
        "id": jid,
        "name": str(args.name or inp.stem)[:80],
        "input": str(inp),
        "output": str(out),
        "slot": slot_id,  # a pool job's reference slot (agent/job_target.py)
        "pool": args.pool,
        "target": target_record(slot_id, args.pool),  # where it sends: a slot or a pool
        "concurrency": concurrency,
        "concurrency_mode": mode,
        "pinned": bool(args.pinned),
        "client": client,
        "created": time.time(),
        "state": "checking",
        "segments": [],
    }


class JobStore:
    """The jobs' directory: records read at start, written (throttled or forced), removed."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._persisted: dict[str, float] = {}  # job id -> monotonic time last written

    def load(self) -> list[dict]:
        """Every readable record, by file name (the ids sort by creation)."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        recs = []
        for path in sorted(self.dir.glob("*.json")):
            rec = read_json(path, None)
            if isinstance(rec, dict) and "id" in rec:
                recs.append(rec)
        return recs

    def path(self, jid: str) -> Path:
        return self.dir / f"{jid}.json"

    def log_path(self, jid: str) -> Path:
        """The job's runner's stderr."""
        return self.dir / f"{jid}.log"

    def save(self, rec: dict, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._persisted.get(rec["id"], 0.0) < PERSIST_S:
            return
        self._persisted[rec["id"]] = now
        try:
            write_json_atomic(self.path(rec["id"]), rec)
        except OSError as exc:
            log.warning("cannot write job record %s: %s", rec["id"], exc)

    def remove(self, jid: str) -> None:
        try:
            self.path(jid).unlink()
        except OSError:
            pass
