"""Opt-in Prometheus metrics (agent.toml [metrics] port): an HTTP GET of the agent's gauges and
counters, labelled by host, slot and pool."""

from __future__ import annotations

import os
import socket
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from sgltui.agent.config import load


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: list, **labels: str) -> float | None:
    for s in samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def test_metrics_serve_the_agents_gauges_and_counters(agent_handle, free_port):
    cfg = os.environ["XDG_CONFIG_HOME"] + "/sgltui"
    os.makedirs(cfg, exist_ok=True)
    with open(cfg + "/agent.toml", "w") as f:
        f.write(f"[metrics]\nport = {free_port}\n")
    agent = agent_handle
    agent.start()
    a, b = agent.write_profile("t-a"), agent.write_profile("t-b")
    agent.call("start", profile=a, wait=True)
    agent.call("swap", profile=b, wait=True)
    host = socket.gethostname().split(".")[0]
    lab = {"host": host, "slot": "0", "pool": ""}
    # The GPU memory gauge follows the GPU sampler, which reads the new server on its next tick
    # after the swap (under CI's load, after the swap's reply): scrape until it has read it.
    deadline = time.monotonic() + 30
    m = scrape(free_port)
    while not value(m["sgltui_slot_gpu_memory_bytes"], **lab) and time.monotonic() < deadline:
        time.sleep(0.5)
        m = scrape(free_port)
    assert value(m["sgltui_slot_state"], **lab, state="ready") == 1.0
    assert value(m["sgltui_slot_state"], **lab, state="stopped") == 0.0
    assert value(m["sgltui_slot_profile"], **lab, profile=b) == 1.0
    assert value(m["sgltui_swaps"], **lab, outcome="ok") == 1.0  # sgltui_swaps_total
    assert value(m["sgltui_swap_duration_seconds"], **lab) is not None
    assert value(m["sgltui_slot_entered"], **lab, state="ready") == 2.0
    assert (value(m["sgltui_slot_gpu_memory_bytes"], **lab) or 0) > 0  # the simulator's share
    # Loopback only: nothing answers on another address of this host.
    assert load().metrics.host == "127.0.0.1"
    # no traceback at start (the registry's first look once logged an AssertionError)
    log = agent.agent_log()
    assert "metrics scrape" not in log and "Traceback" not in log, log[-3000:]


def test_a_taken_metrics_port_stops_the_agent_start_with_its_line(isolated_env):
    """Issue 35 F8: `agent start` printed 'running' and only agent.log knew."""
    from pathlib import Path

    import pytest

    from sgltui.client import AgentError, spawn_agent

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        cfg = os.environ["XDG_CONFIG_HOME"] + "/sgltui"
        os.makedirs(cfg, exist_ok=True)
        with open(cfg + "/agent.toml", "w") as f:
            f.write(f"[metrics]\nport = {port}\n")
        with pytest.raises(AgentError, match=rf"did not start: .*\[metrics\] port {port}.*"):
            spawn_agent(Path(isolated_env))


def test_metrics_port_is_checked_like_every_key(tmp_path):
    p = tmp_path / "agent.toml"
    p.write_text("[metrics]\nport = 70000\n")
    try:
        load(p, env={})
    except ValueError as exc:
        assert "[metrics] port" in str(exc) and "1-65535" in str(exc)
    else:
        raise AssertionError("a bad metrics port was accepted")
    p.write_text("[metrics]\nport = 9400\n")
    assert load(p, env={}).metrics.port == 9400
    assert load(p, env={"SGLTUI_METRICS_PORT": "off"}).metrics.port is None
    assert load(tmp_path / "none.toml", env={}).metrics.port is None  # opt-in
