"""The load generator against the real simulator process (zero delay): what the client measured
must equal what the simulator says it emitted, and the in-flight count must equal the concurrency."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.bench.loadgen_proc import run_loadgen


def generated_tokens(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(
        float(m.group(1))
        for m in re.finditer(
            r'^sglang:generation_tokens_total\{[^}]*is_streaming="true"[^}]*\}\s+(\S+)$', text, re.M
        )
    )


@pytest.mark.parametrize("api", ["completions", "generate"])
def test_measured_tokens_match_simulator(sim_server, tmp_path, api):
    sim = sim_server("--enable-metrics", "--max-running-requests", "64", time_scale="0")
    before = generated_tokens(sim.url)
    rc, lines = run_loadgen(
        {
            "base_url": sim.url,
            "api": api,
            "concurrency": 8,
            "requests": 32,
            "input_len": 24,
            "output_len": 40,
        },
        tmp_path / "r.jsonl",
    )
    assert rc == 0, lines
    m = lines[-1]["metrics"]
    assert m["completed"] == 32 and m["failed"] == 0
    assert m["total_output_tokens"] == 32 * 40
    assert (
        m["total_input_tokens"] >= 32 * 24
    )  # the server's count (template/special tokens may add)
    emitted = generated_tokens(sim.url) - before
    assert emitted == m["total_output_tokens"] + m["warmup_output_tokens"]
    assert m["max_concurrent_requests"] == 8
    assert m["median_ttft_ms"] > 0 and m["p99_e2e_latency_ms"] >= m["median_e2e_latency_ms"]
