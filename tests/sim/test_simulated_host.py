"""A simulated host of N GPUs (sim --simulated-gpus / host.toml's simulated_gpus): each
simulator publishes on the GPUs its slot gives it, and the agent's GPU service shows all N."""

from __future__ import annotations

import time

from sgltui.agent.gpu.sim import SimGpuSource
from sgltui.agent.slot.procs import server_tree
from sgltui.core import placement
from sgltui.sim.gpu_publish import published_indexes


def _sample_until(trees, ok, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        reading = SimGpuSource().sample({k: server_tree(v) for k, v in trees.items()})
        if ok(reading.gpus) or time.monotonic() > deadline:
            return reading.gpus
        time.sleep(0.1)


def test_two_slots_of_a_simulated_host_of_three_each_on_its_own_gpu(sim_server):
    host = placement.layout(3, simulated=True, simulated_gpu="h200-141gb")
    sims = {}
    for name in ("a", "c"):  # slot b's GPU stays idle
        _, env = placement.apply_to({}, {}, host.slot(name))
        sims[name] = sim_server("--model-path", "Qwen/Qwen3-8B", env=env)

    def placed(gpus):
        return len(gpus) == 3 and all(
            (g["server_bytes"].get(s) or 0) > 0 for g, s in ((gpus[0], "a"), (gpus[2], "c"))
        )

    gpus = _sample_until({k: s.pid for k, s in sims.items()}, placed)
    assert placed(gpus), gpus
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert all("H200" in g["name"] and g["simulated"] for g in gpus)
    assert list(gpus[0]["server_bytes"]) == ["a"] and list(gpus[2]["server_bytes"]) == ["c"]
    assert gpus[1]["used_bytes"] == 0 and gpus[1]["processes"] == []
    assert gpus[1]["total_bytes"] == gpus[0]["total_bytes"]


def test_published_indexes():
    assert published_indexes(1, None, "3") == [0]  # no simulated host: as before
    assert published_indexes(2, 4, "2,3") == [2, 3]
    assert published_indexes(1, 2, "5") == [0]  # not on this host: fall back
    assert published_indexes(1, 2, "x") == [0]
