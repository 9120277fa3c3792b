"""The session report's sections from a session's events and timeline: launches, what ran,
swaps and their time split, crashes, time in each profile, throughput per profile and batch
jobs (the bench runs are session/report_bench.py). Each returns plain dicts for build_report()."""

from __future__ import annotations

import statistics
from typing import Any

from sgltui import protocol
from sgltui.core import provenance, units
from sgltui.core.redact import Redactor
from sgltui.session.reader import Session
from sgltui.session.report_history import SlotHistory
from sgltui.session.report_values import num, quantile

SWAP_PHASES = ("drain", "stop", "memory_release", "load", "ready")
# swap.step names (status: slots[].swap.step) -> the phase they start.
_STEP_PHASE = {
    "draining": "drain",
    "stopping": "stop",
    "releasing memory": "memory_release",
    "launching": "load",
}
# slot.phase values after which a launching server is counted as "getting ready" rather than loading.
_READY_PHASES = {"warming up"}

SERVING_STATES = {"ready"}
STARTING_STATES = {"launching"}


def launches(state: protocol.SessionState, redactor: Redactor) -> list[dict[str, Any]]:
    return [
        {
            "launch_id": x.launch_id,
            "slot": x.slot,
            "profile": x.profile,
            "ts": x.ts,
            "command": " ".join(redactor.argv(x.command)),
            "command_hash": x.command_hash,
            "outcome": x.outcome,
            "start_s": x.ready_at - x.ts if x.ready_at is not None else None,
            "cause": x.cause,
            "ended": x.ended,
            "max_running_requests": x.max_running_requests,
        }
        for x in state.launches
    ]


def swaps(state: protocol.SessionState) -> list[dict[str, Any]]:
    done = []
    for x in state.swaps:
        if x.done_at is None:  # still running when the recording ends
            continue
        timings = {k: num(v) for k, v in x.timings_s.items()}
        derived = _timings_from_steps(x.steps, x.phases, x.done_at)
        for key in (*SWAP_PHASES, "total"):
            if timings.get(key) is None and derived.get(key) is not None:
                timings[key] = derived[key]
        if timings.get("total") is None:
            parts = [v for k in SWAP_PHASES if (v := timings.get(k)) is not None]
            timings["total"] = sum(parts) if parts else None
        done.append(
            {
                "ts": x.done_at,
                "slot": x.slot,
                "from": x.from_,
                "to": x.to,
                "ok": x.ok,
                "rolled_back": x.rolled_back,
                "timings_s": {k: timings.get(k) for k in (*SWAP_PHASES, "total")},
            }
        )
    return done


def _timings_from_steps(
    steps: list[tuple[float, str]], phases: list[tuple[float, str]], done_ts: float
) -> dict[str, Any]:
    """Phase durations from swap.step start times, for agents whose swap.done lacks timings."""
    if not steps:
        return {}
    starts: dict[str, float] = {}
    for ts, step in steps:
        phase = _STEP_PHASE.get(step)
        if phase and phase not in starts:
            starts[phase] = ts
    ready_start = next(
        (ts for ts, ph in phases if ph in _READY_PHASES and ts >= starts.get("load", 0)), None
    )
    if ready_start is not None:
        starts["ready"] = ready_start
    ready_ts = next((ts for ts, s in steps if s == "ready"), done_ts)
    ordered = sorted(starts.items(), key=lambda kv: kv[1])
    out: dict[str, float | None] = {}
    for i, (phase, start) in enumerate(ordered):
        end = ordered[i + 1][1] if i + 1 < len(ordered) else ready_ts
        out[phase] = max(0.0, end - start)
    out["total"] = max(0.0, ready_ts - steps[0][0])
    return out


def crashes(
    session: Session, state: protocol.SessionState, redactor: Redactor
) -> list[dict[str, Any]]:
    out = []
    for x in state.failures:
        cause = x.cause or protocol.Cause(kind="", summary="")
        lines = [str(line) for line in cause.lines][-8:]
        if not lines and x.launch_id:
            lines = _log_tail(session, x.launch_id, 8)
        out.append(
            {
                "ts": x.ts,
                "slot": x.slot,
                "state": str(x.state),
                "profile": x.profile,
                "launch_id": x.launch_id,
                "kind": cause.kind or None,
                "summary": cause.summary or x.reason,
                "fix": cause.fix or None,
                "exit_code": cause.exit_code,
                "lines": [redactor.text(line) for line in lines],
            }
        )
    return out


