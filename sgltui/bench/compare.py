"""Comparison across profiles: the profiles x concurrency table, each profile's best concurrency,
and the time each profile needs for a job of N completions, with a plain-language
recommendation and its uncertainty. Pure: takes the result entries of a run file.

Ranking uses steady-state output throughput when available (the drain tail
at falling batch size is left out), else output throughput; repeats give a t-based 95% CI and
two profiles whose intervals overlap are called a tie.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

from sgltui.core import stats, units

CLIENT_CPU_SUSPECT = 0.7  # a client above ~70% of a core cannot keep up: results are suspect
RANK_KEYS = ("steady_state_output_throughput", "output_throughput")


def _mean_or_none(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _values(entries: list[dict], key: str) -> list[float]:
    out = []
    for e in entries:
        v = (e.get("metrics") or {}).get(key)
        if isinstance(v, (int, float)) and math.isfinite(v):
            out.append(float(v))
    return out


def _rank_key(entries: list[dict]) -> str:
    for key in RANK_KEYS:
        if len(_values(entries, key)) == len([e for e in entries if e.get("metrics")]):
            return key
    return "output_throughput"


def build(
    results: list[dict],
    job_completions: int | None = None,
    job_output_len: int | None = None,
    bench_output_len: int | None = None,
) -> dict[str, Any]:
    """Comparison dict (stored under "comparison" in the run file)."""
    groups: OrderedDict[tuple[str, int], list[dict]] = OrderedDict()
    for r in results:
        groups.setdefault((r.get("profile") or "server", int(r["concurrency"])), []).append(r)
    # One ranking metric for the whole comparison: steady-state only where every point has one,
    # so that no profile is ranked on a different yardstick than another.
    rank = _rank_key([e for e in results if e.get("metrics")])
    rows: list[dict[str, Any]] = []
    for (profile, conc), entries in groups.items():
        ok = [e for e in entries if e.get("metrics")]
        row = {
            "profile": profile,
            "command_hash": entries[0].get("command_hash"),
            "server_version": entries[0].get("server_version"),
            "concurrency": conc,
            "repeats": len(ok),
            "errors": list(dict.fromkeys(e["error"] for e in entries if e.get("error"))),
            "output_tok_s": stats.mean_ci(_values(ok, "output_throughput")),
            "rank_tok_s": stats.mean_ci(_values(ok, rank)),
            "rank_metric": rank,
            # shown per row even when the ranking fell back to output tok/s
            "steady_tok_s": stats.mean_ci(_values(ok, "steady_state_output_throughput")),
            "request_s": stats.mean_ci(_values(ok, "request_throughput")),
            "ttft_p50_ms": stats.mean_ci(_values(ok, "median_ttft_ms"))["mean"],
            "ttft_p99_ms": stats.mean_ci(_values(ok, "p99_ttft_ms"))["mean"],
            "tpot_p50_ms": stats.mean_ci(_values(ok, "median_tpot_ms"))["mean"],
            "completed": int(sum(_values(ok, "completed"))),
            "failed": int(sum(_values(ok, "failed"))),
            "peak_in_flight": max(_values(ok, "max_concurrent_requests"), default=math.nan),
            "client_cpu_share": max(_values(ok, "client_cpu_share"), default=math.nan),
            # GPU energy (the agent's power samples over each point): None without readings
            "j_per_completion": _mean_or_none(_values(ok, "j_per_completion")),
            "tok_per_j": _mean_or_none(_values(ok, "tok_per_j")),
        }
        rows.append(row)
    best: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["repeats"] == 0 or math.isnan(row["rank_tok_s"]["mean"]):
            continue
        cur = best.get(row["profile"])
        if cur is None or row["rank_tok_s"]["mean"] > cur["rank_tok_s"]["mean"]:
            best[row["profile"]] = row
    comparison: dict[str, Any] = {
        "rows": rows,
        "best": {
            p: {
                "concurrency": r["concurrency"],
                "tok_s": r["rank_tok_s"],
                "metric": r["rank_metric"],
            }
            for p, r in best.items()
        },
        "job": None,
    }
    if job_completions:
        comparison["job"] = job_estimate(
            best, job_completions, job_output_len or bench_output_len or 0, bench_output_len
        )
    return comparison


def job_estimate(
    best: dict[str, dict], n: int, out_len: int, bench_output_len: int | None
) -> dict[str, Any]:
    """Time to finish n completions of out_len tokens at each profile's best concurrency."""
    tokens = n * out_len
    per_profile = []
    for profile, row in best.items():
        ci = row["rank_tok_s"]
        mean = ci["mean"]
        est = {
            "profile": profile,
            "concurrency": row["concurrency"],
            "tok_s": mean,
            "seconds": tokens / mean if mean > 0 else math.inf,
            # a higher throughput bound gives the lower time bound
            "seconds_low": tokens / ci["ci_high"]
            if ci["ci_high"] and ci["ci_high"] > 0
            else math.nan,
            "seconds_high": tokens / ci["ci_low"]
            if ci["ci_low"] and ci["ci_low"] > 0
            else math.nan,
            "repeats": ci["n"],
            "ci": ci,
        }
        if not math.isnan(ci["ci_low"]) and ci["ci_low"] <= 0:
            est["seconds_high"] = math.inf
        per_profile.append(est)
    per_profile.sort(key=lambda e: e["seconds"])
    return {
        "completions": n,
        "output_len": out_len,
        "bench_output_len": bench_output_len,
        "estimates": per_profile,
        "recommendation": recommend(per_profile, n, out_len, bench_output_len),
    }


