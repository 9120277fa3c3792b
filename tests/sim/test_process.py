"""Processes, signals, fault injection and CLI errors as SGLang 0.5.23 behaves, on real processes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from sgltui.core.locations import sim_gpu_dir
from tests.sim.helpers import gen_body, post_json, qwen36, stream_events, stream_in_background

pytestmark = pytest.mark.slow  # simulator processes and their signals: seconds each

PY = sys.executable


def run_cli(*flags: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PY, "-m", "sgltui.sim", *flags, "--sim-time-scale", "0.01"],
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def tree(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def wait_gone(procs: list[psutil.Process], timeout: float = 10) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return alive


# ---- command line -------------------------------------------------------------------------------
def test_unknown_flag_fails_like_sglang():
    r = run_cli("--model-path", "Qwen/Qwen3-32B", "--enable-mixed-priority-backend")
    assert r.returncode == 2
    assert (
        "sglang serve: error: unrecognized arguments: --enable-mixed-priority-backend" in r.stderr
    )


def test_bad_choice_fails_like_sglang():
    r = run_cli("--model-path", "Qwen/Qwen3-32B", "--sim-gpu", "h900")
    assert r.returncode == 2 and "argument --sim-gpu: invalid choice: 'h900'" in r.stderr


def test_missing_model_path():
    r = run_cli()
    assert r.returncode == 1
    assert (
        r.stderr.strip() == "Error: --model-path is required. Please provide the path to the model."
    )


def test_unknown_model_is_model_not_found():
    r = run_cli("--model-path", "acme/does-not-exist")
    assert r.returncode == 1
    assert (
        "acme/does-not-exist is not a local folder and is not a valid model identifier" in r.stderr
    )


def test_incompatible_flags_fail_after_server_args():
    r = run_cli(
        "--model-path", "Qwen/Qwen3-32B", "--enable-hierarchical-cache", "--disable-radix-cache"
    )
    assert r.returncode == 1
    assert "server_args=ServerArgs(" in r.stdout
    assert "are mutually exclusive and cannot be used at the same time" in r.stderr.splitlines()[-1]


def test_local_model_directory_config(tmp_path, sim_server):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["MistralForCausalLM"],
                "model_type": "mistral",
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "vocab_size": 32768,
                "intermediate_size": 14336,
                "max_position_embeddings": 32768,
            }
        )
    )
    sim = sim_server("--model-path", str(tmp_path))
    info = httpx.get(sim.url + "/model_info", timeout=30).json()
    assert info["architectures"] == ["MistralForCausalLM"]
    assert httpx.get(sim.url + "/server_info", timeout=30).json()["context_length"] == 32768


# ---- fault injection ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cause,needles,code",
    [
        (
            "oom",
            [
                "Capture cuda graph failed: CUDA out of memory",
                "Possible solutions:",
                "Scheduler hit an exception:",
                "Received sigquit from a child process",
            ],
            -signal.SIGKILL,
        ),
        (
            "cuda",
            ["CUDA error: no CUDA-capable device is detected", "Scheduler hit an exception:"],
            -signal.SIGKILL,
        ),
        (
            "port",
            ["[Errno 98] error while attempting to bind on address", "address already in use"],
            1,
        ),
        ("flag", ["mutually exclusive"], 1),
        ("model-not-found", ["is not a local folder and is not a valid model identifier"], 1),
    ],
)
def test_fail_at_start(sim_server, cause, needles, code):
    sim = sim_server("--sim-fail-at-start", cause, wait_ready=False)
    assert sim.wait_exit(timeout=60) == code
    out = sim.text()
    for needle in needles:
        assert needle in out, f"{needle!r} missing:\n{out[-3000:]}"
    assert "fired up and ready" not in out


def test_real_port_conflict_shows_after_model_load(sim_server):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        sim = sim_server("--port", str(port), wait_ready=False)
        assert sim.wait_exit(timeout=60) == 1
    lines = sim.lines()
    err = [
        i
        for i, ln in enumerate(lines)
        if "[Errno 98] error while attempting to bind on address" in ln
    ]
    loaded = [i for i, ln in enumerate(lines) if "Load weight end" in ln]
    assert err and loaded and loaded[0] < err[0]  # the port is checked only after the model loaded


def test_hang_in_graph_capture(sim_server):
    sim = sim_server("--sim-hang-in", "graphs", wait_ready=False)
    sim.wait_for_line("Capture target decode CUDA graph begin")
    time.sleep(1.0)
    assert sim.proc.poll() is None
    assert not any("max_total_num_tokens=" in ln for ln in sim.lines())
    with pytest.raises(httpx.ConnectError):
        httpx.get(sim.url + "/health", timeout=2)


def test_crash_after_takes_the_tree_down(sim_server):
    sim = sim_server("--sim-crash-after", "3", wait_ready=True)
    children = tree(sim.pid)
    assert len(children) >= 2  # scheduler + detokenizer
    assert sim.wait_exit(timeout=30) == -signal.SIGKILL
    text = sim.text()
    assert "Scheduler hit an exception:" in text and "SIGQUIT received. signum=3" in text
    assert wait_gone(children) == []


def test_slow_start_multiplies_phase_durations(sim_server):
    def load_elapsed(sim):
        line = sim.wait_for_line("Load weight end.")
        return float(re.search(r"elapsed=([\d.]+) s", line).group(1))

    base = load_elapsed(sim_server())
    slow = load_elapsed(sim_server("--sim-slow-start", "3"))
    assert slow == pytest.approx(3 * base, rel=0.02)


# ---- signals ---------------------------------------------------------------------------------------
def test_sigterm_drains_in_flight_requests_then_exits_zero(sim_server):
    sim = sim_server(time_scale="0.05")
    children = tree(sim.pid)
    t, events = stream_in_background(sim.url + "/generate", gen_body(4000, text="long answer"))
    time.sleep(0.5)
    sim.signal(signal.SIGTERM)
    sim.wait_for_line("SIGTERM received. signum=15")
    assert httpx.get(sim.url + "/health", timeout=10).status_code == 503  # draining
    t.join(timeout=60)
    assert events[-1] == "[DONE]"
    final = events[-2]
    assert final["meta_info"]["finish_reason"] == {
        "type": "length",
        "length": 4000,
    }  # not cut short
    assert sim.wait_exit(timeout=30) == 0
    assert "Gracefully exiting... Remaining number of requests 1." in sim.text()
    assert wait_gone(children) == []


def test_sigterm_without_traffic_after_skip_warmup_stops_at_once(sim_server):
    sim = sim_server("--skip-server-warmup")
    children = tree(sim.pid)
    sim.signal(signal.SIGTERM)
    assert sim.wait_exit(timeout=30) == 0
    assert "Draining" not in sim.text()
    assert wait_gone(children) == []


def test_sigint_kills_children(sim_server):
    sim = sim_server()
    children = tree(sim.pid)
    sim.signal(signal.SIGINT)
    assert sim.wait_exit(timeout=30) == 0
    assert wait_gone(children) == []


def test_sigkill_of_main_takes_children_along(sim_server):
    sim = sim_server()
    children = tree(sim.pid)
    names = {c.name() for c in children}
    # comm is 15 bytes; multiprocessing's resource tracker is there too, as under real SGLang.
    assert {"sglang::detoken", "sglang::schedul"} <= names
    os.kill(sim.pid, signal.SIGKILL)
    sim.wait_exit(timeout=10)
    assert wait_gone(children) == []  # PR_SET_PDEATHSIG, as SGLang


def test_sigterm_during_load_kills_at_once(sim_server):
    sim = sim_server("--sim-hang-in", "kv", wait_ready=False)
    sim.wait_for_line("Load weight end.")
    children = tree(sim.pid)
    sim.signal(signal.SIGTERM)
    assert sim.wait_exit(timeout=10) == -signal.SIGTERM
    assert wait_gone(children) == []


# ---- auth, streaming mode, GPU file -----------------------------------------------------------------
def test_api_key_enforced_like_sglang(sim_server):
    sim = sim_server("--api-key", "sekret", "--admin-api-key", "admin", "--enable-metrics")
    assert httpx.get(sim.url + "/v1/models", timeout=10).status_code == 401
    assert (
        httpx.get(
            sim.url + "/v1/models", headers={"Authorization": "Bearer wrong"}, timeout=10
        ).status_code
        == 401
    )
    ok = httpx.get(sim.url + "/v1/models", headers={"Authorization": "Bearer sekret"}, timeout=10)
    assert ok.status_code == 200
    for path in ("/health", "/ready", "/metrics"):
        assert httpx.get(sim.url + path, timeout=30).status_code == 200, path
    user = {"Authorization": "Bearer sekret"}
    admin = {"Authorization": "Bearer admin"}
    assert httpx.post(sim.url + "/flush_cache", headers=user, timeout=10).status_code == 401
    assert httpx.post(sim.url + "/flush_cache", headers=admin, timeout=10).status_code == 200
    assert post_json(sim.url + "/generate", {"text": "x"}).status_code == 401
    assert (
        post_json(
            sim.url + "/generate",
            {"text": "x", "sampling_params": {"max_new_tokens": 2}},
            headers=user,
        ).status_code
        == 200
    )


def test_incremental_streaming_output_sends_deltas(sim_server):
    sim = sim_server("--incremental-streaming-output", time_scale="0.1")
    body = {"text": "delta please", "sampling_params": {"max_new_tokens": 30, "ignore_eos": True}}
    whole = post_json(sim.url + "/generate", body).json()
    chunks = stream_events(sim.url + "/generate", body)[:-1]
    assert len(chunks) >= 2
    assert "".join(c["text"] for c in chunks) == whole["text"]
    assert [i for c in chunks for i in c["output_ids"]] == whole["output_ids"]


def test_simulated_gpu_file(sim_server):
    sim = sim_server(
        *qwen36("h200-141gb"),
        "--tp-size",
        "2",
        "--enable-hierarchical-cache",
    )
    path = sim_gpu_dir() / f"{sim.pid}.json"
    deadline = time.monotonic() + 5
    doc = None
    while time.monotonic() < deadline:
        if path.exists():
            doc = json.loads(path.read_text())
            if doc["gpus"][0]["breakdown_bytes"]["cuda_graph"]:
                break
        time.sleep(0.1)
    assert (
        doc is not None and doc["v"] == 1 and doc["simulated"] is True and doc["port"] == sim.port
    )
    sglang_children = {c.pid for c in tree(sim.pid) if c.name().startswith("sglang::")}
    assert doc["pid"] == sim.pid and set(doc["pids"]) == {sim.pid} | sglang_children
    assert len(sglang_children) == 3  # two scheduler ranks and the detokenizer
    assert len(doc["gpus"]) == 2 and doc["gpus"][1]["index"] == 1
    gpu = doc["gpus"][0]
    assert gpu["name"] == "NVIDIA H200 (simulated)" and gpu["preset"] == "h200-141gb"
    assert gpu["total_bytes"] == 143771 * (1 << 20)
    assert gpu["used_bytes"] == sum(gpu["breakdown_bytes"].values()) < gpu["total_bytes"]
    assert gpu["breakdown_bytes"]["weights"] == pytest.approx(55.6e9 / 2, rel=1e-6)
    assert doc["host_pinned_bytes"] > 0
    sim.signal(signal.SIGINT)
    sim.wait_exit(timeout=30)
    assert not path.exists()


def test_hang_in_warmup_ends_in_warmup_error(sim_server):
    sim = sim_server(
        "--sim-hang-in", "warmup", wait_ready=False, env={"SGLANG_WARMUP_TIMEOUT": "50"}
    )
    assert sim.wait_exit(timeout=60) == -signal.SIGKILL  # the server kills its own tree
    assert "Initialization failed. warmup error:" in sim.text()
    assert "fired up" not in sim.text()


def test_health_passes_on_any_output_while_the_batch_is_full(sim_server):
    # The health request itself queues behind the one running request; any output counts.
    sim = sim_server("--max-running-requests", "1", time_scale="0.05")
    done = threading.Event()

    def long_request():
        post_json(
            sim.url + "/generate",
            {"text": "busy", "sampling_params": {"max_new_tokens": 6000, "ignore_eos": True}},
        )
        done.set()

    t = threading.Thread(target=long_request, daemon=True)
    t.start()
    time.sleep(0.3)
    assert httpx.get(sim.url + "/health", timeout=30).status_code == 200
    assert not done.is_set()
    httpx.post(sim.url + "/abort_request", json={"abort_all": True}, timeout=10)
    t.join(timeout=30)


def test_health_is_503_until_warmup_finishes(sim_server):
    sim = sim_server("--sim-hang-in", "warmup", wait_ready=False)
    sim.wait_for_line("Uvicorn running on")
    assert httpx.get(sim.url + "/health", timeout=10).status_code == 503
    assert httpx.get(sim.url + "/ready", timeout=10).status_code == 503
    assert (
        httpx.get(sim.url + "/model_info", timeout=10).status_code == 200
    )  # cheap, available early


def test_memory_failure_is_sglangs_message_after_weights(sim_server):
    sim = sim_server(
        "--model-path", "Qwen/Qwen3-32B", "--mem-fraction-static", "0.7", wait_ready=False
    )
    assert sim.wait_exit(timeout=60) == -signal.SIGKILL
    lines = sim.lines()
    fail = [
        i
        for i, ln in enumerate(lines)
        if "Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.7." in ln
    ]
    weights = [i for i, ln in enumerate(lines) if "Load weight end." in ln]
    assert fail and weights and weights[0] < fail[0]
    assert any("Received sigquit from a child process" in ln for ln in lines)


def test_scheduler_killed_from_outside_is_noticed_by_the_watchdog(sim_server):
    sim = sim_server()
    sched = [c for c in tree(sim.pid) if c.name() == "sglang::schedul"][0]
    sched.kill()  # e.g. the kernel's OOM killer
    assert sim.wait_exit(timeout=30) == -signal.SIGKILL
    text = sim.text()
    assert (
        f"Subprocess scheduler_0 (pid={sched.pid}) crashed with exit code -9. Triggering SIGQUIT for cleanup..."
        in text
    )
    assert "SIGQUIT received. signum=3" in text


def test_client_disconnect_aborts_a_non_streaming_request(sim_server):
    sim = sim_server("--max-running-requests", "1", time_scale="0.05")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            sim.url + "/generate",
            timeout=0.5,
            json={
                "text": "forever",
                "sampling_params": {"max_new_tokens": 100000, "ignore_eos": True},
            },
        )
    # With the only slot freed by the abort, a short request runs instead of queueing for minutes.
    r = post_json(sim.url + "/generate", {"text": "next", "sampling_params": {"max_new_tokens": 4}})
    assert r.status_code == 200 and r.json()["meta_info"]["completion_tokens"] == 4
    assert "Traceback" not in sim.text()


def test_stream_interval_sets_chunk_cadence(sim_server):
    sim = sim_server("--stream-interval", "8", time_scale="0.1")
    chunks = stream_events(sim.url + "/generate", gen_body(50, text="cadence"))[:-1]
    sizes = [len(c["output_ids"]) for c in chunks]
    assert sizes[-1] == 50
    steps = [b - a for a, b in zip([0] + sizes, sizes)]
    assert all(s >= 8 for s in steps[:-1])  # never more often than every 8 tokens
