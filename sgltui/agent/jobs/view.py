"""A batch job as the agent shows it (protocol.JobView): its record, its rates and its runner's
last progress, read together."""

from __future__ import annotations

from pathlib import Path

import msgspec

from sgltui.agent.jobs.records import (
    FINISHED,
    JobRecord,
    answered,
    average,
    failed,
    out_tokens,
)
from sgltui.agent.jobs.runner_child import Runner
from sgltui.agent.jobs.target import target_of
from sgltui.jobs import choose
from sgltui.jobs.output import errors_path
from sgltui.jobs.progress import Rates, eta_s
from sgltui.protocol import JobChoice, JobState, JobView, JobWarmFirst


def job_view(rec: JobRecord, rates: Rates | None, r: Runner | None, full: bool = False) -> JobView:
    rates = rates or Rates()
    done, bad = answered(rec), failed(rec)
    total = rec.total
    running = rec.state == "running"
    if running:
        tok_s, comp_s = rates.tok_s(), rates.completions_s()
    elif rec.state in FINISHED:  # its average over the time it was sent (0.0 read wrong)
        comp_s, tok_s = average(rec)
    else:  # paused or waiting: nothing is sent now, and a figure would be stale
        comp_s = tok_s = 0.0
    remaining = (total - done - bad) if total is not None else None
    progress = r.progress if r else {}
    return JobView(
        id=rec.id,
        name=rec.name,
        state=JobState(rec.state),
        target=target_of(rec),
        slot=rec.slot,
        pool=rec.pool,
        input=rec.input,
        output=rec.output,
        errors_output=str(errors_path(Path(rec.output))),
        pinned=rec.pinned,
        hold=rec.hold,
        waiting_for=rec.waiting_for,
        concurrency=rec.concurrency,
        concurrency_mode=rec.concurrency_mode,
        total=total,
        answered=done,
        failed=bad,
        remaining=remaining,
        in_flight=progress.get("in_flight", 0),
        # the runner said it stopped sending and nothing is in flight
        quiet=bool(r is None or (r.sent_paused and r.paused_ev.is_set())),
        out_tokens=out_tokens(rec),
        retries=progress.get("retries", 0),
        conn_errors=progress.get("conn_errors", 0),
        completions_s=round(comp_s, 2),
        tok_s=round(tok_s, 1),
        eta_s=eta_s(remaining, done, out_tokens(rec), tok_s)
        if remaining is not None and running
        else (0.0 if remaining == 0 else None),
        created=rec.created,
        finished=rec.finished,
        error=rec.error,
        stalled=rec.stalled,
        segments=[s.view() for s in rec.segments],
        runner_pid=rec.pid,
        runner_cpu_s=progress.get("cpu_run_s"),
        warm_first=msgspec.convert(progress["warm_first"], JobWarmFirst)
        if progress.get("warm_first")
        else None,
        rate_history=list(rec.rate_history) if full else None,
        joules=rec.joules,
        decision=msgspec.convert(choose.view(rec.choose, rec.segments), JobChoice)
        if rec.choose
        else None,
    )
