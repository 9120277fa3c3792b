"""API keys stay out of what the agent writes and serves; several slots run side by side."""

from __future__ import annotations

import json
from pathlib import Path

import psutil

KEY = "sk-test-4f9a8b7c6d5e"


def test_api_key_never_leaks_from_the_agent(agent):
    name = agent.write_profile("t-key", api_key=KEY)
    res = agent.call("start", profile=name, wait=True)
    slot = res["slot"]
    assert slot["state"] == "ready", slot  # /ready is open; readiness works with a key set
    assert slot["api_key_set"] is True
    assert KEY not in json.dumps(agent.status())
    assert "--api-key" not in slot["command"] and "--config" in slot["command"]
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


def _cmdlines() -> list[tuple[int, str]]:
    """(pid, argv joined) of every process on the machine, as `ps -eo args` shows them."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        out.append((proc.info["pid"], " ".join(proc.info["cmdline"] or [])))
    return out


def test_the_key_is_in_no_process_argv(agent):
    """Issue 18 #7: the key was in the server's argv, readable by every user with `ps`. Now it
    travels in a 0600 --config file that is gone once the server has read it."""
    name = agent.write_profile("t-ps", api_key=KEY, admin_api_key=KEY + "-admin")
    agent.call("start", profile=name, wait=False)
    seen_config = None
    slot = agent.slot()
    while slot["state"] == "launching":
        for pid, args in _cmdlines():
            assert KEY not in args, f"pid {pid} shows the key: {args[:200]}"
            if "--config" in args and "sgltui.sim" in args:
                seen_config = args.split("--config ", 1)[1].split()[0]
        slot = agent.slot()
    assert slot["state"] == "ready", slot
    sim_pids = set(slot["pids"])
    for pid, args in _cmdlines():
        assert KEY not in args, f"pid {pid} shows the key: {args[:200]}"
    assert seen_config or any(
        "--config" in psutil.Process(p).cmdline() for p in sim_pids if psutil.pid_exists(p)
    )
    secrets = agent.state_dir / "secrets"
    assert secrets.is_dir() and (secrets.stat().st_mode & 0o777) == 0o700
    assert list(secrets.iterdir()) == [], "the secrets file is removed once the server read it"
    # The server took the key from the file: requests without it are refused, with it served.
    import urllib.error
    import urllib.request

    url = f"http://127.0.0.1:{slot['port']}/v1/models"
    try:
        urllib.request.urlopen(url, timeout=10)
        raise AssertionError("served without the key")
    except urllib.error.HTTPError as exc:
        assert exc.code == 401
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {KEY}"})
    assert urllib.request.urlopen(req, timeout=10).status == 200
