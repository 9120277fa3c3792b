"""The simulator's memory saver (sim/memory_saver.py) against real simulator processes: SGLang's
release/resume and pause/continue endpoints, their shapes, the bytes they move and how long that
takes, /health while paused, the scheduler's idle assertion, the bad-draft flag."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tests.sim.helpers import gen_body, post_json, stream_events, stream_in_background

SAVER = ("--enable-memory-saver", "--enable-weights-cpu-backup")
# 8B BF16 (~16 GB) at 1 GB/s, time scale 0.02: ~0.32 s each way, long enough to measure; the
# first release pins its backup at 1 s a GiB (~0.3 s).
SLOW_LINK = ("--sim-pinned-bandwidth-gbs", "1", "--sim-pin-s-per-gib", "1")
GIB = 1 << 30


def gpu_doc(gpu_dir, pid: int) -> dict:
    return json.loads((gpu_dir / f"{pid}.json").read_text())


def weights(doc: dict) -> int:
    return doc["gpus"][0]["breakdown_bytes"]["weights"]


@pytest.fixture
def gpu_env(tmp_path):
    d = tmp_path / "simgpu"
    return d, {"SGLTUI_SIM_GPU_DIR": str(d), "SGLANG_MEMORY_SAVER_CUDA_GRAPH": "1"}


def test_release_and_resume_move_the_weights_at_the_pinned_bandwidth(sim_server, gpu_env):
    gpu_dir, env = gpu_env
    sim = sim_server(*SAVER, *SLOW_LINK, time_scale="0.02", env=env)
    before = gpu_doc(gpu_dir, sim.pid)
    used_before = before["gpus"][0]["used_bytes"]
    assert weights(before) > 10e9
    assert post_json(sim.url + "/pause_generation", {"mode": "retract"}).json() == {
        "message": "Generation paused successfully.",
        "status": "ok",
    }
    t0 = time.monotonic()
    r = post_json(sim.url + "/release_memory_occupation", {"tags": ["kv_cache", "weights"]})
    took = time.monotonic() - t0
    assert (r.status_code, r.json()) == (200, None)
    assert took >= weights(before) / GIB * 0.02 * 0.9  # pinned at 1 s a GiB, scaled
    expected = weights(before) / 1e9 * 0.02  # bytes / (1 GB/s), scaled
    released = gpu_doc(gpu_dir, sim.pid)
    assert weights(released) == 0
    assert released["gpus"][0]["breakdown_bytes"]["kv_cache"] == 0
    assert released["gpus"][0]["breakdown_bytes"]["cuda_graph"] > 0  # its tag was not given
    assert released["gpus"][0]["used_bytes"] < used_before / 4
    assert released["host_pinned_bytes"] >= weights(before)  # the CPU backup, pinned
    # The graphs' region is still mapped: released on its own (all tags again would pause the
    # released regions a second time, which kills a real server: tests/sim/test_saver_strict.py).
    r = post_json(sim.url + "/release_memory_occupation", {"tags": ["cuda_graph"]})
    assert gpu_doc(gpu_dir, sim.pid)["gpus"][0]["breakdown_bytes"]["cuda_graph"] == 0
    t0 = time.monotonic()
    r = post_json(sim.url + "/resume_memory_occupation", {})
    assert (r.status_code, r.json()) == (200, None)
    assert time.monotonic() - t0 >= expected * 0.9
    back = gpu_doc(gpu_dir, sim.pid)
    assert weights(back) == weights(before)
    assert back["host_pinned_bytes"] == 0
    assert post_json(sim.url + "/continue_generation", {}).json() == {
        "message": "Generation continued successfully.",
        "status": "ok",
    }
    out = post_json(sim.url + "/generate", gen_body(4, text="hi")).json()
    assert out["meta_info"]["completion_tokens"] == 4


def test_release_without_the_memory_saver_does_nothing(sim_server, gpu_env):
    gpu_dir, env = gpu_env
    sim = sim_server(*SLOW_LINK, time_scale="0.02", env=env)
    before = gpu_doc(gpu_dir, sim.pid)
    t0 = time.monotonic()
    r = post_json(sim.url + "/release_memory_occupation", {"tags": ["weights"]})
    assert (r.status_code, r.json()) == (200, None)  # SGLang says nothing either
    assert time.monotonic() - t0 < 0.25
    assert weights(gpu_doc(gpu_dir, sim.pid)) == weights(before)


def test_a_paused_server_holds_requests_and_health_hangs_then_recovers(sim_server, gpu_env):
    gpu_dir, env = gpu_env
    sim = sim_server(*SAVER, time_scale="0.02", env={**env, "SGLANG_HEALTH_CHECK_TIMEOUT": "1"})
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    t, events = stream_in_background(sim.url + "/generate", gen_body(5, text="held"))
    t0 = time.monotonic()
    assert httpx.get(sim.url + "/health", timeout=10).status_code == 503
    assert time.monotonic() - t0 >= 1.0  # it waited for a token that never came
    assert httpx.get(sim.url + "/ready", timeout=10).status_code == 503
    assert not events  # the request waits, it is not refused
    post_json(sim.url + "/continue_generation", {})
    t.join(timeout=20)
    assert events[-1] == "[DONE]"
    assert httpx.get(sim.url + "/health", timeout=10).status_code == 200  # Up again


def test_release_with_requests_running_takes_the_server_down(sim_server, gpu_env):
    gpu_dir, env = gpu_env
    sim = sim_server(*SAVER, time_scale="0.05", env=env)

    def cut_stream() -> None:
        try:
            stream_events(sim.url + "/generate", gen_body(30000, text="long"), timeout=60)
        except httpx.HTTPError:
            pass  # cut when the server goes down: what this test causes

    t = threading.Thread(target=cut_stream)
    t.start()
    time.sleep(0.5)
    try:
        httpx.post(sim.url + "/release_memory_occupation", json={"tags": ["weights"]}, timeout=5)
    except httpx.HTTPError:
        pass  # the server died under the request (or it timed out: the release never answers)
    assert sim.wait_exit(timeout=20) != 0
    assert "AssertionError: release_memory_occupation should be called only when no" in sim.text()
    t.join(timeout=10)


def test_bad_resume_draft_flag_drops_the_accept_length(sim_server, gpu_env):
    gpu_dir, env = gpu_env
    sim = sim_server(
        "--model-path",
        "Qwen/Qwen3.6-27B",
        "--speculative-algorithm",
        "NEXTN",
        *SAVER,
        "--sim-bad-resume-draft",
        time_scale="0.01",
        env=env,
        timeout=120,
    )

    def accept_length() -> float:
        out = post_json(sim.url + "/generate", gen_body(64, text="draft check")).json()
        return out["meta_info"]["spec_accept_length"]

    good = accept_length()
    assert good > 1.5
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    post_json(sim.url + "/release_memory_occupation", {})
    post_json(sim.url + "/resume_memory_occupation", {})
    post_json(sim.url + "/continue_generation", {})
    assert accept_length() == pytest.approx(1.0)


def test_bad_tags_and_modes_are_400(sim_server, gpu_env):
    _, env = gpu_env
    sim = sim_server(*SAVER, time_scale="0.02", env=env)
    r = post_json(sim.url + "/release_memory_occupation", {"tags": ["everything"]})
    assert r.status_code == 400 and "unknown memory tag" in r.json()["message"]
    r = post_json(sim.url + "/pause_generation", {"mode": "sideways"})
    assert r.status_code == 400


def test_retained_cpu_backup_makes_the_next_release_copy_without_pinning(sim_server, gpu_env):
    """TMS_RETAIN_CPU_BACKUP=1: the pinned copy stays after a resume (host RAM stays pinned), so
    a second release does not pin again, but it still copies GPU -> host (torch-memory-saver's
    offload always copies), at the link's speed; a resume copies back.

    The second release is held to the resume just before it (a copy the same way, over the
    same HTTP round trip) rather than to a fixed bound: on a loaded machine a round trip alone
    took 0.4 s, past the 0.3 s a fixed bound allowed."""
    gpu_dir, env = gpu_env
    sim = sim_server(
        *SAVER,
        "--sim-pinned-bandwidth-gbs",
        "8",
        "--sim-pin-s-per-gib",
        "4",
        time_scale="0.02",
        env={**env, "TMS_RETAIN_CPU_BACKUP": "1"},
    )
    held = weights(gpu_doc(gpu_dir, sim.pid))
    pin_s, copy_s = held / GIB * 4 * 0.02, held / 8e9 * 0.02  # ~1.2 s and ~0.04 s
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    t0 = time.monotonic()
    post_json(sim.url + "/release_memory_occupation", {})
    assert time.monotonic() - t0 >= pin_s * 0.9  # the first release pins the whole backup
    t0 = time.monotonic()
    post_json(sim.url + "/resume_memory_occupation", {})
    resume_s = time.monotonic() - t0  # a copy and a round trip, no pinning
    assert gpu_doc(gpu_dir, sim.pid)["host_pinned_bytes"] > 10e9  # kept while it serves
    t0 = time.monotonic()
    post_json(sim.url + "/release_memory_occupation", {})
    took = time.monotonic() - t0
    assert copy_s * 0.9 <= took < resume_s + pin_s * 0.5, (took, resume_s, pin_s)
    assert weights(gpu_doc(gpu_dir, sim.pid)) == 0