def _log_tail(session: Session, launch_id: str, n: int) -> list[str]:
    tail: list[str] = []
    for line in session.server_log_lines(launch_id):
        tail.append(line)
        if len(tail) > n:
            tail.pop(0)
    return tail


def time_in_profiles(history: SlotHistory, session_span: float) -> list[dict[str, Any]]:
    acc: dict[str, dict[str, float]] = {}
    for intervals in history.intervals.values():
        for start, end, profile, state, _lid in intervals:
            if profile is None or state == "stopped":
                continue
            a = acc.setdefault(profile, {"serving_s": 0.0, "starting_s": 0.0, "other_s": 0.0})
            key = (
                "serving_s"
                if state in SERVING_STATES
                else "starting_s"
                if state in STARTING_STATES
                else "other_s"
            )
            a[key] += end - start
    rows = []
    for profile, a in acc.items():
        total = a["serving_s"] + a["starting_s"] + a["other_s"]
        rows.append(
            {
                "profile": profile,
                **a,
                "total_s": total,
                "share": (a["serving_s"] / session_span) if session_span > 0 else None,
            }
        )
    rows.sort(key=lambda r: float(r["serving_s"] or 0.0), reverse=True)
    return rows


def throughput(
    session: Session, history: SlotHistory, max_running: dict[str, float]
) -> list[dict[str, Any]]:
    """Per-profile throughput while serving; fills `max_running` (launch id -> the engine's
    effective max running requests) for launches whose capacity card was not recorded."""
    per: dict[str, dict[str, list[Any]]] = {}
    order: list[str] = []
    for sample in session.timeline:
        ts = num(sample.get("ts"))
        engine = sample.get("engine") or {}
        if ts is None or not isinstance(engine, dict):
            continue
        gpu_used = sum(
            num(g.get("used_bytes")) or 0.0
            for g in (sample.get("gpus") or [])
            if isinstance(g, dict)
        )
        for slot, eng in engine.items():
            if not isinstance(eng, dict):
                continue
            where = history.interval(str(slot), ts)
            if where is None or where[2] is None or where[3] not in SERVING_STATES:
                continue
            profile = where[2]
            mrr = num(eng.get("max_running_requests"))
            if where[4] is not None and mrr is not None:
                max_running[where[4]] = max(mrr, max_running.get(where[4], 0.0))
            if profile not in per:
                per[profile] = {"gen": [], "running": [], "usage": [], "gpu": []}
                order.append(profile)
            p = per[profile]
            p["gen"].append(num(eng.get("gen_throughput")))
            p["running"].append(num(eng.get("num_running_reqs")))
            p["usage"].append(num(eng.get("token_usage")))
            p["gpu"].append(gpu_used or None)
    rows = []
    for profile in order:
        p = per[profile]
        gen = [v for v in p["gen"] if v is not None]
        running = [v for v in p["running"] if v is not None]
        usage = [v for v in p["usage"] if v is not None]
        gpu = [v for v in p["gpu"] if v is not None]
        busy = [v for v in gen if v > 0]
        rows.append(
            {
                "profile": profile,
                "samples": len(p["gen"]),
                "gen_tok_s_mean": statistics.fmean(gen) if gen else None,
                "gen_tok_s_busy_mean": statistics.fmean(busy) if busy else None,
                "gen_tok_s_p50": quantile(gen, 0.5),
                "gen_tok_s_max": max(gen) if gen else None,
                "running_reqs_mean": statistics.fmean(running) if running else None,
                "running_reqs_max": max(running) if running else None,
                "token_usage_mean": statistics.fmean(usage) if usage else None,
                "gpu_used_bytes_max": max(gpu) if gpu else None,
                "series": p["gen"],
            }
        )
    return rows


# Job events that tell of an interruption (issue 29): said in the report as they happened.
INCIDENTS = {
    "job.resume_after_restart": "resumed by a new agent",
    "job.runner_exit": "its runner exited and was started again",
    "job.stalled": "stalled",
    "job.stall_over": "answers again",
    "job.disk_error": "output refused",
    "job.disk_ok": "output written again",
}


