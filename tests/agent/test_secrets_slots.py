"""API keys stay out of what the agent writes and serves; several slots run side by side."""

from __future__ import annotations

import json
from pathlib import Path

KEY = "sk-test-4f9a8b7c6d5e"


def test_api_key_never_leaks_from_the_agent(agent):
    name = agent.write_profile("t-key", api_key=KEY)
    res = agent.call("start", profile=name, wait=True)
    slot = res["slot"]
    assert slot["state"] == "ready", slot  # /ready is open; readiness works with a key set
    assert slot["api_key_set"] is True
    assert KEY not in json.dumps(agent.status())
    assert "***" in slot["command"]
    logs = agent.call("logs", lines=500)["lines"]
    assert any("server_args=" in ln for ln in logs) and KEY not in "\n".join(logs)
    session = Path(agent.status()["agent"]["session_dir"])
    assert KEY not in (session / "events.jsonl").read_text()
    assert KEY not in (agent.state_dir / "agent-state.json").read_text()


def test_two_slots_run_side_by_side(agent_handle, monkeypatch):
    monkeypatch.setenv("SGLTUI_SLOTS", "0,1")
    agent = agent_handle
    agent.start()
    a, b = agent.write_profile("t-a"), agent.write_profile("t-b")
    agent.call("start", profile=a, slot="0")
    agent.call("start", profile=b, slot="1")
    s0 = agent.wait_state("ready", slot="0")
    s1 = agent.wait_state("ready", slot="1")
    assert s0["profile"] == "t-a" and s1["profile"] == "t-b" and s0["port"] != s1["port"]
    assert not set(s0["pids"]) & set(s1["pids"])
    agent.call("stop", slot="1", wait=True)
    assert agent.slot("1")["state"] == "stopped" and agent.slot("0")["state"] == "ready"
    events = agent.events("slot.state")
    assert {e["slot"] for e in events} == {"0", "1"}
