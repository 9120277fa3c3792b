"""NvmlSource against a fake at the pynvml function boundary, with real process trees."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import psutil
import pynvml
import pytest

from sgltui.agent.gpu import GpuService
from sgltui.agent.gpu.nvml import open_nvml
from sgltui.agent.slot.procs import server_tree
from sgltui.agent.telemetry import Telemetry
from tests.telemetry.fake_nvml import FakeGpu, FakeNvml

# A "server": a main process with one child per TP rank, each retitled like SGLang's schedulers.
SERVER = r"""
import subprocess, sys, time
kids = [subprocess.Popen([f"sglang::scheduler_TP{r}", "-c", "import time; time.sleep(60)"], executable=sys.executable)
        for r in range(2)]
print(" ".join(str(k.pid) for k in kids), flush=True)
time.sleep(60)
"""


@pytest.fixture
def fake_server(spawn):
    """(main pid, [rank pids]) of a real process tree in its own session."""
    import subprocess

    proc = spawn([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    ranks = [int(x) for x in proc.stdout.readline().split()]
    assert len(ranks) == 2
    # The parent's Popen returns once the exec began, which can be before the kernel has set up
    # the new argv: /proc/<pid>/cmdline is empty for that moment (CI saw the name test miss it).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(_titled(r) for r in ranks):
        time.sleep(0.01)
    assert all(_titled(r) for r in ranks), [psutil.Process(r).cmdline() for r in ranks]
    return proc.pid, ranks


def _titled(pid: int) -> bool:
    try:
        argv = psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
    return bool(argv) and argv[0].startswith("sglang::scheduler_TP")


def test_readings_and_attribution_to_every_tp_rank(monkeypatch, fake_server):
    main, ranks = fake_server
    other = os.getpid()  # a process on the GPU that is not the server's
    FakeNvml(
        monkeypatch,
        [
            FakeGpu(
                used=70_000_000_000,
                util=87,
                power_mw=312_500,
                temp=54,
                rx_kbs=2048,
                tx_kbs=1024,
                procs=[(ranks[0], 60_000_000_000), (other, 1_000_000_000)],
            ),
            FakeGpu(
                uuid="GPU-1111",
                used=61_000_000_000,
                power_mw=None,
                rx_kbs=None,
                procs=[(ranks[1], 60_500_000_000)],
            ),
        ],
    )
    src, msg = open_nvml()
    assert src is not None and msg == ""
    reading = src.sample({"0": server_tree(main)})
    assert reading.kind == "nvml"
    g0, g1 = reading.gpus
    assert g0["name"] == "NVIDIA H200" and g0["uuid"] == "GPU-0000" and g0["simulated"] is False
    assert g0["total_bytes"] == 150_000_000_000 and g0["used_bytes"] == 70_000_000_000
    assert g0["free_bytes"] == 80_000_000_000
    assert g0["utilization_pct"] == 87.0 and g0["power_w"] == 312.5 and g0["temperature_c"] == 54.0
    assert g0["pcie_rx_bytes_s"] == 2048 * 1024 and g0["pcie_tx_bytes_s"] == 1024 * 1024
    assert g0["server_bytes"] == {"0": 60_000_000_000}
    assert {p["pid"]: p["slot"] for p in g0["processes"]} == {ranks[0]: "0", other: None}
    # Rank 1 lives on GPU 1; unsupported readings are None, not errors.
    assert g1["server_bytes"] == {"0": 60_500_000_000}
    assert (
        g1["power_w"] is None
        and g1["pcie_rx_bytes_s"] is None
        and g1["pcie_tx_bytes_s"] == 500 * 1024
    )


def test_orphaned_rank_still_counts_through_the_session(monkeypatch, fake_server):
    main, ranks = fake_server
    FakeNvml(monkeypatch, [FakeGpu(used=10, procs=[(ranks[1], 10)])])
    psutil.Process(main).kill()  # the rank is reparented to init but keeps the server's session
    deadline = time.time() + 5
    while time.time() < deadline and psutil.Process(ranks[1]).ppid() == main:
        time.sleep(0.05)
    assert (
        psutil.Process(ranks[1]).ppid() != main
    )  # really an orphan now: not a descendant any more
    src, _ = open_nvml()
    reading = src.sample({"0": server_tree(main)})
    assert reading.gpus[0]["server_bytes"] == {"0": 10}


def test_container_pid_namespace_falls_back_to_process_names(monkeypatch, fake_server):
    main, ranks = fake_server
    host_pid = 4_000_000  # beyond pid_max: a PID of another namespace
    assert not psutil.pid_exists(host_pid)
    FakeNvml(
        monkeypatch,
        [FakeGpu(used=5_000, procs=[(host_pid, 4_000), (host_pid + 1, 1_000)])],
        process_names={host_pid: "sglang::scheduler_TP1", host_pid + 1: "some-other-job"},
    )
    src, _ = open_nvml()
    tree = server_tree(main)
    reading = src.sample({"0": tree})
    g = reading.gpus[0]
    assert g["server_bytes"] == {"0": 4_000}, (tree.labels, g["processes"], reading.message)
    matched = {p["pid"]: (p["slot"], p["match"]) for p in g["processes"]}
    assert matched == {host_pid: ("0", "name"), host_pid + 1: (None, None)}
    assert "PID namespace" in reading.message


@pytest.mark.parametrize(
    "code, words",
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver found: GPU pane disabled"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML error"),
    ],
)
def test_init_failures_are_plain_one_line_states(monkeypatch, code, words):
    FakeNvml(monkeypatch, [], init_error=code)
    reading = GpuService("auto").sample({})
    assert reading.kind == "none" and reading.gpus == []
    assert words in reading.message and "\n" not in reading.message


def test_zero_gpus_is_a_state(monkeypatch):
    fake = FakeNvml(monkeypatch, [])
    reading = GpuService("nvml").sample({})
    assert reading.kind == "none" and "no NVIDIA GPU found" in reading.message
    assert fake.shutdowns == 1


def test_gpu_lost_mid_run_pauses_and_retries(monkeypatch):
    fake = FakeNvml(monkeypatch, [FakeGpu(used=1)])
    sel = GpuService("nvml")
    sel.NVML_RETRY_S = 0.0
    assert sel.sample({}).kind == "nvml"
    fake.lost = True
    reading = sel.sample({})
    assert reading.kind == "none" and "GPU is lost" in reading.message
    fake.lost = False
    assert sel.sample({}).kind == "nvml"  # re-initialised after the retry delay
    assert fake.inits == 2


async def test_telemetry_with_no_driver_shows_state_and_keeps_sampling_host(monkeypatch):
    FakeNvml(monkeypatch, [], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    samples = []
    t = Telemetry(samples.append, gpu_interval=0.05, host_interval=0.05, record_interval=0.1)
    await t.start()
    try:
        await asyncio.sleep(0.4)
    finally:
        await t.stop()
    snap = t.snapshot()
    assert snap["gpu_source"] == {
        "kind": "none",
        "message": "no NVIDIA driver found: GPU pane disabled",
    }
    assert snap["gpus"] == []
    assert snap["host"]["ram_total_bytes"] > 0
    assert samples and samples[-1]["v"] == 1 and samples[-1]["gpu_source"]["kind"] == "none"


async def test_telemetry_nvml_series_and_snapshot(monkeypatch, fake_server):
    main, ranks = fake_server
    gpu = FakeGpu(used=1_000, util=10, procs=[(ranks[0], 700)])
    FakeNvml(monkeypatch, [gpu])
    t = Telemetry(lambda s: None, gpu_interval=0.05, host_interval=0.05, record_interval=0.1)
    t.attach("0", main, "http://127.0.0.1:9", None, tp_size=1)
    await t.start()
    try:
        await asyncio.sleep(0.3)
        gpu.used, gpu.util = 2_000, 90
        await asyncio.sleep(0.3)
    finally:
        await t.stop()
    ser = t.series(["gpu.0.*"])["series"]
    used = [v for _, v in ser["gpu.0.used_bytes"]]
    assert used[0] == 1_000 and used[-1] == 2_000
    assert ser["gpu.0.server_bytes.0"][-1][1] == 700
    assert [v for _, v in ser["gpu.0.utilization_pct"]][-1] == 90
    snap = t.snapshot()
    assert snap["gpu_source"]["kind"] == "nvml" and snap["gpus"][0]["server_bytes"] == {"0": 700}
    assert snap["host"]["server_rss_bytes"]["0"] > 0  # the server's tree, host side


def test_container_match_by_executable_path_as_nvml_reports_it(monkeypatch, fake_server):
    main, ranks = fake_server
    host_pid = 4_000_002
    FakeNvml(
        monkeypatch,
        [FakeGpu(used=9, procs=[(host_pid, 9)])],
        process_names={host_pid: psutil.Process(ranks[0]).exe()},
    )
    src, _ = open_nvml()
    assert src.sample({"0": server_tree(main)}).gpus[0]["server_bytes"] == {"0": 9}
    # The same executable in two servers' trees says nothing about which one holds the memory.
    assert (
        src.sample({"0": server_tree(main), "1": server_tree(os.getpid())}).gpus[0]["server_bytes"]
        == {}
    )


async def test_a_stuck_driver_blocks_neither_the_event_loop_nor_host_sampling(monkeypatch):
    fake = FakeNvml(monkeypatch, [FakeGpu(used=1)])
    real_memory = fake.memory
    stuck = {"on": False}

    def slow_memory(h):
        while stuck["on"]:  # a wedged driver call, in the GPU worker thread
            time.sleep(0.01)
        return real_memory(h)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", slow_memory)
    t = Telemetry(lambda s: None, gpu_interval=0.05, host_interval=0.05, record_interval=0.1)
    await t.start()
    try:
        await asyncio.sleep(0.2)
        gpu_before = len(t.series("gpu.0.used_bytes")["series"]["gpu.0.used_bytes"])
        host_before = len(t.series("host.cpu_pct")["series"]["host.cpu_pct"])
        stuck["on"] = True
        ticks = 0
        for _ in range(50):
            await asyncio.sleep(0.01)
            ticks += 1
        host_after = len(t.series("host.cpu_pct")["series"]["host.cpu_pct"])
        gpu_stuck = len(t.series("gpu.0.used_bytes")["series"]["gpu.0.used_bytes"])
        stuck["on"] = False
        await asyncio.sleep(0.2)
        gpu_after = len(t.series("gpu.0.used_bytes")["series"]["gpu.0.used_bytes"])
    finally:
        stuck["on"] = False
        await t.stop()
    assert ticks == 50
    assert gpu_stuck <= gpu_before + 1  # the GPU sampler really was stuck ...
    assert host_after >= host_before + 3  # ... while host samples kept coming
    assert gpu_after > gpu_stuck  # and it recovers
