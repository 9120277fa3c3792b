"""SimGpuSource over publication files (sgltui/protocol/), written here by hand for real live and
dead processes; the end-to-end check against the real simulator is in test_against_sim.py."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from sgltui.agent.gpu import GpuService
from sgltui.agent.gpu.sim import SimGpuSource
from sgltui.agent.slot.procs import server_tree
from sgltui.agent.telemetry import Telemetry
from sgltui.core.locations import sim_gpu_dir

GB = 1_000_000_000


def publish(pid: int, pids: list[int], gpus: list[dict], pinned: int = 0) -> None:
    d = sim_gpu_dir()
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{pid}.tmp"
    tmp.write_text(
        json.dumps(
            {
                "v": 1,
                "pid": pid,
                "pids": pids,
                "port": 30000,
                "simulated": True,
                "ts": 0.0,
                "gpus": gpus,
                "host_pinned_bytes": pinned,
            }
        )
    )
    tmp.rename(d / f"{pid}.json")


def gpu(index: int, used: int, util: float = 50.0, name: str = "NVIDIA H200 (simulated)") -> dict:
    return {
        "index": index,
        "name": name,
        "preset": "h200-141gb",
        "total_bytes": 141 * GB,
        "used_bytes": used,
        "breakdown_bytes": {
            "weights": used // 2,
            "kv_cache": used // 2,
            "draft": 0,
            "state": 0,
            "cuda_graph": 0,
            "other": 0,
        },
        "utilization_pct": util,
        "power_w": 300.0,
        "temperature_c": 60.0,
        "pcie_rx_bytes_s": 1e6,
        "pcie_tx_bytes_s": 2e6,
    }


@pytest.fixture
def sleeper(spawn):
    def make() -> int:
        return spawn([sys.executable, "-c", "import time; time.sleep(60)"]).pid

    return make


def test_live_publications_are_read_labelled_and_attributed(sleeper):
    a = sleeper()
    publish(a, [a], [gpu(0, 80 * GB), gpu(1, 70 * GB, name="NVIDIA H200")], pinned=30 * GB)
    reading = SimGpuSource().sample({"0": server_tree(a)})
    assert reading.kind == "sim" and "1 running simulator" in reading.message
    g0, g1 = reading.gpus
    assert g0["simulated"] and g1["simulated"]
    assert "simulated" in g1["name"]  # labelled even when the publisher forgot to
    assert g0["used_bytes"] == 80 * GB and g0["free_bytes"] == 61 * GB
    assert g0["server_bytes"] == {"0": 80 * GB} and g1["server_bytes"] == {"0": 70 * GB}
    assert g0["breakdown_bytes"]["weights"] == 40 * GB
    assert reading.host_pinned_bytes == {"0": 30 * GB}


def test_dead_and_garbage_publications_are_ignored(sleeper, spawn):
    dead = spawn([sys.executable, "-c", "pass"])
    dead.wait()
    publish(dead.pid, [dead.pid], [gpu(0, 1)])
    (sim_gpu_dir() / "junk.json").write_text("{not json")
    (sim_gpu_dir() / "777.json").write_text(json.dumps({"pid": "x", "gpus": []}))
    assert SimGpuSource().sample({}).gpus == []
    reading = GpuService("sim").sample({})
    assert reading.kind == "none" and "no simulator is publishing" in reading.message


def test_a_dead_simulators_publication_is_removed(sleeper, spawn):
    """issue 18 #8: a simulator killed with -9 cannot remove its file; the reader does."""
    dead = spawn([sys.executable, "-c", "pass"])
    dead.wait()
    alive = sleeper()
    publish(dead.pid, [dead.pid], [gpu(0, 1)])
    publish(alive, [alive], [gpu(0, 1)])
    assert len(SimGpuSource().sample({}).gpus) == 1
    names = sorted(p.name for p in sim_gpu_dir().iterdir())
    assert names == [f"{alive}.json"]


def test_two_simulators_share_gpu_indices(sleeper):
    a, b = sleeper(), sleeper()
    publish(a, [a], [gpu(0, 30 * GB, util=40.0)])
    publish(b, [b], [gpu(0, 50 * GB, util=70.0)])
    reading = SimGpuSource().sample({"0": server_tree(a), "1": server_tree(b)})
    assert len(reading.gpus) == 1
    g = reading.gpus[0]
    assert g["used_bytes"] == 80 * GB
    assert g["server_bytes"] == {"0": 30 * GB, "1": 50 * GB}
    assert g["utilization_pct"] == 100.0


