"""Log lines against SGLang 0.5.23's formats (start-up, batch and access lines)."""

from __future__ import annotations

import re
import time

import httpx

from tests.sim.helpers import post_json, qwen36

TS = r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\] "
F = r"\d+\.\d{2}"
STARTUP = [
    TS + rf"Load weight begin\. avail mem={F} GB$",
    TS + rf"Load weight end\. elapsed={F} s, type=\w+, avail mem={F} GB, mem usage={F} GB\.$",
    TS
    + rf"KV Cache is allocated\. dtype: torch\.bfloat16, #tokens: \d+, K size: {F} GB, V size: {F} GB$",
    TS + rf"Memory pool end\. avail mem={F} GB$",
    TS
    + rf"Capture target decode CUDA graph begin\. backend=full, num_tokens_per_req=1, avail mem={F} GB$",
    TS
    + rf"Capture target decode CUDA graph end\. bs=\[[\d, ]+\], elapsed={F} s, mem usage={F} GB, "
    rf"avail mem={F} GB\.$",
    TS
    + rf"max_total_num_tokens=\d+, chunked_prefill_size=\d+, max_prefill_tokens=\d+, max_running_requests=\d+, "
    rf"context_len=\d+, available_gpu_mem={F} GB$",
    TS
    + rf"Engine startup timings \(s\): load_weight={F}, kv_cache_allocation={F}, scheduler_e2e={F}, "
    rf"cuda_graph=\{{decode={F}\}}, tokenizer_e2e={F}$",
    TS + r"INFO:     Uvicorn running on http://127\.0\.0\.1:\d+ \(Press CTRL\+C to quit\)$",
    TS + r"The server is fired up and ready to roll!$",
]
PREFILL_DENSE = (
    TS
    + r"Prefill batch, #new-seq: \d+, #new-token: \d+, #cached-token: \d+, token usage: \d\.\d{2}, "
    r"#running-req: \d+, #queue-req: \d+, #pending-token: \d+, cuda graph: False, "
    rf"input throughput \(token/s\): {F}$"
)
DECODE_DENSE = (
    TS
    + r"Decode batch, #running-req: (\d+), #token: \d+, token usage: \d\.\d{2}, cuda graph: (True|False), "
    rf"gen throughput \(token/s\): ({F}), #queue-req: \d+$"
)
PREFILL_HYBRID = (
    TS
    + r"Prefill batch, #new-seq: \d+, #new-token: \d+, #cached-token: \d+, full token usage: \d\.\d{2}, "
    r"mamba usage: \d\.\d{2}, #running-req: \d+, #queue-req: \d+, #pending-token: \d+, cuda graph: False, "
    rf"input throughput \(token/s\): {F}$"
)
DECODE_HYBRID_SPEC = (
    TS + r"Decode batch, #running-req: \d+, #full token: \d+, full token usage: \d\.\d{2}, "
    r"mamba num: \d+, mamba usage: \d\.\d{2}, accept len: (\d\.\d{2}), accept rate: (\d\.\d{2}), "
    rf"cuda graph: (True|False), gen throughput \(token/s\): {F}, #queue-req: \d+$"
)
ACCESS = TS + r'INFO:     127\.0\.0\.1:\d+ - "(GET|POST) (\S+) HTTP/1\.1" (\d{3}) ([A-Za-z ]+)$'


