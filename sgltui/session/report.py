"""`sgltui report`: what happened in a session, from its directory alone.

build_report() turns a loaded session (session/reader.py) into one plain dict: launches, swaps
with their time split (drain / stop / memory release / load / ready), crashes and their causes,
time in each profile, throughput per profile from the timeline, bench comparisons and the
recommendation. render() prints that dict as Markdown (with Unicode charts), JSON or CSV, so the
three formats always agree. Everything is redacted before it is returned: log lines copied from
a server's output may carry an API key (SGLang prints it in its server_args line).
"""

from __future__ import annotations

import bisect
import csv
import io
import json
import math
import statistics
from collections.abc import Iterable
from typing import Any

from sgltui import protocol
from sgltui.core import choice, provenance, units
from sgltui.core.charts import hbar, sparkline, stacked_bar
from sgltui.core.redact import Redactor
from sgltui.session.reader import Session

REPORT_VERSION = 1
FORMATS = ("md", "json", "csv")

SWAP_PHASES = ("drain", "stop", "memory_release", "load", "ready")
SWAP_PHASE_LABEL = {
    "drain": "drain",
    "stop": "stop",
    "memory_release": "memory release",
    "load": "load",
    "ready": "ready",
}
SWAP_PHASE_CHAR = {"drain": "░", "stop": "▒", "memory_release": "▓", "load": "█", "ready": "▞"}
_OTHER_CHAR = "·"
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


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def _num(v: Any) -> float | None:
    return (
        float(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        else None
    )


def fmt_num(v: float | None, digits: int = 1) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:,.{digits}f}"


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> None (bench files may hold NaN for single runs)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# ---------------------------------------------------------------------------------------------
# Slot history: who ran what, when
# ---------------------------------------------------------------------------------------------


class SlotHistory:
    """Per-slot intervals (start, end, profile, state, launch_id) rebuilt from events."""

    def __init__(self, events: list[dict[str, Any]], end_ts: float) -> None:
        self.intervals: dict[str, list[tuple[float, float, str | None, str, str | None]]] = {}
        # (since, profile, state, launch_id) per slot, from the one reducer (protocol.apply):
        # an interval ends whenever the folded slot's profile, state or launch changes.
        cur: dict[str, tuple[float, str | None, str, str | None]] = {}
        state = protocol.SessionState()
        for ev in events:
            event = protocol.decode_event(ev)
            if event.slot is None or _num(ev.get("ts")) is None:
                continue
            state = protocol.apply(state, event)
            view = state.slots.get(event.slot)
            if view is None:
                continue
            now = (event.ts, view.profile, str(view.state), view.launch_id)
            before = cur.get(event.slot)
            if before is None or before[1:] != now[1:]:
                if before is not None:
                    self._close(event.slot, before, event.ts)
                cur[event.slot] = now
        for slot, since in cur.items():
            self._close(slot, since, max(end_ts, since[0]))
        self.state = state  # the whole session folded: its launches, swaps and failures
        # Interval starts per slot, for bisecting: a week of samples against many intervals.
        self._starts = {slot: [iv[0] for iv in ivs] for slot, ivs in self.intervals.items()}

    def _close(
        self, slot: str, since: tuple[float, str | None, str, str | None], ts: float
    ) -> None:
        if ts > since[0]:
            self.intervals.setdefault(slot, []).append((since[0], ts, *since[1:]))

    def interval(
        self, slot: str, ts: float
    ) -> tuple[float, float, str | None, str, str | None] | None:
        """(start, end, profile, state, launch_id) of `slot` at `ts`, or None."""
        starts = self._starts.get(slot)
        if not starts:
            return None
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0:
            iv = self.intervals[slot][i]
            if iv[0] <= ts < iv[1]:
                return iv
        return None

    def at(self, slot: str, ts: float) -> tuple[str | None, str] | None:
        """(profile, state) of `slot` at `ts`, or None if nothing was recorded then."""
        iv = self.interval(slot, ts)
        return (iv[2], iv[3]) if iv else None


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------


def _launches(state: protocol.SessionState, redactor: Redactor) -> list[dict[str, Any]]:
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


