"""/metrics parsed with prometheus_client's own parser: SGLang's names, types and labels."""

from __future__ import annotations

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.sim.helpers import gen_body, post_json, qwen36, stream_events

SCHED_LABELS = {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}


def families(url: str) -> dict:
    r = httpx.get(url + "/metrics", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def value(fam, **labels) -> float:
    for s in fam.samples:
        if all(s.labels.get(k) == v for k, v in labels.items()) and s.name == fam.name:
            return s.value
    raise AssertionError(f"no sample {labels} in {fam.name}")


def test_metrics_names_types_labels_and_counts(sim_server):
    sim = sim_server(
        "--enable-metrics", "--decode-log-interval", "5", "--served-model-name", "llama-8b"
    )
    prompts = [[1, 2, 3, 4, 5], [7, 8, 9]]
    for p in prompts:
        post_json(
            sim.url + "/generate",
            {"input_ids": p, "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}},
        )
    stream_events(sim.url + "/generate", gen_body(12, input_ids=[4, 4, 4]))
    fams = families(sim.url)
    for name in (
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:token_usage",
        "sglang:cache_hit_rate",
        "sglang:num_used_tokens",
        "sglang:spec_accept_length",
        "sglang:max_total_num_tokens",
        "sglang:context_len",
        "sglang:weight_memory_usage_gb",
    ):
        assert fams[name].type == "gauge", name
        assert {k for s in fams[name].samples for k in s.labels} == SCHED_LABELS, name
    lab = fams["sglang:num_running_reqs"].samples[0].labels
    assert (
        lab["model_name"] == "llama-8b"
        and lab["engine_type"] == "unified"
        and lab["tp_rank"] == "0"
    )
    assert value(fams["sglang:spec_accept_length"]) == 0.0  # exported as 0 without speculation
    assert value(fams["sglang:gen_throughput"]) > 0
    info = httpx.get(sim.url + "/server_info", timeout=30).json()
    assert value(fams["sglang:max_total_num_tokens"]) == info["max_total_num_tokens"]
    assert value(fams["sglang:context_len"]) == 131072

    ttft = fams["sglang:time_to_first_token_seconds"]
    assert ttft.type == "histogram"
    counts = {s.labels["is_streaming"]: s.value for s in ttft.samples if s.name.endswith("_count")}
    # The start-up warmup request is a real request too: 6 prompt tokens, 8 generated.
    assert counts == {"false": 3.0, "true": 1.0}
    e2e = fams["sglang:e2e_request_latency_seconds"]
    assert sum(s.value for s in e2e.samples if s.name.endswith("_count")) == 4
    prompt = fams["sglang:prompt_tokens"]
    assert prompt.type == "counter"
    assert (
        sum(s.value for s in prompt.samples if s.name == "sglang:prompt_tokens_total")
        == 6 + 5 + 3 + 3
    )
    gen = fams["sglang:generation_tokens"]
    assert sum(s.value for s in gen.samples if s.name == "sglang:generation_tokens_total") == 8 + 36
    assert fams["sglang:inter_token_latency_seconds"].type == "histogram"
    assert "sglang:hicache_host_used_tokens" not in fams  # only with HiCache
    # Prefix-matched mount, as FastAPI's.
    assert httpx.get(sim.url + "/metrics/", timeout=30).status_code == 200


def test_metrics_absent_without_flag(sim_server):
    sim = sim_server()
    assert httpx.get(sim.url + "/metrics", timeout=30).status_code == 404


def test_speculative_and_hicache_gauges(sim_server):
    sim = sim_server(
        *qwen36("h200-141gb"),
        "--enable-metrics",
        "--speculative-algorithm",
        "NEXTN",
        "--max-running-requests",
        "4",
        "--enable-hierarchical-cache",
        "--decode-log-interval",
        "4",
    )
    post_json(
        sim.url + "/generate",
        {"text": "a b c", "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}},
    )
    fams = families(sim.url)
    assert 1.0 < value(fams["sglang:spec_accept_length"]) <= 4.0
    assert value(fams["sglang:spec_num_draft_tokens"]) == 4
    total = value(fams["sglang:hicache_host_total_tokens"])
    assert total == 2 * value(fams["sglang:max_total_num_tokens"])  # default ratio 2.0
    assert "sglang:mamba_usage" in fams
    # Write-through: the finished request's blocks are backed up to the host tier; counters
    # follow the scheduler's load snapshots (a few per second).
    deadline = time.monotonic() + 5
    while True:
        backup = families(sim.url)["sglang:hicache_backup_tokens"]
        total = sum(x.value for x in backup.samples if x.name.endswith("_total"))
        if total > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert backup.type == "counter" and total == 32  # 3 + 40 tokens -> two full 16-token blocks


def test_idle_gauges_fall_to_zero_when_a_load_ends(sim_server):
    """SGLang republishes stale gauges as soon as it idles; the simulator once kept
    num_running_reqs 1 and gen_throughput ~28 for 30 s after the last request."""
    sim = sim_server("--enable-metrics", "--decode-log-interval", "5")
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 80, "ignore_eos": True}}
    with httpx.stream(
        "POST", sim.url + "/generate", timeout=60, json={**body, "stream": True}
    ) as r:
        busy = None
        lines = r.iter_lines()
        for _chunk in lines:
            fams = families(sim.url)
            if value(fams["sglang:num_running_reqs"]) >= 1 and value(fams["sglang:gen_throughput"]):
                busy = fams
                break
        for _chunk in lines:
            pass  # let the request finish
    assert busy is not None, "the gauges never showed the running request"
    deadline = time.monotonic() + 10  # well inside SGLang's 30 s idle window
    while True:
        fams = families(sim.url)
        running = value(fams["sglang:num_running_reqs"])
        throughput = value(fams["sglang:gen_throughput"])
        if running == 0 and throughput == 0:
            break
        assert time.monotonic() < deadline, f"idle server still shows {running=} {throughput=}"
        time.sleep(0.1)
    assert httpx.get(sim.url + "/v1/loads", timeout=10).status_code == 200


def test_0_5_23_cache_metrics_by_source_and_host_mamba_states(sim_server):
    """Names from SGLang 0.5.23's metrics_collector.py: cached_tokens_total{cache_source},
    prefill_effective_tokens_total{mode}, hicache_host_mamba_{used,total}_states."""
    sim = sim_server(
        *qwen36("h200-141gb"),
        "--enable-metrics",
        "--enable-hicache",
        "--decode-log-interval",
        "4",
    )
    prompt = list(range(1, 200))
    for _ in range(2):  # the second request hits the first one's prefix on the device
        post_json(
            sim.url + "/generate",
            {"input_ids": prompt, "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}},
        )
    info = httpx.get(sim.url + "/server_info", timeout=10).json()
    deadline = time.monotonic() + 10
    while True:
        fams = families(sim.url)
        used = fams.get("sglang:hicache_host_mamba_used_states")
        if used is not None and value(used) >= 1:
            break
        assert time.monotonic() < deadline, "host mamba states never reported"
        time.sleep(0.2)
    # Device slots x hicache-ratio 2.0, plus the pool's one padding page.
    assert (
        value(fams["sglang:hicache_host_mamba_total_states"])
        == 2 * info["max_mamba_cache_size"] + 1
    )
    cached = fams["sglang:cached_tokens"]
    assert cached.type == "counter"
    device = [
        x.value
        for x in cached.samples
        if x.name == "sglang:cached_tokens_total" and x.labels["cache_source"] == "device"
    ]
    assert device == [192]  # 12 full 16-token blocks of the prefix
    modes = {s.labels["mode"] for s in fams["sglang:prefill_effective_tokens"].samples}
    assert {"input", "device_hit"} <= modes
