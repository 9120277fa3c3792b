"""`sgltui report`: what happened in a session, from its directory alone.

build_report() turns a loaded session (session/reader.py) into one plain dict: launches, swaps
with their time split (drain / stop / memory release / load / ready), crashes and their causes,
time in each profile, throughput per profile from the timeline, bench comparisons and the
recommendation. render() prints that dict as Markdown (with Unicode charts), JSON or CSV, so the
three formats always agree. Everything is redacted before it is returned: log lines copied from
a server's output may carry an API key (SGLang prints it in its server_args line).

Its parts, one job each: report_history.py (who ran what, when), report_sections.py (launches,
swaps, crashes, time and throughput per profile, jobs), report_bench.py (bench runs),
report_markdown.py and report_csv.py (the two text renderings), report_values.py (numbers).
"""

from __future__ import annotations

import json
from typing import Any

from sgltui.core.redact import Redactor
from sgltui.session import report_sections as sections
from sgltui.session.reader import Session
from sgltui.session.report_bench import bench_runs
from sgltui.session.report_csv import render_csv
from sgltui.session.report_history import SlotHistory
from sgltui.session.report_markdown import render_markdown
from sgltui.session.report_values import clean, num

REPORT_VERSION = 1
FORMATS = ("md", "json", "csv")


def build_report(session: Session, redactor: Redactor | None = None) -> dict[str, Any]:
    redactor = redactor or Redactor()
    events = session.events
    for ev in events:  # learn keys from launch commands (already redacted on disk; belt and braces)
        if isinstance(ev.get("command"), list):
            redactor.argv(ev["command"])
    ts_all = [t for t in (num(e.get("ts")) for e in events) if t is not None]
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
    launches = sections.launches(history.state, redactor)
    max_running: dict[str, float] = {}
    throughput = sections.throughput(session, history, max_running)
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
        "what_ran": sections.what_ran(events),
        "swaps": sections.swaps(history.state),
        "crashes": sections.crashes(session, history.state, redactor),
        "time_in_profile": sections.time_in_profiles(history, span),
        "throughput": throughput,
        "bench": bench_runs(session),
        "jobs": sections.jobs(events),
        "endpoint": sections.endpoint(events),
        "disk_errors": disk_errors,
        "notes": list(session.notes),
    }
    cleaned: dict[str, Any] = clean(redactor.obj(report))
    return cleaned


def render(report: dict[str, Any], fmt: str) -> str:
    if fmt == "md":
        return render_markdown(report)
    if fmt == "json":
        return json.dumps(report, indent=2) + "\n"
    if fmt == "csv":
        return render_csv(report)
    raise ValueError(f"unknown report format {fmt!r}; use one of: {', '.join(FORMATS)}")
