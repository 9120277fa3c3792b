"""What `job_run` and `job_set` are given, checked before anything starts: the input and output
paths, the concurrency, a --choose trial. Each refusal is one line saying what to do."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sgltui import protocol
from sgltui.agent.jobs.records import ACTIVE, JobRecord
from sgltui.agent.jobs.runner_child import MAX_CONCURRENCY
from sgltui.jobs import choose
from sgltui.jobs.output import OutputError, default_output, ensure_writable


class JobError(Exception):
    """A refused job command: one line for the client, and its code (protocol.ErrorCode)."""

    def __init__(self, message: str, code: protocol.ErrorCode = "refused") -> None:
        super().__init__(message)
        self.code: protocol.ErrorCode = code


def find_job(jobs: dict[str, JobRecord], ref: object) -> JobRecord:
    """A job by id or name; without one, the newest active job (else the newest)."""
    if ref:
        ref = str(ref)
        if ref in jobs:
            return jobs[ref]
        named = [j for j in jobs.values() if j.name == ref]
        if named:
            return max(named, key=lambda j: j.created)
        raise JobError(f"no job {ref!r}; see `sgltui job list`", "not_found")
    if not jobs:
        raise JobError("no job yet; start one with `sgltui job run INPUT.jsonl`", "not_found")
    active = [j for j in jobs.values() if j.state in ACTIVE]
    return max(active or jobs.values(), key=lambda j: j.created)


def check_paths(args: protocol.JobRunArgs, jobs: Iterable[JobRecord]) -> tuple[Path, Path]:
    """(input, output) of a new job; `jobs`: the records, whose active outputs it must not
    share."""
    raw_input = args.input
    if not raw_input or not isinstance(raw_input, str):
        raise JobError("job_run needs input: the path of an OpenAI batch file (JSONL)", "invalid")
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
    for other in jobs:
        if other.state in ACTIVE and Path(other.output) == out:
            raise JobError(
                f"job {other.id} ({other.name}) already writes {out}; "
                "wait for it, cancel it, or choose another -o"
            )
    return inp, out


def trial(args: protocol.JobRunArgs) -> dict | None:
    """The trial state of a --choose job (jobs/choose.py), or None without --choose."""
    if not args.choose:
        return None
    try:
        names = choose.parse_candidates(args.choose)
        state = choose.new_trial(
            names,
            objective=str(args.objective or "time"),
            cap_requests=int(args.trial_requests or choose.DEFAULT_CAP_REQUESTS),
            cap_minutes=float(args.trial_minutes or choose.DEFAULT_CAP_MINUTES),
            replan=bool(args.replan),
        )
    except ValueError as exc:
        raise JobError(str(exc)) from None
    for c in state["candidates"]:
        if args.choose_deltas and c["name"] in args.choose_deltas:
            c["delta"] = dict(args.choose_deltas[c["name"]])
        if args.choose_warmup and c["name"] in args.choose_warmup:
            c["warmup"] = max(0, int(args.choose_warmup[c["name"]]))
    if args.choose_advice:
        state["advice"] = [dict(a) for a in args.choose_advice]
        # advise's expected gain of each candidate (the serving profile, its empty delta, is
        # what the gains are over: x1), for the trial's early end (jobs/choose.py clear_best)
        gains = {str(a.get("name")): a.get("gain") for a in state["advice"]}
        for c in state["candidates"]:
            if c.get("delta") == {}:
                c["gain"] = 1.0
            elif isinstance(gains.get(c["name"]), (int, float)):
                c["gain"] = float(gains[c["name"]])
    return state


def concurrency(raw: Any) -> int:
    try:
        n = int(raw)
    except (TypeError, ValueError):
        raise JobError(
            f"concurrency must be a whole number or auto, not {raw!r}", "invalid"
        ) from None
    if not 1 <= n <= MAX_CONCURRENCY:
        raise JobError(f"concurrency must be between 1 and {MAX_CONCURRENCY}, not {n}", "invalid")
    return n