def _range(e: dict) -> str:
    """The job time's uncertainty, in the table's words: the 95% CI of the throughput it comes
    from, as a share (a time is the work over that throughput: the same share, to first order)."""
    pct = ci_pct(e["ci"])
    return f"95% CI {pct}" if pct else "no CI: one run"


def recommend(estimates: list[dict], n: int, out_len: int, bench_output_len: int | None) -> str:
    """One or two plain sentences: which profile to use for the job, and how sure that is."""
    if not estimates:
        return "No successful measurement: nothing to recommend; check the errors above."
    job = f"{n:,} completions of ~{out_len:,} output tokens"
    first = estimates[0]
    text = (
        f"Use {first['profile']} at concurrency {first['concurrency']}: {job} take about "
        f"{units.estimate(first['seconds'])} ({_range(first)})."
    )
    if len(estimates) > 1:
        second = estimates[1]
        ratio = second["seconds"] / first["seconds"] if first["seconds"] > 0 else math.nan
        tie = stats.intervals_overlap(first["ci"], second["ci"])
        if tie:
            text += (
                f" {second['profile']} ({units.estimate(second['seconds'])}) is a tie within the 95% CIs: "
                f"add repeats or longer runs to separate them."
            )
        else:
            text += f" That is {ratio:.2f}x faster than {second['profile']} ({units.estimate(second['seconds'])})."
    if any(e["repeats"] < 2 for e in estimates):
        text += " Uncertainty unknown for single runs: use --repeat 3 or more for a confidence interval."
    if bench_output_len and out_len and abs(out_len - bench_output_len) > 0.25 * bench_output_len:
        text += (
            f" Measured with {bench_output_len}-token outputs; rerun with --output-len {out_len} "
            f"for a closer estimate."
        )
    return text


# ---- rendering -------------------------------------------------------------------------------

HEADERS = (
    "profile",
    "conc",
    "output tok/s",
    "steady tok/s",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TPOT p50 ms",
    "req/s",
    "failed",
    "runs",
)


def _num(v: float, digits: int = 1) -> str:
    return (
        "n/a"
        if v is None or (isinstance(v, float) and not math.isfinite(v))
        else f"{v:,.{digits}f}"
    )


def ci_pct(ci: dict) -> str | None:
    """A mean_ci's 95% CI as units.ci_share says it ('±3.2%'), in the table and in the job's
    time alike (None: one run, no CI)."""
    return units.ci_share(ci.get("mean"), ci.get("ci_high"))


def _tok(ci: dict) -> str:
    """A throughput and its 95% CI ('1.23k ±1.5%'), the mean to three significant digits."""
    if ci["n"] == 0:
        return "n/a"
    pct = ci_pct(ci)
    mean = units.sig3(ci["mean"], missing="n/a")
    return f"{mean} {pct}" if pct else mean


def table_rows(comparison: dict) -> list[list[str]]:
    out = []
    for r in comparison["rows"]:
        best = comparison["best"].get(r["profile"], {}).get("concurrency") == r["concurrency"]
        if "steady_tok_s" in r:
            steady = _tok(r["steady_tok_s"])
        else:  # a comparison stored before rows carried their own steady figure
            steady = _tok(r["rank_tok_s"]) if r["rank_metric"].startswith("steady") else "n/a"
        out.append(
            [
                r["profile"],
                f"{r['concurrency']}{' *' if best else ''}",
                _tok(r["output_tok_s"]),
                steady,
                _num(r["ttft_p50_ms"]),
                _num(r["ttft_p99_ms"]),
                _num(r["tpot_p50_ms"], 2),
                _num(r["request_s"]["mean"], 2),
                str(r["failed"]),
                str(r["repeats"]),
            ]
        )
    return out