def _wait_match(sim, pattern: str, timeout: float = 30.0) -> list[str]:
    """The simulator's lines once one matches `pattern`. A batch line is printed by the
    scheduler process, and reaches the log behind the HTTP reply that a request's last token
    ended (a loaded machine read it after the reply: "no speculative decode line")."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        lines = sim.lines()
        if any(rx.search(ln) for ln in lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def _first_index(lines, pattern):
    rx = re.compile(pattern)
    for i, line in enumerate(lines):
        if rx.search(line):
            return i
    raise AssertionError(f"no line matches {pattern!r}:\n" + "\n".join(lines[-40:]))


def test_dense_startup_and_batch_lines(sim_server):
    sim = sim_server(
        "--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--decode-log-interval", "10"
    )
    post_json(
        sim.url + "/generate",
        {"text": "hello", "sampling_params": {"max_new_tokens": 25, "ignore_eos": True}},
    )
    httpx.get(sim.url + "/health", timeout=30)
    sim.wait_for_line("GET /health", timeout=10)
    lines = sim.lines()
    assert re.search(TS + r"server_args=ServerArgs\(", lines[0])
    order = [_first_index(lines, p) for p in STARTUP]
    assert order == sorted(order), "start-up lines out of order"
    assert _first_index(lines, PREFILL_DENSE) > order[-3]  # the warmup prefill, before ready
    decodes = [re.search(DECODE_DENSE, ln) for ln in lines]
    decodes = [m for m in decodes if m]
    # The step counter is global: warmup (8 tokens = 7 decode steps) + 24 steps -> 31 -> 3 lines.
    assert len(decodes) == 3
    assert all(m.group(1) == "1" and m.group(2) == "True" for m in decodes)
    # Throughput is tokens over time since the last line, so the first interval (spanning the
    # idle gap after warmup) is low; the next ones show the model's speed: ~150 tok/s for an 8B
    # model on an H100 at batch 1 (158 tok/s measured on real SGLang).
    assert 120 < float(decodes[-1].group(3)) < 190
    access = [re.search(ACCESS, ln) for ln in lines]
    seen = {(m.group(1), m.group(2), m.group(3), m.group(4)) for m in access if m}
    assert ("GET", "/model_info", "200", "OK") in seen  # the warmup's own probes
    assert ("POST", "/generate", "200", "OK") in seen
    assert ("GET", "/health", "200", "OK") in seen
    # TP 1: no rank tag anywhere.
    assert not any(" TP0]" in ln for ln in lines)


def test_hybrid_speculative_lines_and_warnings(sim_server):
    sim = sim_server(
        *qwen36("rtx-pro-6000-96gb"),
        "--speculative-algorithm",
        "NEXTN",
        "--decode-log-interval",
        "5",
    )
    sim.wait_for_line("Max running requests is reset to 48 for speculative decoding.")
    mamba = sim.wait_for_line("Mamba Cache is allocated.")
    assert re.search(
        r"max_mamba_cache_size: \d+, conv_state size: \d+\.\d{2}GB, ssm_state size: \d+\.\d{2}GB "
        r"intermediate_ssm_state_cache size: \d+\.\d{2}GB intermediate_conv_window_cache size: "
        r"\d+\.\d{2}GB",
        mamba,
    )
    sim.wait_for_line("Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4")
    sim.wait_for_line("by the mamba state cache")
    post_json(
        sim.url + "/generate",
        {"text": "hi", "sampling_params": {"max_new_tokens": 60, "ignore_eos": True}},
    )
    _wait_match(sim, PREFILL_HYBRID)
    lines = _wait_match(sim, DECODE_HYBRID_SPEC)
    assert _first_index(lines, PREFILL_HYBRID) >= 0
    accepts = [re.search(DECODE_HYBRID_SPEC, ln) for ln in lines]
    accepts = [float(m.group(1)) for m in accepts if m]
    assert accepts, "no speculative decode line"
    assert all(1.0 <= a <= 4.0 for a in accepts)  # 1 bonus + up to 3 drafts
    assert sum(accepts) / len(accepts) > 2.0  # Qwen3.6 MTP: tau ~ 3.4


def test_tp2_lines_carry_rank_tags(sim_server):
    sim = sim_server("--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--tp-size", "2")
    lines = sim.lines()
    assert any(re.search(r"^\[[\d\- :]+ TP0\] Load weight end", ln) for ln in lines)
    assert any(re.search(r"^\[[\d\- :]+ TP1\] Load weight end", ln) for ln in lines)
    ready = [ln for ln in lines if "fired up" in ln][0]
    assert " TP" not in ready.split("]")[0]  # main process: no rank prefix


def test_access_log_exclusion(sim_server):
    sim = sim_server("--uvicorn-access-log-exclude-prefixes", "/health", "/v1/loads")
    httpx.get(sim.url + "/health", timeout=30)
    httpx.get(sim.url + "/v1/loads", timeout=30)
    httpx.get(sim.url + "/v1/models", timeout=30)
    sim.wait_for_line("GET /v1/models")
    assert not any("GET /health" in ln or "GET /v1/loads" in ln for ln in sim.lines())