def _swaps(state: protocol.SessionState) -> list[dict[str, Any]]:
    swaps = []
    for x in state.swaps:
        if x.done_at is None:  # still running when the recording ends
            continue
        timings = {k: _num(v) for k, v in x.timings_s.items()}
        derived = _timings_from_steps(x.steps, x.phases, x.done_at)
        for key in (*SWAP_PHASES, "total"):
            if timings.get(key) is None and derived.get(key) is not None:
                timings[key] = derived[key]
        if timings.get("total") is None:
            parts = [v for k in SWAP_PHASES if (v := timings.get(k)) is not None]
            timings["total"] = sum(parts) if parts else None
        swaps.append(
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
    return swaps


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


def _crashes(
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


def _time_in_profiles(history: SlotHistory, session_span: float) -> list[dict[str, Any]]:
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


def _throughput(
    session: Session, history: SlotHistory, max_running: dict[str, float]
) -> list[dict[str, Any]]:
    """Per-profile throughput while serving; fills `max_running` (launch id -> the engine's
    effective max running requests) for launches whose capacity card was not recorded."""
    per: dict[str, dict[str, list[Any]]] = {}
    order: list[str] = []
    for sample in session.timeline:
        ts = _num(sample.get("ts"))
        engine = sample.get("engine") or {}
        if ts is None or not isinstance(engine, dict):
            continue
        gpu_used = sum(
            _num(g.get("used_bytes")) or 0.0
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
            mrr = _num(eng.get("max_running_requests"))
            if where[4] is not None and mrr is not None:
                max_running[where[4]] = max(mrr, max_running.get(where[4], 0.0))
            if profile not in per:
                per[profile] = {"gen": [], "running": [], "usage": [], "gpu": []}
                order.append(profile)
            p = per[profile]
            p["gen"].append(_num(eng.get("gen_throughput")))
            p["running"].append(_num(eng.get("num_running_reqs")))
            p["usage"].append(_num(eng.get("token_usage")))
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
                "gen_tok_s_p50": _quantile(gen, 0.5),
                "gen_tok_s_max": max(gen) if gen else None,
                "running_reqs_mean": statistics.fmean(running) if running else None,
                "running_reqs_max": max(running) if running else None,
                "token_usage_mean": statistics.fmean(usage) if usage else None,
                "gpu_used_bytes_max": max(gpu) if gpu else None,
                "series": p["gen"],
            }
        )
    return rows


def _bench(session: Session) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for run in session.bench:
        if run.data is None:
            runs.append(
                {"run_id": run.run_id, "error": run.error, "rows": [], "recommendation": None}
            )
            continue
        data = run.data
        comparison = data.get("comparison") or {}
        rows = []
        if comparison.get("rows"):
            for r in comparison["rows"]:
                tok = r.get("output_tok_s") or {}
                rank = r.get("rank_tok_s") or {}
                rows.append(
                    {
                        "profile": r.get("profile"),
                        "concurrency": r.get("concurrency"),
                        "repeats": r.get("repeats"),
                        "output_tok_s": _num(tok.get("mean") if isinstance(tok, dict) else tok),
                        "output_tok_s_ci": [_num(tok.get("ci_low")), _num(tok.get("ci_high"))]
                        if isinstance(tok, dict)
                        else None,
                        "rank_tok_s": _num(rank.get("mean") if isinstance(rank, dict) else rank),
                        "request_s": _num(
                            (r.get("request_s") or {}).get("mean")
                            if isinstance(r.get("request_s"), dict)
                            else r.get("request_s")
                        ),
                        "ttft_p50_ms": _num(r.get("ttft_p50_ms")),
                        "tpot_p50_ms": _num(r.get("tpot_p50_ms")),
                        "completed": r.get("completed"),
                        "failed": r.get("failed"),
                        "errors": r.get("errors") or [],
                    }
                )
        else:
            # No comparison block (an interrupted run): one row per result entry.
            for r in data.get("results") or []:
                m = r.get("metrics") or {}
                rows.append(
                    {
                        "profile": r.get("profile"),
                        "concurrency": r.get("concurrency"),
                        "repeats": 1,
                        "output_tok_s": _num(m.get("output_throughput")),
                        "output_tok_s_ci": None,
                        "rank_tok_s": _num(m.get("steady_state_output_throughput"))
                        or _num(m.get("output_throughput")),
                        "request_s": _num(m.get("request_throughput")),
                        "ttft_p50_ms": _num(m.get("median_ttft_ms")),
                        "tpot_p50_ms": _num(m.get("median_tpot_ms")),
                        "completed": m.get("completed"),
                        "failed": m.get("failed"),
                        "errors": [r["error"]] if r.get("error") else [],
                    }
                )
        job = comparison.get("job") or {}
        if comparison:
            recommendation = job.get("recommendation") or _best_sentence(
                comparison.get("best") or {}
            )
        else:  # the run was cut short before the bench compared its points
            recommendation = (
                f"none: the run stopped before it compared its points; "
                f"`sgltui bench compare {run.path}` ranks what it measured."
            )
        runs.append(
            {
                "run_id": data.get("run_id") or run.run_id,
                "error": None,
                "spec": _spec_summary(data.get("spec") or {}),
                "rows": rows,
                "best": comparison.get("best") or {},
                "job": {k: v for k, v in job.items() if k != "estimates"} or None,
                "estimates": job.get("estimates") or [],
                "recommendation": recommendation,
                # what each profile's server ran (core/provenance.py; runs before it: none)
                "servers": {
                    str(name): {"hash": rec.get("hash"), "version": rec.get("version")}
                    for name, rec in (data.get("provenance") or {}).items()
                    if isinstance(rec, dict)
                },
            }
        )
    return runs


def _spec_summary(spec: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "profiles",
        "concurrency",
        "concurrencies",
        "num_prompts",
        "requests",
        "input_len",
        "output_len",
        "repeat",
        "repeats",
        "workload",
        "dataset",
        "seed",
        "duration_s",
    )
    return {k: spec[k] for k in keep if k in spec}


def _best_sentence(best: dict[str, Any]) -> str | None:
    """The bench's own ranking (comparison.best: each profile's best concurrency), in words."""
    ranked = []
    for profile, b in best.items():
        tok = b.get("tok_s")
        mean = _num(tok.get("mean") if isinstance(tok, dict) else tok)
        if mean:
            ranked.append((mean, str(profile), b.get("concurrency")))
    if not ranked:
        return None
    ranked.sort(reverse=True)
    (first, name, conc), rest = ranked[0], ranked[1:]
    text = f"Highest measured throughput: {name} at concurrency {conc} ({units.tok_s(first)})."
    if rest:
        second, other, _ = rest[0]
        text += f" {first / second:.2f}x {other} ({units.tok_s(second)})."
    return text


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


# Job events that tell of an interruption (issue 29): said in the report as they happened.
INCIDENTS = {
    "job.resume_after_restart": "resumed by a new agent",
    "job.runner_exit": "its runner exited and was started again",
    "job.stalled": "stalled",
    "job.stall_over": "answers again",
    "job.disk_error": "output refused",
    "job.disk_ok": "output written again",
}


def _what_ran(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def _jobs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Batch jobs (sgltui/agent/jobs_host.py events): each job's outcome and its segments, one
    per launch it sent to (completions, tokens, time and rate per profile)."""
    jobs: dict[str, dict[str, Any]] = {}
    for ev in events:
        t = ev.get("type") or ""
        if not t.startswith("job.") or not ev.get("job"):
            continue
        job = jobs.setdefault(
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
                                                      "candidates")}  # fmt: skip
        elif t == "job.progress" and job["state"] is None:
            job.update(answered=ev.get("answered"), failed=ev.get("failed"), state="running")
    return list(jobs.values())


def build_report(session: Session, redactor: Redactor | None = None) -> dict[str, Any]:
    redactor = redactor or Redactor()
    events = session.events
    for ev in events:  # learn keys from launch commands (already redacted on disk; belt and braces)
        if isinstance(ev.get("command"), list):
            redactor.argv(ev["command"])
    ts_all = [t for t in (_num(e.get("ts")) for e in events) if t is not None]
    if len(session.timeline):
        ts_all += [session.timeline.ts[0], session.timeline.ts[-1]]
    started = min(ts_all) if ts_all else None
    last = max(ts_all) if ts_all else None
    span = (last - started) if started is not None and last is not None else 0.0
    history = SlotHistory(events, last or 0.0)
    agent_starts = [e for e in events if e.get("type") == "agent.start"]
    disk_errors = [
        {"ts": e.get("ts"), "error": e.get("error")}
        for e in events
        if e.get("type") == "disk.error"
    ]
    launches = _launches(history.state, redactor)
    max_running: dict[str, float] = {}
    throughput = _throughput(session, history, max_running)
    for launch in launches:
        if launch["max_running_requests"] is None and launch["launch_id"] in max_running:
            launch["max_running_requests"] = int(max_running[launch["launch_id"]])
    report = {
        "v": REPORT_VERSION,
        "session": {
            "name": session.name,
            "path": str(session.path),
            "started": started,
            "last_event": last,
            "duration_s": span,
            "ended": bool(events) and events[-1].get("type") == "agent.stop",
            "agent_versions": sorted(
                {str(e.get("version")) for e in agent_starts if e.get("version")}
            ),
            "agent_restarts": max(0, len(agent_starts) - 1),
            "events": len(events),
            "samples": len(session.timeline),
        },
        "launches": launches,
        "what_ran": _what_ran(events),
        "swaps": _swaps(history.state),
        "crashes": _crashes(session, history.state, redactor),
        "time_in_profile": _time_in_profiles(history, span),
        "throughput": throughput,
        "bench": _bench(session),
        "jobs": _jobs(events),
        "disk_errors": disk_errors,
        "notes": list(session.notes),
    }
    cleaned: dict[str, Any] = _clean(redactor.obj(report))
    return cleaned


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def render(report: dict[str, Any], fmt: str) -> str:
    if fmt == "md":
        return render_markdown(report)
    if fmt == "json":
        return json.dumps(report, indent=2) + "\n"
    if fmt == "csv":
        return render_csv(report)
    raise ValueError(f"unknown report format {fmt!r}; use one of: {', '.join(FORMATS)}")


def _md_table(headers: list[str], rows: Iterable[list[Any]]) -> list[str]:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def render_markdown(r: dict[str, Any]) -> str:
    out = _md_header(r["session"])
    out += _md_section(
        "Launches", _md_launches(r["launches"]), "No server was launched in this session."
    )
    out += _md_section(
        "What ran", _md_what_ran(r.get("what_ran") or []), "No server's /server_info was kept."
    )
    out += _md_section("Swaps", _md_swaps(r["swaps"]), "No swaps.")
    out += _md_section("Crashes and failures", _md_crashes(r["crashes"]), "None.")
    out += _md_section(
        "Time in each profile", _md_time_in_profile(r["time_in_profile"]), "No server ran."
    )
    out += _md_section(
        "Throughput per profile (from the timeline)",
        _md_throughput(r["throughput"]),
        "No timeline samples while a server was ready.",
    )
    out += _md_section("Batch jobs", _md_jobs(r.get("jobs") or []), "No batch jobs.")
    out += _md_section("Bench runs", _md_bench(r["bench"]), "No bench runs.")
    notes = list(r["notes"]) + [
        f"disk error at {units.timestamp(d['ts'])}: {d['error']}" for d in r["disk_errors"]
    ]
    if notes:
        out += _md_section("Notes", [f"- {n}" for n in notes], "")
    return "\n".join(out).rstrip("\n") + "\n"


def _md_section(title: str, body: list[str], empty: str) -> list[str]:
    """A '## title' section: its body, or the sentence that says there is nothing."""
    return [f"## {title}", "", *(body or [empty]), ""]


def _md_header(s: dict[str, Any]) -> list[str]:
    out = [f"# sgltui session {s['name']}", ""]
    out.append(
        f"- Recorded: {units.timestamp(s['started'])} to {units.timestamp(s['last_event'])} ({units.span(s['duration_s'])})"
        + ("" if s["ended"] else ", agent still running or stopped abruptly")
    )
    out.append(f"- Directory: `{s['path']}`")
    out.append(
        f"- {s['events']} events, {s['samples']} timeline samples"
        + (f", agent restarted {s['agent_restarts']} time(s)" if s["agent_restarts"] else "")
    )
    if s["agent_versions"]:
        out.append(f"- sgltui agent version: {', '.join(s['agent_versions'])}")
    return [*out, ""]


def _md_launches(launches: list[dict[str, Any]]) -> list[str]:
    if not launches:
        return []
    return _md_table(
        ["time", "slot", "profile", "outcome", "start time", "max running", "launch id"],
        (
            [
                units.timestamp(x["ts"]),
                x["slot"],
                x["profile"] or "-",
                x["outcome"] + (f": {x['cause']}" if x.get("cause") else ""),
                units.span(x["start_s"]),
                x["max_running_requests"] if x["max_running_requests"] is not None else "-",
                f"`{x['launch_id']}`",
            ]
            for x in launches
        ),
    )


def _md_what_ran(rows: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for x in rows:
        gpu = x.get("gpu") or {}
        on = " ".join(str(gpu[k]) for k in ("name", "driver", "cuda") if gpu.get(k)) or "-"
        out.append(
            f"- {units.timestamp(x['ts'])} slot {x['slot']} `{x.get('launch_id') or '-'}`: "
            f"{x.get('model') or '-'}, SGLang {x.get('version') or '?'}, GPU {on}, "
            f"server_info `{x.get('hash')}`"
        )
        flags = x.get("flags") or {}
        out.append(
            "  - flags given or off SGLang's default: "
            + (", ".join(_flag_text(k, v) for k, v in sorted(flags.items())) or "none")
        )
        decided = x.get("decided") or {}
        if decided:
            out.append(
                "  - decided by SGLang: "
                + ", ".join(f"{k}={v}" for k, v in sorted(decided.items()))
            )
    return out


def _flag_text(key: str, value: Any) -> str:
    if value is True:
        return f"--{key}"
    if isinstance(value, list):
        value = " ".join(map(str, value))
    return f"--{key} {_short(str(value), 40)}"


def _md_swaps(swaps: list[dict[str, Any]]) -> list[str]:
    if not swaps:
        return []
    out = _md_table(
        ["time", "from -> to", "result", *[SWAP_PHASE_LABEL[p] for p in SWAP_PHASES], "total"],
        (
            [
                units.timestamp(x["ts"]),
                f"{x['from']} -> {x['to']}",
                "ok" if x["ok"] else ("rolled back" if x["rolled_back"] else "failed"),
                *[units.span(x["timings_s"].get(p)) for p in SWAP_PHASES],
                units.span(x["timings_s"].get("total")),
            ]
            for x in swaps
        ),
    )
    longest = max((x["timings_s"].get("total") or 0.0) for x in swaps)
    if longest <= 0:
        return out
    legend = "  ".join(f"{SWAP_PHASE_CHAR[p]} {SWAP_PHASE_LABEL[p]}" for p in SWAP_PHASES)
    out += ["", "```", f"swap time split   {legend}  {_OTHER_CHAR} other (rollback, waits)"]
    for x in swaps:
        parts = [(x["timings_s"].get(p), SWAP_PHASE_CHAR[p]) for p in SWAP_PHASES]
        known = sum(v for v, _ in parts if v)
        total = x["timings_s"].get("total") or 0.0
        parts.append((total - known if total - known > 0.05 * total else None, _OTHER_CHAR))
        bar = stacked_bar(parts, longest, 48)
        label = _short(str(x["from"]) + "->" + str(x["to"]), 24)
        out.append(f"{label:<24} {bar} {units.span(x['timings_s'].get('total'))}")
    return [*out, "```"]


def _md_crashes(crashes: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for c in crashes:
        head = f"- **{c['state']}** {units.timestamp(c['ts'])}, slot {c['slot']}, profile {c['profile'] or '-'}"
        head += f": {c['summary'] or 'no cause recorded'}" + (
            f" ({c['kind']})" if c.get("kind") else ""
        )
        if c.get("exit_code") is not None:
            head += f", exit code {c['exit_code']}"
        out.append(head)
        if c.get("fix"):
            out.append(f"  - fix: {c['fix']}")
        if c.get("lines"):
            out += ["", "  ```"] + [f"  {line}" for line in c["lines"]] + ["  ```", ""]
    return out


def _md_time_in_profile(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    top = max(x["serving_s"] for x in rows) or 1.0
    return _md_table(
        ["profile", "serving", "starting", "other", "share of session", ""],
        (
            [
                x["profile"],
                units.span(x["serving_s"]),
                units.span(x["starting_s"]),
                units.span(x["other_s"]),
                f"{x['share'] * 100:.0f}%" if x["share"] is not None else "-",
                hbar(x["serving_s"], top, 20),
            ]
            for x in rows
        ),
    )


def _md_throughput(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    headers = ["profile", "samples", "gen tok/s mean", "mean while busy", "p50", "max",
               "running reqs mean / max", "KV usage mean", "GPU used max"]  # fmt: skip
    out = _md_table(
        headers,
        (
            [
                x["profile"],
                x["samples"],
                units.sig3(x["gen_tok_s_mean"]),
                units.sig3(x["gen_tok_s_busy_mean"]),
                units.sig3(x["gen_tok_s_p50"]),
                units.sig3(x["gen_tok_s_max"]),
                f"{fmt_num(x['running_reqs_mean'])} / {fmt_num(x['running_reqs_max'], 0)}",
                f"{x['token_usage_mean'] * 100:.0f}%" if x["token_usage_mean"] is not None else "-",
                units.gib(x["gpu_used_bytes_max"] or None),
            ]
            for x in rows
        ),
    )
    hi = max((x["gen_tok_s_max"] or 0.0) for x in rows)
    out += [
        "",
        "```",
        f"gen tok/s while serving (each line spans that profile's samples; scale 0-{hi:,.0f})",
    ]
    for x in rows:
        out.append(
            f"{_short(x['profile'], 20):<20} {sparkline(x['series'], 56, lo=0.0, hi=hi or None)}"
        )
    return [*out, "```"]


def _md_jobs(jobs: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for job in jobs:
        out.append(
            f"### {job['name'] or job['job']} ({job['job']}"
            + (f", {job['target']}" if job.get("target") else "")
            + f"): {job['state'] or 'running'}, "
            f"{job['answered'] if job['answered'] is not None else '?'} of "
            f"{job['total'] if job['total'] is not None else '?'} answered, "
            f"{job['failed'] or 0} failed"
        )
        out.append("")
        if job["segments"]:
            out += _md_table(
                ["profile", "launch", "completions", "failed", "output tokens", "time", "tok/s",
                 "energy", "J/completion", "tok/J"],
                (
                    [x["profile"], x["launch_id"], x["completions"], x["failed"],
                     x["out_tokens"], units.span(x["seconds"]), units.sig3(x["tok_s"]),
                     *_energy_cells(x.get("joules"), x["completions"], x["out_tokens"])]
                    for x in job["segments"]
                ),
            )  # fmt: skip
            out.append("")
        for line in job.get("incidents") or []:
            out.append(f"- {line}")
        if job.get("incidents"):
            out.append("")
        d = job.get("decision")
        if d:
            # the trial's evidence: each candidate measured on the job's own requests
            out += [f"#### Why {d.get('winner') or 'no winner'}", ""]
            out.append(choice.summary({**d, "phase": "decided"}) + ".")
            out.append("")
            out += _md_table(list(choice.HEADER), (list(r) for r in choice.rows(d)))
            out.append("")
    return out[:-1] if out and out[-1] == "" else out  # the section ends with its own blank


def _energy_cells(joules: Any, completions: Any, out_tokens: Any) -> list[str]:
    if not isinstance(joules, (int, float)) or joules <= 0:
        return ["-", "-", "-"]
    return [
        f"{units.sig3(joules / 1000)} kJ",
        units.sig3(joules / completions) if completions else "-",
        units.sig3(out_tokens / joules) if out_tokens else "-",
    ]


def _md_bench(runs: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for run in runs:
        out += [f"### {run['run_id']}", ""]
        if run.get("error"):
            out += [f"Unreadable: {run['error']}", ""]
            continue
        if run.get("spec"):
            out += ["Spec: " + ", ".join(f"{k}={v}" for k, v in run["spec"].items()), ""]
        servers = run.get("servers") or {}
        if servers:
            out += [
                "Servers (see What ran): "
                + ", ".join(
                    f"{n} `{x.get('hash')}` SGLang {x.get('version') or '?'}"
                    for n, x in servers.items()
                ),
                "",
            ]
        out += _md_bench_rows(run["rows"])
        out += _md_estimates(run)
        if run.get("recommendation"):
            out += [f"**Recommendation:** {run['recommendation']}", ""]
        for row in run["rows"]:
            for err in row.get("errors") or []:
                out.append(f"- {row['profile']} c={row['concurrency']}: {err}")
    return out


def _md_bench_rows(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    hi = max((x["output_tok_s"] or 0.0) for x in rows) or 1.0
    headers = ["profile", "concurrency", "runs", "output tok/s", "95% CI", "req/s",
               "TTFT p50 ms", "TPOT p50 ms", "J/compl", "tok/J", "ok / failed", ""]  # fmt: skip
    table = _md_table(
        headers,
        (
            [
                x["profile"],
                x["concurrency"],
                x["repeats"],
                units.sig3(x["output_tok_s"]),
                _ci(x.get("output_tok_s_ci")),
                fmt_num(x["request_s"], 2),
                fmt_num(x["ttft_p50_ms"]),
                fmt_num(x["tpot_p50_ms"], 2),
                units.sig3(x.get("j_per_completion")),
                units.sig3(x.get("tok_per_j")),
                f"{x['completed']} / {x['failed']}",
                hbar(x["output_tok_s"], hi, 16),
            ]
            for x in rows
        ),
    )
    return [*table, ""]


def _md_estimates(run: dict[str, Any]) -> list[str]:
    estimates = run.get("estimates") or []
    if not estimates:
        return []
    job = run.get("job") or {}
    completions = job.get("completions")
    out = [
        f"Job estimate ({completions:,} completions):"
        if isinstance(completions, int)
        else "Job estimate:"
    ]
    longest = max((e["seconds"] for e in estimates if e.get("seconds") is not None), default=0.0)
    out.append("```")
    for e in estimates:
        out.append(
            f"{_short(str(e.get('profile')), 20):<20} c={e.get('concurrency'):<4} "
            f"{hbar(e.get('seconds'), longest, 30):<30} {units.span(e.get('seconds'))}"
        )
    return [*out, "```", ""]


def _ci(ci: list[Any] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "-"
    return f"{units.sig3(ci[0])}-{units.sig3(ci[1])}"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def render_csv(r: dict[str, Any]) -> str:
    """Long format (section, item, field, value): one file holds every section and a spreadsheet
    pivot gives any table back."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "item", "field", "value"])
    for k, v in r["session"].items():
        w.writerow(["session", r["session"]["name"], k, _csv_value(v)])
    for x in r["launches"]:
        for k, v in x.items():
            w.writerow(["launch", x["launch_id"], k, _csv_value(v)])
    for i, x in enumerate(r["swaps"], 1):
        item = f"{i}:{x['from']}->{x['to']}"
        for k, v in x.items():
            if k == "timings_s":
                for p, t in v.items():
                    w.writerow(["swap", item, f"{p}_s", _csv_value(t)])
            else:
                w.writerow(["swap", item, k, _csv_value(v)])
    for i, x in enumerate(r["crashes"], 1):
        for k, v in x.items():
            w.writerow(["crash", f"{i}:{x['launch_id']}", k, _csv_value(v)])
    for x in r["time_in_profile"]:
        for k, v in x.items():
            w.writerow(["time_in_profile", x["profile"], k, _csv_value(v)])
    for x in r["throughput"]:
        for k, v in x.items():
            if k != "series":
                w.writerow(["throughput", x["profile"], k, _csv_value(v)])
    for run in r["bench"]:
        for row in run["rows"]:
            item = f"{run['run_id']}:{row['profile']}:c{row['concurrency']}"
            for k, v in row.items():
                w.writerow(["bench", item, k, _csv_value(v)])
        if run.get("recommendation"):
            w.writerow(["bench", run["run_id"], "recommendation", run["recommendation"]])
    for job in r.get("jobs") or []:
        for k in ("name", "state", "total", "answered", "failed", "joules"):
            w.writerow(["job", job["job"], k, _csv_value(job.get(k))])
        if job.get("decision"):
            w.writerow(["job", job["job"], "winner", _csv_value(job["decision"].get("winner"))])
        for i, x in enumerate(job["segments"], 1):
            for k, v in x.items():
                w.writerow(["job_segment", f"{job['job']}:{i}:{x['profile']}", k, _csv_value(v)])
    for n in r["notes"]:
        w.writerow(["note", "", "", n])
    return buf.getvalue()


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return v
