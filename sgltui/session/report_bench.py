"""The session report's bench runs: each run's comparison rows (or its raw results when the run
stopped before comparing), its spec, estimates, recommendation and the servers it measured."""

from __future__ import annotations

from typing import Any

from sgltui.core import units
from sgltui.core.bench_cut import cut_line
from sgltui.session.reader import Session
from sgltui.session.report_values import num


def bench_runs(session: Session) -> list[dict[str, Any]]:
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
                        "output_tok_s": num(tok.get("mean") if isinstance(tok, dict) else tok),
                        "output_tok_s_ci": [num(tok.get("ci_low")), num(tok.get("ci_high"))]
                        if isinstance(tok, dict)
                        else None,
                        "rank_tok_s": num(rank.get("mean") if isinstance(rank, dict) else rank),
                        "request_s": num(
                            (r.get("request_s") or {}).get("mean")
                            if isinstance(r.get("request_s"), dict)
                            else r.get("request_s")
                        ),
                        "ttft_p50_ms": num(r.get("ttft_p50_ms")),
                        "tpot_p50_ms": num(r.get("tpot_p50_ms")),
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
                        "output_tok_s": num(m.get("output_throughput")),
                        "output_tok_s_ci": None,
                        "rank_tok_s": num(m.get("steady_state_output_throughput"))
                        or num(m.get("output_throughput")),
                        "request_s": num(m.get("request_throughput")),
                        "ttft_p50_ms": num(m.get("median_ttft_ms")),
                        "tpot_p50_ms": num(m.get("median_tpot_ms")),
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
                # a swap the user confirmed stopped the run (agent/children.py)
                "cut": cut_line(data["cut"]) if isinstance(data.get("cut"), dict) else None,
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
        mean = num(tok.get("mean") if isinstance(tok, dict) else tok)
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