def what_ran(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per ready server (launched, adopted or attached), what actually ran: its version and GPU,
    the flags that differ from SGLang's defaults and the values SGLang decided, under the hash
    bench runs and jobs carry (core/provenance.py; the `server.provenance` events)."""
    out = []
    for e in events:
        if e.get("type") != "server.provenance":
            continue
        rec = {
            k: e.get(k) for k in ("version", "args", "decided", "gpu", "model", "launch_command")
        }
        out.append(
            {
                "ts": e.get("ts"),
                "slot": e.get("slot"),
                "launch_id": e.get("launch_id"),
                "model": e.get("model"),
                **provenance.summary({**rec, "hash": e.get("hash")}),
            }
        )
    return out


def _job_target(start: dict[str, Any]) -> str | None:
    """Where a job sent, from its job.start: "pool NAME" or "slot ID" (a session recorded
    before job.start carried its target: the slot it was stamped with)."""
    target = start.get("target")
    if isinstance(target, dict) and target.get("kind") and target.get("name"):
        return f"{target['kind']} {target['name']}"
    return f"slot {start['slot']}" if start.get("slot") else None


def jobs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Batch jobs (sgltui/agent/jobs/jobs_host.py events): each job's outcome and its segments, one
    per launch it sent to (completions, tokens, time and rate per profile)."""
    by_id: dict[str, dict[str, Any]] = {}
    for ev in events:
        t = ev.get("type") or ""
        if not t.startswith("job.") or not ev.get("job"):
            continue
        job = by_id.setdefault(
            str(ev["job"]),
            {"job": str(ev["job"]), "name": None, "target": None, "started": None, "state": None,
             "total": None, "answered": None, "failed": None, "segments": [],
             "joules": None, "decision": None, "incidents": []},
        )  # fmt: skip
        if t in INCIDENTS:  # what held the job up, and what brought it back, in order
            what, msg = INCIDENTS[t], str(ev.get("message") or "")
            said = msg if msg.startswith(what) else what + (f": {msg}" if msg else "")
            job["incidents"].append(f"{units.clock(ev.get('ts'))} {said}")
        if t == "job.start":
            job["name"], job["started"] = ev.get("name"), ev.get("ts")
            job["target"] = _job_target(ev)
        elif t == "job.checked":
            job["total"] = ev.get("total")
        elif t == "job.segment":
            seg = {k: ev.get(k) for k in ("profile", "launch_id", "completions", "failed",
                                          "out_tokens", "seconds", "tok_s", "joules")}  # fmt: skip
            # one segment per launch: a later event for the same launch is the fuller count
            segs = [x for x in job["segments"] if x["launch_id"] != seg["launch_id"]]
            job["segments"] = segs + [seg]
        elif t == "job.done":
            job.update(
                state=ev.get("state"), answered=ev.get("answered"), failed=ev.get("failed"),
                total=ev.get("total", job["total"]), seconds=ev.get("seconds"),
                joules=ev.get("joules"),
            )  # fmt: skip
        elif t == "job.decision":  # the last decision (a --replan makes another)
            job["decision"] = {k: ev.get(k) for k in ("winner", "objective", "round", "note",
                                                      "candidates", "advice")}  # fmt: skip
        elif t == "job.progress" and job["state"] is None:
            job.update(answered=ev.get("answered"), failed=ev.get("failed"), state="running")
    return list(by_id.values())


def endpoint(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the agent endpoint did for requests (agent/endpoint/endpoint.py's `endpoint` events): counts
    by action and each line with its cause; None when it did nothing."""
    acts = [e for e in events if e.get("type") == "endpoint" and e.get("action") != "lease"]
    if not acts:
        return None
    counts: dict[str, int] = {}
    for e in acts:
        counts[str(e.get("action"))] = counts.get(str(e.get("action")), 0) + 1
    return {
        "counts": counts,
        "request_driven_swaps": sum(counts.get(k, 0) for k in ("wake", "start", "evict", "idle")),
        "lines": [{"ts": e.get("ts"), "text": e.get("text")} for e in acts],
    }
