"""Bench runs and the demo load: agent children in their own process groups, gone at shutdown."""

from __future__ import annotations

import os
import time

import psutil

from tests.agent.test_resilience import _group_members
from tests.fixtures.agent import alive as _alive


def _children(agent, module: str) -> list[int]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if module in cmd and str(agent.paths["socket"]) in cmd and _alive(p.pid):
            out.append(p.pid)
    return out


def test_demo_load_on_off_and_shutdown(agent):
    a = agent.write_profile("t-a")
    agent.call("start", profile=a, wait=True)
    assert agent.call("demo_load", on=True) == {"on": True}
    (pid,) = _children(agent, "sgltui.bench.demo_load")
    assert os.getpgid(pid) == pid and os.getpgid(pid) != os.getpgid(agent.pid)
    assert agent.status()["agent"]["demo_load"] is True
    assert agent.call("demo_load", on=False) == {"on": False}
    assert not _alive(pid) and _group_members(pid) == []

    agent.call("demo_load", on=True)
    (pid2,) = _children(agent, "sgltui.bench.demo_load")
    # A swap with drain=wait is not held up for long by the background load.
    b = agent.write_profile("t-b")
    t0 = time.monotonic()
    res = agent.call("swap", profile=b, wait=True)
    assert res["slot"]["state"] == "ready"
    assert res["result"]["timings_s"]["drain"] < 20
    agent_pid = agent.pid
    agent.call("shutdown", stop_servers=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (_alive(pid2) or _alive(agent_pid)):
        time.sleep(0.1)
    assert not _alive(pid2), "demo load must stop with the agent"
    assert not _alive(agent_pid)
    assert time.monotonic() - t0 < 60


def test_bench_run_is_spawned_tracked_and_stopped(agent):
    a = agent.write_profile("t-a")
    agent.call("start", profile=a, wait=True)
    spec = {
        "profiles": [],
        "slot": "0",
        "concurrency": [1],
        "input_len": 16,
        "output_len": 4000,
        "requests": 500,
        "repeat": 1,
        "workload": "random",
        "api": "completions",
    }
    run_id = agent.call("bench_start", spec=spec)["run_id"]
    runs = agent.call("bench_list")
    assert [r["run_id"] for r in runs] == [run_id]
    assert runs[0]["state"] in ("running", "done", "failed")
    started = agent.events("bench.start")
    assert started and started[-1]["run_id"] == run_id and started[-1]["client"].startswith("test:")
    stopped = agent.call("bench_stop", run_id=run_id)
    assert stopped["state"] in ("stopped", "done", "failed")
    pid = started[-1]["pid"]
    assert not _alive(pid) and _group_members(pid) == []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not agent.events("bench.done"):
        time.sleep(0.1)
    done = agent.events("bench.done")
    assert done and done[-1]["run_id"] == run_id and done[-1]["path"].endswith(f"{run_id}.json")
