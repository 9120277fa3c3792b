"""The load generator against a real loopback server process: counts, concurrency, failures."""

from __future__ import annotations

import json

import pytest

from tests.bench.loadgen_proc import run_loadgen
from tests.fixtures.bench import get_json

pytestmark = pytest.mark.slow  # a live load generator against servers: seconds each


@pytest.mark.parametrize("api", ["completions", "chat", "generate"])
def test_token_counts_come_from_server_usage(mock_sse, tmp_path, api):
    # 3 tokens per chunk: counting chunks would give a third of the true count
    url = mock_sse(tokens_per_chunk=3)
    rc, lines = run_loadgen(
        {
            "base_url": url,
            "api": api,
            "concurrency": 4,
            "requests": 24,
            "warmup": 4,
            "input_len": 16,
            "output_len": 30,
        },
        tmp_path / "r.jsonl",
    )
    assert rc == 0, lines
    m = lines[-1]["metrics"]
    assert m["completed"] == 24 and m["failed"] == 0
    assert m["total_output_tokens"] == 24 * 30
    assert m["usage_missing_requests"] == 0
    records = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(records) == 24  # warmup excluded from the records
    assert {r["i"] for r in records} == set(range(4, 28))
    assert all(r["out"] == 30 and r["chunks"] == 10 for r in records)
    # the server emitted warmup + measured tokens; the client saw every one of them
    assert get_json(url + "/mock/stats")["tokens"] == 28 * 30
    # percentiles are ordered and TPOT follows its definition for every request
    assert m["median_ttft_ms"] <= m["p99_ttft_ms"] <= m["mean_e2e_latency_ms"] * 10
    assert any(x["type"] == "progress" for x in lines)


def test_in_flight_equals_concurrency(mock_sse, tmp_path):
    url = mock_sse(tick=0.01)
    rc, lines = run_loadgen(
        {"base_url": url, "concurrency": 32, "requests": 96, "input_len": 8, "output_len": 20},
        tmp_path / "r.jsonl",
    )
    assert rc == 0, lines
    m = lines[-1]["metrics"]
    assert m["max_concurrent_requests"] == 32
    assert get_json(url + "/mock/stats")["peak_in_flight"] == 32
    # Little's law: the server was kept nearly full (drain tail lowers the average a little)
    assert 20 < m["concurrency"] <= 32


def test_failures_are_counted_and_shown(mock_sse, tmp_path):
    url = mock_sse(fail_every=5)
    rc, lines = run_loadgen(
        {
            "base_url": url,
            "concurrency": 1,
            "requests": 20,
            "warmup": 0,
            "input_len": 8,
            "output_len": 5,
            "flush_cache": False,
        },
        tmp_path / "r.jsonl",
    )
    assert rc == 0, lines
    m = lines[-1]["metrics"]
    assert m["failed"] == 4 and m["completed"] == 16
    assert m["total_output_tokens"] == 16 * 5
    ((msg, count),) = m["errors"].items()
    assert count == 4 and msg.startswith("HTTP 400") and "mock failure" in msg


def test_duration_mode_stops_issuing(mock_sse, tmp_path):
    url = mock_sse(tick=0.005)
    rc, lines = run_loadgen(
        {"base_url": url, "concurrency": 4, "duration": 1.0, "input_len": 8, "output_len": 10},
        tmp_path / "r.jsonl",
    )
    assert rc == 0, lines
    m = lines[-1]["metrics"]
    assert m["completed"] > 8
    assert 0.9 < m["duration"] < 2.0


def test_unreachable_server_is_one_line_error(tmp_path, free_port):
    rc, lines = run_loadgen(
        {"base_url": f"http://127.0.0.1:{free_port}", "concurrency": 2, "requests": 4},
        tmp_path / "r.jsonl",
    )
    assert rc == 2
    assert lines[-1]["type"] == "error"
    assert "cannot connect" in lines[-1]["message"] and "\n" not in lines[-1]["message"]


def test_bad_config_is_one_line_error(tmp_path):
    rc, lines = run_loadgen({"base_url": "http://x", "concurrency": 2}, tmp_path / "r.jsonl")
    assert rc == 2 and "requests or duration" in lines[-1]["message"]


def test_rerun_of_a_point_replaces_its_records(mock_sse, tmp_path):
    url = mock_sse()
    cfg = {"base_url": url, "concurrency": 2, "requests": 6, "input_len": 8, "output_len": 5}
    for _ in range(2):
        rc, lines = run_loadgen(cfg, tmp_path / "r.jsonl")
        assert rc == 0 and lines[-1]["metrics"]["completed"] == 6
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 6


def test_baseline_transport_measures_the_same(mock_sse, tmp_path):
    # the bench script's baseline (same loop on bare aiohttp) must agree with the httpx path
    url = mock_sse(tokens_per_chunk=2)
    results = []
    for transport in ("httpx", "aiohttp"):
        rc, lines = run_loadgen(
            {
                "base_url": url,
                "concurrency": 3,
                "requests": 9,
                "input_len": 8,
                "output_len": 10,
                "transport": transport,
            },
            tmp_path / f"{transport}.jsonl",
        )
        assert rc == 0, lines
        results.append(lines[-1]["metrics"])
    for m in results:
        assert (m["completed"], m["total_output_tokens"], m["max_concurrent_requests"]) == (
            9,
            90,
            3,
        )