def test_foreign_simulator_of_another_preset_adds_no_phantom_gpu(sleeper):
    """A simulator of another GPU preset (someone else's, not managed here) is another machine:
    it must not be summed into our GPU 0 (that once showed 232/151 GB), and once a managed server
    runs only its preset is shown. A foreign simulator of the same preset is another process."""
    ours, foreign, same = sleeper(), sleeper(), sleeper()
    rtx = {
        "index": 0,
        "name": "NVIDIA RTX PRO 6000 (simulated)",
        "preset": "rtx-pro-6000-96gb",
        "total_bytes": 96 * GB,
        "used_bytes": 80 * GB,
    }
    publish(ours, [ours], [rtx])
    publish(foreign, [foreign], [gpu(0, 120 * GB)])
    unmanaged = SimGpuSource().sample({})
    assert sorted(g["preset"] for g in unmanaged.gpus) == ["h200-141gb", "rtx-pro-6000-96gb"]
    reading = SimGpuSource().sample({"0": server_tree(ours)})
    assert len(reading.gpus) == 1
    g = reading.gpus[0]
    assert (
        g["preset"] == "rtx-pro-6000-96gb"
        and g["total_bytes"] == 96 * GB
        and g["used_bytes"] == 80 * GB
    )
    publish(same, [same], [dict(rtx, used_bytes=5 * GB)])
    g = SimGpuSource().sample({"0": server_tree(ours)}).gpus[0]
    assert g["used_bytes"] == 85 * GB and g["server_bytes"] == {"0": 80 * GB}


def test_selector_prefers_sim_when_no_driver(sleeper, monkeypatch):
    import pynvml

    monkeypatch.setattr(
        pynvml,
        "nvmlInit",
        lambda: (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)),
    )
    sel = GpuService("auto")
    assert sel.sample({}).kind == "none"
    a = sleeper()
    publish(a, [a], [gpu(0, GB)])
    assert sel.sample({}).kind == "sim"  # appears as soon as a simulator publishes


async def test_telemetry_records_sim_gpu_and_pinned_host_series(sleeper):
    a = sleeper()
    publish(a, [a], [gpu(0, 10 * GB)], pinned=5 * GB)
    samples = []
    t = Telemetry(
        samples.append, gpu_interval=0.05, host_interval=0.05, record_interval=0.1, gpu_source="sim"
    )
    t.attach("0", a, "http://127.0.0.1:9", None)
    await t.start()
    try:
        await asyncio.sleep(0.25)
        publish(a, [a], [gpu(0, 20 * GB)], pinned=5 * GB)
        await asyncio.sleep(0.25)
    finally:
        await t.stop()
    ser = t.series(["gpu.0.used_bytes", "host.server_pinned_bytes.*"])["series"]
    used = [v for _, v in ser["gpu.0.used_bytes"]]
    assert used[0] == 10 * GB and used[-1] == 20 * GB
    assert ser["host.server_pinned_bytes.0"][-1][1] == 5 * GB
    assert samples[-1]["gpus"][0]["simulated"] is True
    assert samples[-1]["host"]["server_pinned_bytes"] == {"0": 5 * GB}
    since = ser["gpu.0.used_bytes"][-2][0]
    assert len(t.series("gpu.0.used_bytes", since=since)["series"]["gpu.0.used_bytes"]) == 1


def test_between_two_simulators_the_pane_keeps_their_gpus_empty_not_no_driver(sleeper, spawn):
    """Issue 37: during a swap no simulator runs for a moment, and the memory pane flashed
    'GPU: no NVIDIA driver found'. The simulator's GPUs stay, with nothing on them."""
    import os

    a = sleeper()
    publish(a, [a], [gpu(0, 80 * GB)])
    service = GpuService(prefer="auto")
    assert service.sample({"0": server_tree(a)}).gpus[0]["used_bytes"] == 80 * GB
    os.kill(a, 9)  # the old server gone, the new one not started yet
    os.waitpid(a, 0)
    between = service.sample({})
    assert between.kind == "sim" and "NVIDIA" not in between.message, between
    (g0,) = between.gpus
    assert g0["used_bytes"] == 0 and g0["free_bytes"] == 141 * GB and g0["server_bytes"] == {}
