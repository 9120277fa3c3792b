"""The load generator against the real simulator process (zero delay): what the client measured
must equal what the simulator says it emitted, and the in-flight count must equal the concurrency."""

from __future__ import annotations

import pytest

from tests.bench.loadgen_proc import run_loadgen
from tests.fixtures.sim import streaming_total

pytestmark = pytest.mark.slow  # the load generator against a simulator: seconds each


@pytest.mark.parametrize("api", ["completions", "generate"])
def test_measured_tokens_match_simulator(sim_server, tmp_path, api):
    sim = sim_server("--enable-metrics", "--max-running-requests", "64", time_scale="0")
    before = streaming_total(sim.url, "sglang:generation_tokens_total")
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
    emitted = streaming_total(sim.url, "sglang:generation_tokens_total") - before
    assert emitted == m["total_output_tokens"] + m["warmup_output_tokens"]
    assert m["max_concurrent_requests"] == 8
    assert m["median_ttft_ms"] > 0 and m["p99_e2e_latency_ms"] >= m["median_e2e_latency_ms"]
