"""Two slots of one agent (host.toml, core/placement.py) on the simulator: the same profile runs
on both, each on its slot's port; a swap of one never holds up the other's requests or commands
(one lock per slot, agent/swap/operations.py)."""

from __future__ import annotations

import os
import signal
import time
import urllib.request

import pytest

from sgltui.client import AgentError
from tests.ports import server_port


def _get(port: int, path: str = "/v1/models") -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.status


def _host_toml(agent, ports: dict[str, int]) -> None:
    cfg = agent.state_dir.parent / "config" / "sgltui"
    cfg.mkdir(parents=True, exist_ok=True)
    text = "".join(
        f'[[slot]]\nname = "{name}"\ngpus = [{i}]\nport = {port}\n\n'
        for i, (name, port) in enumerate(ports.items())
    )
    (cfg / "host.toml").write_text(text)


def test_two_slots_run_one_profile_and_a_swap_of_one_never_waits_the_other(agent_handle):
    agent = agent_handle
    ports = {"a": server_port(), "b": server_port()}
    _host_toml(agent, ports)
    name = agent.write_profile("t-a")
    # The swap target starts in about 2 s: time enough to find its new server launching and hold it.
    slow = agent.write_profile("t-slow", time_scale=0.02)
    agent.start()
    slots = agent.status()["slots"]
    assert [(s["id"], s["gpus"]) for s in slots] == [("a", [0]), ("b", [1])]

    # No slot named, several slots: the refusal lists them.
    with pytest.raises(AgentError, match="several slots.*a, b"):
        agent.call("start", profile=name)
    for sid in ("a", "b"):
        res = agent.call("start", profile=name, slot=sid, wait=True)
        assert res["slot"]["state"] == "ready", res
        assert res["slot"]["port"] == ports[sid]  # the slot's port, not the profile's
    assert _get(ports["a"]) == _get(ports["b"]) == 200

    old_a = agent.slot("a")["pid"]
    agent.call("swap", profile=slow, slot="a")
    # a's new server is held (SIGSTOP) while it launches: its swap then lasts for certain until
    # b's commands are done, however long a loaded machine takes over them.
    deadline = time.monotonic() + 30
    while (s := agent.slot("a"))["state"] != "launching" or s["pid"] in (None, old_a):
        assert s["swap"] is not None and time.monotonic() < deadline, s
        time.sleep(0.02)
    held = os.getpgid(s["pid"])
    os.killpg(held, signal.SIGSTOP)
    # While a swaps: b serves, and b's commands go through at once.
    t0 = time.monotonic()
    assert _get(ports["b"]) == 200
    pre = agent.call("preflight", profile=name, slot="b")
    assert pre["ok"], pre
    stopped = agent.call("stop", slot="b", wait=True)
    assert stopped["slot"]["state"] == "stopped", stopped
    again = agent.call("start", profile=name, slot="b", wait=True)
    assert again["slot"]["state"] == "ready", again
    took = time.monotonic() - t0
    a = agent.slot("a")
    assert a["swap"] is not None, (
        f"slot b's commands ({took:.1f}s) should have finished inside a's swap: {a['state']}"
    )
    assert _get(ports["b"]) == 200
    os.killpg(held, signal.SIGCONT)

    a = agent.wait_state("ready", slot="a", timeout=60)
    assert a["profile"] == "t-slow" and a["port"] == ports["a"]
    assert agent.slot("b")["profile"] == "t-a"
    done = agent.events("swap.done")
    assert [e["slot"] for e in done] == ["a"] and done[0]["ok"]
