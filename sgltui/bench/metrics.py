"""One measured run's metrics from its per-request records and streaming aggregates.

Names follow SGLang's bench_serving JSON keys where one exists (sglang/bench_serving.py)
so users can compare numbers side by side; latencies are reported in ms like bench_serving.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from sgltui.core import stats

# Shorter steady windows are dominated by bucket edges (0.1 s buckets) and say nothing.
MIN_STEADY_WINDOW_S = 1.0


def compute_metrics(
    records: Iterable[dict[str, Any]],
    itl: stats.LogHistogram,
    buckets: stats.TokenBuckets,
    ratio: float = 0.8,
) -> dict[str, Any]:
    ttfts: list[float] = []
    e2es: list[float] = []
    tpots: list[float] = []
    intervals: list[tuple[float, float]] = []
    errors: Counter[str] = Counter()
    completed = failed = 0
    total_in = total_out = total_cached = 0
    chunk_counted = 0
    first_send = math.inf
    last_end = -math.inf
    for r in records:
        first_send = min(first_send, r["t_send"])
        if not r["ok"]:
            failed += 1
            errors[r.get("error") or "unknown error"] += 1
            if r.get("e2e") is not None:
                intervals.append((r["t_send"], r["t_send"] + r["e2e"]))
            continue
        completed += 1
        ttft, e2e, out = r["ttft"], r["e2e"], r["out"]
        end = r["t_send"] + e2e
        last_end = max(last_end, end)
        intervals.append((r["t_send"], end))
        ttfts.append(ttft)
        e2es.append(e2e)
        if out > 1:
            tpots.append((e2e - ttft) / (out - 1))
        total_in += max(r["in"], 0)
        total_out += out
        total_cached += r.get("cached") or 0
        if r.get("usage") != "server":
            chunk_counted += 1
    duration = last_end - first_send if completed else 0.0

    def rate(x: float) -> float:
        return x / duration if duration > 0 else math.nan

    m: dict[str, Any] = {
        "completed": completed,
        "failed": failed,
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "total_cached_tokens": total_cached,
        "request_throughput": rate(completed),
        "input_throughput": rate(total_in),
        "output_throughput": rate(total_out),
        "total_throughput": rate(total_in + total_out),
        "max_output_tokens_per_s": buckets.peak_rate(1.0),
        "max_concurrent_requests": stats.peak_concurrency(intervals),
        "concurrency": stats.avg_concurrency(e2es, duration),
        # Requests whose usage was missing were counted by chunks: flagged, never silent.
        "usage_missing_requests": chunk_counted,
        "errors": dict(errors.most_common(10)),
    }
    ss, window = stats.steady_state_throughput(intervals, buckets, ratio)
    if window is None or window[1] - window[0] < MIN_STEADY_WINDOW_S:
        ss = math.nan  # too short to tell a steady state from the ramp; ranking falls back
    m["steady_state_output_throughput"] = ss
    m["steady_state_window_s"] = (window[1] - window[0]) if window else 0.0
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("e2e_latency", e2es)):
        s = stats.summarize(values)
        for key in ("mean", "median", "std", "p90", "p95", "p99"):
            m[f"{key}_{name}_ms"] = s[key] * 1000.0
    h = itl.summary()
    for key in ("mean", "median", "p90", "p95", "p99"):
        m[f"{key}_itl_ms"] = h[key] * 1000.0
    m["max_itl_ms"] = h["max"] * 1000.0
    median_tpot = m["median_tpot_ms"]
    m["per_user_tok_s"] = (
        1000.0 / median_tpot if median_tpot and not math.isnan(median_tpot) else math.nan
    )
    return m


def clean_json(value: Any) -> Any:
    """NaN/inf -> None recursively, so result files are strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    return value