def render_text(comparison: dict) -> str:
    rows = table_rows(comparison)
    widths = [
        max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
        for i, h in enumerate(HEADERS)
    ]
    lines = [
        "  ".join(
            h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(HEADERS, widths))
        )
    ]
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
            )
        )
    steady = any(r["rank_metric"].startswith("steady") for r in comparison["rows"])
    lines.append(
        f"* best concurrency per profile (by {'steady-state ' if steady else ''}output tok/s); "
        "±% is the 95% CI over repeats, as a share of the mean"
    )
    for r in comparison["rows"]:
        for err in r["errors"]:
            lines.append(f"! {r['profile']} c={r['concurrency']}: {err}")
        if r.get("client_cpu_share", 0) > CLIENT_CPU_SUSPECT:
            lines.append(
                f"! {r['profile']} c={r['concurrency']}: the load generator used "
                f"{r['client_cpu_share']:.0%} of a core; the client may have set the pace "
                "(use --stream-interval on the server or fewer, longer requests)"
            )
    job = comparison.get("job")
    if job:
        lines.append("")
        lines.append(
            f"Time to finish {job['completions']:,} completions of ~{job['output_len']:,} output tokens:"
        )
        for e in job["estimates"]:
            lines.append(
                f"  {e['profile']:<24} {units.estimate(e['seconds']):>10}  at c={e['concurrency']}  ({_range(e)})"
            )
        lines.append(job["recommendation"])
    return "\n".join(lines)


def render_markdown(comparison: dict, title: str = "Benchmark comparison") -> str:
    lines = [
        f"## {title}",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---" if i < 2 else "---:" for i in range(len(HEADERS))) + "|",
    ]
    for row in table_rows(comparison):
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "`*` best concurrency per profile; ±% is the 95% CI over repeats, as a share of the mean.",
        "",
    ]
    if comparison["best"]:
        lines.append("**Best concurrency per profile**")
        lines.append("")
        for p, b in comparison["best"].items():
            lines.append(f"- {p}: concurrency {b['concurrency']} ({_tok(b['tok_s'])} tok/s)")
        lines.append("")
    job = comparison.get("job")
    if job:
        lines.append(
            f"**Time to finish {job['completions']:,} completions of ~{job['output_len']:,} output tokens**"
        )
        lines.append("")
        lines.append("| profile | concurrency | time | uncertainty |")
        lines.append("|---|---:|---:|---|")
        for e in job["estimates"]:
            lines.append(
                f"| {e['profile']} | {e['concurrency']} | {units.estimate(e['seconds'])} | {_range(e)} |"
            )
        lines += ["", job["recommendation"], ""]
    return "\n".join(lines)


CSV_COLUMNS = (
    "profile",
    "command_hash",
    "server_version",
    "concurrency",
    "repeats",
    "output_tok_s",
    "output_tok_s_ci_low",
    "output_tok_s_ci_high",
    "rank_metric",
    "rank_tok_s",
    "request_s",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "completed",
    "failed",
    "best",
)


def csv_rows(comparison: dict) -> list[dict[str, Any]]:
    out = []
    for r in comparison["rows"]:
        out.append(
            {
                "profile": r["profile"],
                "command_hash": r["command_hash"] or "",
                "server_version": r["server_version"] or "",
                "concurrency": r["concurrency"],
                "repeats": r["repeats"],
                "output_tok_s": r["output_tok_s"]["mean"],
                "output_tok_s_ci_low": r["output_tok_s"]["ci_low"],
                "output_tok_s_ci_high": r["output_tok_s"]["ci_high"],
                "rank_metric": r["rank_metric"],
                "rank_tok_s": r["rank_tok_s"]["mean"],
                "request_s": r["request_s"]["mean"],
                "ttft_p50_ms": r["ttft_p50_ms"],
                "ttft_p99_ms": r["ttft_p99_ms"],
                "tpot_p50_ms": r["tpot_p50_ms"],
                "completed": r["completed"],
                "failed": r["failed"],
                "best": comparison["best"].get(r["profile"], {}).get("concurrency")
                == r["concurrency"],
            }
        )
    for row in out:
        for k, v in row.items():
            if isinstance(v, float) and not math.isfinite(v):
                row[k] = ""
    return out
