"""Demo load through the agent: traffic reaches the ready slot-0 server; off stops it."""

from __future__ import annotations

import time

import psutil

from tests.fixtures.sim import streaming_total


def streamed_requests(url: str) -> float:
    return streaming_total(url, "sglang:num_requests_total")


def demo_pids(agent_pid: int) -> list[int]:
    return [
        p.pid
        for p in psutil.Process(agent_pid).children(recursive=True)
        if "sgltui.bench.demo_load" in " ".join(p.cmdline())
    ]


def test_demo_load_follows_slot_and_stops(agent):
    name = agent.write_profile("t-demo", enable_metrics=True)
    agent.call("start", profile=name)
    slot = agent.wait_state("ready")
    url = f"http://{slot['host']}:{slot['port']}"
    assert agent.call("demo_load", on=True)["on"] is True
    deadline = time.monotonic() + 30
    while streamed_requests(url) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert streamed_requests(url) >= 3
    assert len(demo_pids(agent.pid)) == 1
    assert agent.call("demo_load", on=False)["on"] is False
    assert demo_pids(agent.pid) == []
    before = streamed_requests(url)
    time.sleep(1.0)
    assert streamed_requests(url) - before <= 3  # at most the streams that were in flight


async def test_demo_load_pauses_while_a_bench_run_measures(tmp_path):
    """Background traffic would skew a bench run, so the demo load stands aside while one runs
    and comes back when it is over."""
    from sgltui.bench.demo_load import DemoLoad

    load = DemoLoad(tmp_path, streams=2, max_output=16)
    slot = {"id": "0", "state": "ready", "host": "127.0.0.1", "port": 31234, "swap": None}
    load._update({"slots": [slot], "bench": None})
    assert load.ready.is_set() and load.base_url == "http://127.0.0.1:31234"
    load._update({"slots": [slot], "bench": {"run_id": "r", "state": "running"}})
    assert not load.ready.is_set() and load.base_url is None
    load._update({"slots": [slot], "bench": {"run_id": "r", "state": "done"}})
    assert load.ready.is_set() and load.base_url == "http://127.0.0.1:31234"


async def test_demo_load_follows_the_hosts_first_slot_and_a_pool_with_a_ready_member(tmp_path):
    """Without --slot the load follows the host's first slot, whatever its name; a pool's
    endpoint (its gateway, or the front of a pool of one) while one of its members is ready."""
    from sgltui.bench.demo_load import DemoLoad

    load = DemoLoad(tmp_path, streams=1, max_output=16)
    a = {"id": "a", "state": "ready", "host": "127.0.0.1", "port": 31000, "swap": None}
    load._update({"slots": [a], "bench": None})
    assert load.base_url == "http://127.0.0.1:31000"
    front = {"name": "all", "endpoint": "http://127.0.0.1:30081", "slots": ["a"]}
    front["gateway"] = {"pid": None, "state": "front"}
    load._update({"slots": [a], "pools": [front], "bench": None})
    assert load.ready.is_set() and load.base_url == "http://127.0.0.1:30081"
    loading = dict(a, state="loading")
    load._update({"slots": [loading], "pools": [front], "bench": None})
    assert not load.ready.is_set() and load.base_url is None
