"""Start, swap, rollback, crash, hang: a real agent driving real simulator processes."""

from __future__ import annotations

import json
import os
import stat
import urllib.request
from pathlib import Path

import psutil
import pytest

from sgltui.client import AgentError


def _ready_http(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as r:
        return r.status


def _alive(pids) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.Error:
            pass
    return out


def test_start_reaches_ready_with_phases_events_and_log(agent):
    name = agent.write_profile("t-a")
    res = agent.call("start", profile=name, wait=True)
    slot = res["slot"]
    assert slot["state"] == "ready", res
    assert slot["profile"] == "t-a" and slot["port"] == agent.ports["t-a"]
    assert slot["pid"] in slot["pids"] and _alive(slot["pids"]) == sorted(slot["pids"])
    assert _ready_http(slot["port"]) == 200
    assert slot["phase"] is None and slot["progress"] is None and slot["uptime_s"] is not None
    log = Path(slot["log_path"]).read_text()
    assert "The server is fired up and ready to roll!" in log
    assert Path(slot["log_path"]).parent == Path(agent.status()["agent"]["session_dir"]) / "servers"

    # Every phase was announced in order, and each state change names the client.
    phases = [e["phase"] for e in agent.events("slot.phase")]
    assert phases == [
        "spawned",
        "loading weights",
        "allocating KV cache",
        "capturing CUDA graphs",
        "warming up",
    ]
    states = [(e["prev"], e["state"]) for e in agent.events("slot.state")]
    assert states == [("stopped", "launching"), ("launching", "ready")]
    assert all(e["client"].startswith("test:") for e in agent.events("slot.state"))
    cmd = agent.events("command")[0]
    assert (
        cmd["op"] == "start"
        and cmd["args"]["profile"] == "t-a"
        and cmd["client"].startswith("test:")
    )
    launch = agent.events("launch")[0]
    assert launch["launch_id"] == slot["launch_id"] and launch["command"][1:3] == [
        "-m",
        "sgltui.sim",
    ]

    # A second start on a busy slot is refused with what to do instead.
    with pytest.raises(AgentError, match="already runs t-a.*swap"):
        agent.call("start", profile=name)
    refused = agent.events("command.refused")
    assert refused and refused[-1]["op"] == "start"

    # The next launch of the same profile has an ETA learned from this one.
    history = json.loads((agent.state_dir / "launch-history.json").read_text())
    assert set(history["t-a"][0]) >= {"spawned", "loading weights", "warming up"}


def test_socket_is_private_and_stop_frees_everything(agent):
    mode = stat.S_IMODE(os.stat(agent.paths["socket"]).st_mode)
    assert mode == 0o600
    name = agent.write_profile("t-a")
    slot = agent.call("start", profile=name, wait=True)["slot"]
    pids = slot["pids"]
    res = agent.call("stop", wait=True)
    assert res["slot"]["state"] == "stopped"
    report = res["result"]["report"]
    assert report["left_pids"] == [] and report["port_free"] and report["gpu_bytes_held"] == 0
    assert _alive(pids) == []
    # The simulator's GPU file is gone with it: no memory held by that launch.
    assert not any(Path(os.environ["SGLTUI_SIM_GPU_DIR"]).glob("*.json"))
    with pytest.raises(AgentError, match="not running anything"):
        agent.call("stop")


def test_swap_to_ready_and_second_swap_refused(agent):
    a, b = agent.write_profile("t-a"), agent.write_profile("t-b")
    a_pids = agent.call("start", profile=a, wait=True)["slot"]["pids"]
    res = agent.call("swap", profile=b)
    assert res["accepted"] and res["slot"]["swap"]["to"] == "t-b"
    with pytest.raises(
        AgentError, match=r"swap refused: swap t-a -> t-b is already running \(by test:"
    ):
        agent.call("swap", profile=a)
    slot = agent.wait_state("ready")
    assert slot["profile"] == "t-b" and slot["swap"] is None
    assert _alive(a_pids) == []
    done = agent.events("swap.done")[-1]
    assert done["ok"] and not done["rolled_back"] and done["from"] == "t-a" and done["to"] == "t-b"
    assert set(done["timings_s"]) >= {"drain", "stop", "memory_release", "load", "ready", "total"}
    steps = [e["step"] for e in agent.events("swap.step")]
    assert steps == ["draining", "stopping", "releasing memory", "launching", "ready"]
    assert _ready_http(slot["port"]) == 200


def test_swap_to_failing_profile_rolls_back(agent):
    a = agent.write_profile("t-a")
    bad = agent.write_profile("t-oom", sim_fail_at_start="oom")
    agent.call("start", profile=a, wait=True)
    res = agent.call("swap", profile=bad, wait=True)
    result, slot = res["result"], res["slot"]
    assert result["ok"] is False and result["rolled_back"] is True
    assert slot["state"] == "ready" and slot["profile"] == "t-a"
    cause = result["cause"]
    assert cause["kind"] == "oom" and "Capture cuda graph failed" in " ".join(cause["lines"])
    assert "mem-fraction-static" in cause["fix"]
    failed = [e for e in agent.events("slot.state") if e["state"] == "failed"]
    assert failed and failed[-1]["cause"]["kind"] == "oom" and failed[-1]["profile"] == "t-oom"
    done = agent.events("swap.done")[-1]
    assert done["rolled_back"] and not done["ok"]
    assert [e["step"] for e in agent.events("swap.step")][-2:] == ["rolling back", "ready"]


def test_swap_without_rollback_stays_failed(agent):
    a = agent.write_profile("t-a")
    bad = agent.write_profile("t-flag", sim_fail_at_start="flag")
    agent.call("start", profile=a, wait=True)
    res = agent.call("swap", profile=bad, rollback=False, wait=True)
    assert res["slot"]["state"] == "failed" and res["slot"]["profile"] == "t-flag"
    assert res["slot"]["cause"]["kind"] == "flag"
    assert res["result"]["rolled_back"] is False


def test_crash_after_ready_gives_cause(agent):
    # The crash time counts from the simulator's start, so leave room for a slow start-up.
    name = agent.write_profile("t-crash", sim_crash_after=8)
    assert agent.call("start", profile=name, wait=True)["slot"]["state"] == "ready"
    slot = agent.wait_state("crashed", timeout=30)
    cause = slot["cause"]
    assert cause["kind"] in ("signal", "exit", "cuda", "oom") and cause["summary"]
    assert cause["lines"], cause
    assert slot["pids"] == []
    crashed = [e for e in agent.events("slot.state") if e["state"] == "crashed"]
    assert crashed and crashed[0]["prev"] == "ready"


@pytest.mark.parametrize(
    "fail,kind", [("port", "port"), ("model-not-found", "model"), ("cuda", "cuda")]
)
def test_start_failure_causes(agent, fail, kind):
    name = agent.write_profile(f"t-{fail}", sim_fail_at_start=fail)
    res = agent.call("start", profile=name, wait=True)
    slot = res["slot"]
    assert slot["state"] == "failed", slot
    assert slot["cause"]["kind"] == kind, slot["cause"]
    assert slot["cause"]["fix"] and slot["cause"]["lines"]


def test_hang_is_detected_past_learned_eta(agent_handle, monkeypatch):
    monkeypatch.setenv("SGLTUI_HANG_MIN_S", "2")
    monkeypatch.setenv("SGLTUI_HANG_FACTOR", "2")
    agent = agent_handle
    agent.start()
    name = agent.write_profile("t-h")
    agent.call("start", profile=name, wait=True)  # learns this profile's phase durations
    agent.call("stop", drain="force", wait=True)
    agent.write_profile("t-h", sim_hang_in="kv")  # same profile, now hangs allocating the KV cache
    res = agent.call("start", profile=name, wait=True)
    slot = res["slot"]
    assert slot["state"] == "failed"
    assert slot["cause"]["kind"] == "hang" and "allocating KV cache" in slot["cause"]["summary"]
    assert slot["pids"] == []


def test_port_in_use_is_refused_before_launch(agent, busy_port):
    name = agent.write_profile("t-busy", port=busy_port)
    with pytest.raises(AgentError, match=f"port {busy_port} is already in use.*set `port`"):
        agent.call("start", profile=name)
    assert agent.slot()["state"] == "stopped"


def test_unknown_profile_is_one_line(agent):
    with pytest.raises(AgentError) as exc:
        agent.call("start", profile="no-such-profile")
    assert "\n" not in str(exc.value) and "no-such-profile" in str(exc.value)
