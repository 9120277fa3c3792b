"""The simulator forgives nothing SGLang 0.5.23 and torch-memory-saver 0.0.10 do not (issue 45):
a second release of a region, a resume of a tag never released, a release with hicache copies in
flight or with the weight cache on, all end the server; /flush_cache?timeout= waits for idle inside
the scheduler loop. The scheduler's rules are checked on their own first (fast), then against
real simulator processes where the point is that the process dies."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import httpx
import pytest

from sgltui.sim.memory_saver import (
    IDLE_ASSERTION,
    OffloadTagMissing,
    SchedulerRuntimeError,
    TmsExit,
    scheduler_control,
)
from tests.sim.helpers import gen_body, post_json

SAVER = ("--enable-memory-saver", "--enable-weights-cpu-backup")


class _Cache:
    def __init__(self) -> None:
        self.cleared = 0

    def clear(self) -> None:
        self.cleared += 1


def sched(saver: bool = True, weight_cache_mode: str = "off", ops: int = 0) -> SimpleNamespace:
    """The scheduler attributes scheduler_control reads, paused and idle."""
    return SimpleNamespace(
        args=SimpleNamespace(enable_memory_saver=saver, weight_cache_mode=weight_cache_mode),
        running=[],
        chunked=None,
        waiting=[],
        paused=True,
        offload_tags=set(),
        tms_paused=set(),
        cache=_Cache(),
        bad_draft=False,
        hicache_ops=[0.0] * ops,
        hicache_in_flight=lambda: ops > 0,
    )


def release(s, *tags: str) -> None:
    scheduler_control(s, ("release", list(tags), False))


def resume(s, *tags: str, failing: bool = False) -> None:
    scheduler_control(s, ("resume", list(tags), False, failing))


ALL = ("kv_cache", "weights", "cuda_graph")


def test_a_second_release_of_a_region_is_torch_memory_savers_exit(monkeypatch):
    monkeypatch.delenv("SGLANG_MEMORY_SAVER_CUDA_GRAPH", raising=False)
    s = sched()
    release(s, "weights")
    release(s, "kv_cache")  # another region: fine
    release(s, "cuda_graph")  # no region without SGLANG_MEMORY_SAVER_CUDA_GRAPH: nothing paused
    release(s, "cuda_graph")
    with pytest.raises(TmsExit, match=r"Cannot pause allocation that is not active\. tag=kv_cache"):
        release(s, *ALL)  # kv_cache comes first in SGLang's release
    monkeypatch.setenv("SGLANG_MEMORY_SAVER_CUDA_GRAPH", "1")
    s = sched()
    release(s, "cuda_graph")
    with pytest.raises(TmsExit, match="tag=cuda_graph"):
        release(s, "cuda_graph")


def test_a_resume_of_a_tag_never_released_is_a_keyerror_even_without_the_saver():
    for saver in (True, False):
        s = sched(saver=saver)
        with pytest.raises(OffloadTagMissing):
            resume(s, *ALL)
        s = sched(saver=saver)
        release(s, "weights")
        with pytest.raises(OffloadTagMissing) as got:
            resume(s, "weights", "kv_cache")
        assert got.value.args[0] == "kv_cache"
    s = sched(saver=False)
    release(s, "weights")
    release(s, "weights")  # SGLang's no-op adapter pauses nothing: a repeat is harmless
    resume(s, "weights")


def test_a_paired_cycle_works_and_the_kv_release_flushes_the_radix_cache():
    s = sched()
    for _ in range(3):
        release(s, *ALL)
        assert s.offload_tags == set(ALL) and {"kv_cache", "weights"} <= s.tms_paused
        resume(s, *ALL)
        assert not s.offload_tags and not s.tms_paused
    assert s.cache.cleared == 3


def test_a_failing_resume_dies_in_torch_memory_saver():
    s = sched()
    release(s, *ALL)
    with pytest.raises(TmsExit, match="out of memory"):
        resume(s, *ALL, failing=True)


def test_release_refusals_idle_hicache_and_weight_cache():
    with pytest.raises(AssertionError, match=IDLE_ASSERTION):
        release(sched(ops=1), "kv_cache")
    busy = sched()
    busy.running = [object()]
    with pytest.raises(AssertionError, match=IDLE_ASSERTION):
        release(busy, "weights")
    with pytest.raises(SchedulerRuntimeError, match="--weight-cache-mode client"):
        release(sched(weight_cache_mode="client"), "weights")
    release(sched(weight_cache_mode="client"), "kv_cache")  # the weights only


# ---- against the real simulator -------------------------------------------------------------


def released_then(sim, second: str, body: dict) -> None:
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    assert post_json(sim.url + "/release_memory_occupation", {}).status_code == 200
    try:
        httpx.post(sim.url + second, json=body, timeout=10)
    except httpx.HTTPError:
        pass  # the server went down under the request: what this test causes


def test_a_second_release_ends_the_server_with_torch_memory_savers_line(sim_server):
    sim = sim_server(*SAVER, time_scale="0.01")
    released_then(sim, "/release_memory_occupation", {"tags": ["weights"]})
    assert sim.wait_exit(timeout=20) != 0
    assert "[torch_memory_saver.cpp] Cannot pause allocation that is not active. tag=weights" in (
        sim.text()
    )


def test_a_resume_of_a_server_never_released_ends_it(sim_server):
    sim = sim_server(*SAVER, time_scale="0.01")
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    try:
        httpx.post(sim.url + "/resume_memory_occupation", json={}, timeout=10)
    except httpx.HTTPError:
        pass
    assert sim.wait_exit(timeout=20) != 0
    assert "Scheduler hit an exception" in sim.text() and "KeyError: '" in sim.text()


def test_weight_cache_mode_release_takes_the_server_down(sim_server):
    sim = sim_server(*SAVER, "--weight-cache-mode", "client", time_scale="0.01")
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    try:
        httpx.post(sim.url + "/release_memory_occupation", json={}, timeout=10)
    except httpx.HTTPError:
        pass
    assert sim.wait_exit(timeout=20) != 0
    assert "RuntimeError: [weight_cache] release_memory_occupation of model weights" in sim.text()


def prompt(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


@pytest.mark.slow
def test_hicache_copies_in_flight_flush_waits_and_a_paused_release_dies(sim_server):
    """2000 tokens of an 8B model (~262 MB) written through to host at 10 MB/s, time scale
    0.02: each write-through lasts ~0.5 s, long enough to land a flush or a pause in it."""
    sim = sim_server(
        *SAVER,
        "--enable-hierarchical-cache",
        "--sim-pinned-bandwidth-gbs",
        "0.01",
        time_scale="0.02",
    )
    flush = lambda s: httpx.post(f"{sim.url}/flush_cache?timeout={s}", timeout=30)  # noqa: E731
    post_json(sim.url + "/generate", gen_body(1, text=prompt(2000, "a")))
    assert flush(0.05).status_code == 400  # the write-through is still in flight
    t0 = time.monotonic()
    assert flush(10).status_code == 200  # waited inside the loop until it was done
    assert 0.05 < time.monotonic() - t0 < 5
    post_json(sim.url + "/generate", gen_body(1, text=prompt(2000, "b")))
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    time.sleep(0.8)  # longer than the copy: only the running loop would have retired it
    assert flush(0.2).status_code == 400
    try:
        httpx.post(sim.url + "/release_memory_occupation", json={}, timeout=10)
    except httpx.HTTPError:
        pass
    assert sim.wait_exit(timeout=20) != 0
    assert f"AssertionError: {IDLE_ASSERTION}" in sim.text()


@pytest.mark.slow
def test_fault_flags_count_calls(sim_server, tmp_path):
    """--sim-release-fails 2: the first release frees the weights, the second frees nothing
    (the server is released all the same: its resume works); --sim-resume-fails 2: the second
    resume ends the server."""
    gpu_dir = tmp_path / "simgpu"
    sim = sim_server(
        *SAVER,
        "--sim-release-fails",
        "2",
        "--sim-resume-fails",
        "2",
        time_scale="0.001",
        env={"SGLTUI_SIM_GPU_DIR": str(gpu_dir)},
    )

    def weights() -> int:
        doc = json.loads((gpu_dir / f"{sim.pid}.json").read_text())
        return doc["gpus"][0]["breakdown_bytes"]["weights"]

    loaded = weights()
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    post_json(sim.url + "/release_memory_occupation", {})
    assert weights() == 0
    post_json(sim.url + "/resume_memory_occupation", {})
    assert weights() == loaded
    assert post_json(sim.url + "/release_memory_occupation", {}).json() is None
    assert weights() == loaded  # the second release freed nothing
    try:
        httpx.post(sim.url + "/resume_memory_occupation", json={}, timeout=10)
    except httpx.HTTPError:
        pass
    assert sim.wait_exit(timeout=20) != 0
    assert "[torch_memory_saver.cpp] CUresult error: 2 (out of memory)" in sim.text()


def test_a_released_server_that_runs_a_batch_dies(sim_server):
    """Continue without the resume: the next forward pass reads unmapped memory."""
    sim = sim_server(*SAVER, time_scale="0.01")
    post_json(sim.url + "/pause_generation", {"mode": "retract"})
    post_json(sim.url + "/release_memory_occupation", {"tags": ["weights"]})
    post_json(sim.url + "/continue_generation", {})
    try:
        post_json(sim.url + "/generate", gen_body(4, text="on unmapped weights"))
    except httpx.HTTPError:
        pass
    assert sim.wait_exit(timeout=20) != 0
    assert "CUDA error: an illegal memory access was encountered" in sim.text()


def test_admin_key_paused_ready_and_load_time_server_info(sim_server):
    """With --admin-api-key the four saver routes take only the admin key (the API key is 401);
    a paused server's /ready is 503; /server_info keeps its load-time memory figures through a
    release (SGLang's do: check the GPU, not this)."""
    sim = sim_server(*SAVER, "--api-key", "user", "--admin-api-key", "admin", time_scale="0.01")
    user, admin = {"Authorization": "Bearer user"}, {"Authorization": "Bearer admin"}

    def info() -> dict:
        r = httpx.get(sim.url + "/server_info", headers=user, timeout=10)
        return r.json()["internal_states"][0]["memory_usage"]

    loaded = info()
    for path in ("/pause_generation", "/release_memory_occupation"):
        assert post_json(sim.url + path, {}, headers=user).status_code == 401
        assert post_json(sim.url + path, {}, headers=admin).status_code == 200
    assert httpx.get(sim.url + "/ready", timeout=10).status_code == 503
    assert info() == loaded and loaded["weight"] > 10
    for path in ("/resume_memory_occupation", "/continue_generation"):
        assert post_json(sim.url + path, {}, headers=user).status_code == 401
        assert post_json(sim.url + path, {}, headers=admin).status_code == 200
    assert httpx.get(sim.url + "/ready", timeout=10).status_code == 200


@pytest.mark.slow
def test_pinning_past_the_simulated_hosts_ram_ends_the_server(sim_server, tmp_path):
    """Two 8B servers (~16 GB of weights each) on a simulated host of 25 GB: the first backup
    is pinned, the second does not fit beside it (cudaMallocHost fails: exit 1)."""
    env = {"SGLTUI_SIM_GPU_DIR": str(tmp_path / "simgpu")}
    first, second = (
        sim_server(*SAVER, "--sim-host-memory-gb", "25", time_scale="0.001", env=env)
        for _ in range(2)
    )
    for sim in (first, second):
        post_json(sim.url + "/pause_generation", {"mode": "retract"})
    assert post_json(first.url + "/release_memory_occupation", {}).status_code == 200
    try:
        httpx.post(second.url + "/release_memory_occupation", json={}, timeout=10)
    except httpx.HTTPError:
        pass
    assert second.wait_exit(timeout=20) != 0
    assert "[torch_memory_saver.cpp] CUDA error: out of memory (cudaMallocHost" in second.text()
    assert first.proc.poll() is None
    assert post_json(first.url + "/resume_memory_occupation", {}).status_code == 200
