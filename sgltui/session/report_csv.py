"""The session report as CSV, in long format (section, item, field, value)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any


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
