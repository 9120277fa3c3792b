"""One point's report in the layout of SGLang's bench_serving (sglang/bench_serving.py), so users can put
the two side by side: a centred title in 50 '=', 40-character labels, '-' section headers."""

from __future__ import annotations

import math
from typing import Any


def _v(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, (int, str)):
        return str(value)
    return f"{value:.{digits}f}"


def format_point(
    m: dict[str, Any], backend: str = "sgltui", title: str = " Serving Benchmark Result "
) -> str:
    lines = [title.center(50, "=")]

    def row(label: str, value: Any, digits: int = 2) -> None:
        lines.append(f"{label:<40}{_v(value, digits)}")

    def section(name: str) -> None:
        lines.append(name.center(50, "-"))

    row("Backend:", f"{backend} ({m.get('api', '?')})")
    row("Traffic request rate:", "inf")
    row("Max request concurrency:", m.get("max_concurrency"))
    row("Successful requests:", m.get("completed"))
    row("Failed requests:", m.get("failed"))
    row("Benchmark duration (s):", m.get("duration"))
    row("Total input tokens:", m.get("total_input_tokens"))
    row("Total generated tokens:", m.get("total_output_tokens"))
    row("Request throughput (req/s):", m.get("request_throughput"))
    row("Input token throughput (tok/s):", m.get("input_throughput"))
    row("Output token throughput (tok/s):", m.get("output_throughput"))
    row("Peak output token throughput (tok/s):", m.get("max_output_tokens_per_s"))
    row("Peak concurrent requests:", m.get("max_concurrent_requests"))
    row("Total token throughput (tok/s):", m.get("total_throughput"))
    row("Concurrency:", m.get("concurrency"))
    row("Steady-state output throughput (tok/s):", m.get("steady_state_output_throughput"))
    if m.get("accept_length") is not None:
        row("Accept length:", m.get("accept_length"))
    for name, key, extra_max in (
        ("End-to-End Latency", "e2e_latency", False),
        ("Time to First Token", "ttft", False),
        ("Time per Output Token (excl. 1st token)", "tpot", False),
        ("Inter-Token Latency", "itl", True),
    ):
        section(name)
        label = {"e2e_latency": "E2E Latency", "ttft": "TTFT", "tpot": "TPOT", "itl": "ITL"}[key]
        for stat, word in (
            ("mean", "Mean"),
            ("median", "Median"),
            ("p90", "P90"),
            ("p95", "P95"),
            ("p99", "P99"),
        ):
            row(f"{word} {label} (ms):", m.get(f"{stat}_{key}_ms"))
        if extra_max:
            row("Max ITL (ms):", m.get("max_itl_ms"))
    if m.get("errors"):
        section("Errors")
        for msg, count in m["errors"].items():
            lines.append(f"{count:>6}  {msg}")
    lines.append("=" * 50)
    return "\n".join(lines)


def put_back_line(put: dict[str, Any]) -> str:
    """A result's `put_back` in words (bench/runner.py): the sweep swapped the slot away from
    the profile it served and back to it."""
    where = f"slot {put.get('slot')}"
    if put.get("ok") is False:
        return f"{where} NOT put back on {put.get('profile')}: {put.get('error')}"
    verb = "asked back to" if put.get("ok") is None else "put back on"
    return f"{where} {verb} {put.get('profile')} (it served that before the bench)"
