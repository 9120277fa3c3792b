"""The session report as Markdown, with Unicode charts (core/charts.py): one '## ' section per
part of the report dict that build_report() (session/report.py) returns."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from sgltui.core import choice, units
from sgltui.core.charts import hbar, sparkline, stacked_bar
from sgltui.session.report_sections import SWAP_PHASES

SWAP_PHASE_LABEL = {
    "drain": "drain",
    "stop": "stop",
    "memory_release": "memory release",
    "load": "load",
    "ready": "ready",
}
SWAP_PHASE_CHAR = {"drain": "░", "stop": "▒", "memory_release": "▓", "load": "█", "ready": "▞"}
_OTHER_CHAR = "·"


def fmt_num(v: float | None, digits: int = 1) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:,.{digits}f}"


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
    ep = r.get("endpoint")
    if ep:  # the agent endpoint's request-driven swaps (docs/endpoint.md), when there were some
        counts = ", ".join(f"{n} {k}" for k, n in sorted(ep["counts"].items()))
        lines = [f"{ep['request_driven_swaps']} request-driven swaps ({counts}).", ""]
        lines += [f"- {units.timestamp(x['ts'])} {x['text']}" for x in ep["lines"][-50:]]
        out += _md_section("Endpoint", lines, "")
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
            for paragraph in choice.why_paragraphs(d):  # --choose auto: each proposal's why
                out += [paragraph, ""]
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
        if run.get("cut"):
            out += [f"**{run['cut']}.**", ""]
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
                _ci(x["output_tok_s"], x.get("output_tok_s_ci")),
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


def _ci(mean: Any, ci: list[Any] | None) -> str:
    """As the bench prints it (units.ci_share): '±3.2%'."""
    return (units.ci_share(mean, ci[1]) if ci else None) or "-"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
