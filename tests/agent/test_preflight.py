"""Preflight: a swap to a target that cannot start is refused before the running server is
touched (issue 12). Each case drives the real agent and simulator and checks the server that was
running is the same process, still ready, afterwards."""

from __future__ import annotations

import re
import sys
import urllib.request
from pathlib import Path

import pytest

from sgltui.client import AgentError
from tests.fixtures.cli import agent_sgltui
from tests.ports import server_port


def _ready_http(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as r:
        return r.status


def _real_profile(agent, name: str, python: str = sys.executable, **server) -> str:
    """A launcher="sglang" profile (SGLang is not installed in the test interpreter)."""
    port = server.pop("port", None) or server_port()
    lines = [
        f'name = "{name}"',
        'launcher = "sglang"',
        f'python = "{python}"',
        "[server]",
        'model-path = "meta-llama/Llama-3.1-8B-Instruct"',
        f"port = {port}",
    ]
    lines += [f"{k.replace('_', '-')} = {v!r}" for k, v in server.items()]
    (agent.profiles_dir / f"{name}.toml").write_text("\n".join(lines) + "\n")
    return name


@pytest.fixture
def running(agent):
    """A ready simulator in slot 0; yields (agent, its status)."""
    a = agent.write_profile("pf-a")
    slot = agent.call("start", profile=a, wait=True)["slot"]
    assert slot["state"] == "ready"
    return agent, slot


def _untouched(agent, before: dict) -> None:
    after = agent.slot()
    assert after["state"] == "ready" and after["pid"] == before["pid"], after
    assert after["launch_id"] == before["launch_id"] and after["profile"] == before["profile"]
    assert _ready_http(after["port"]) == 200
    assert not [e for e in agent.events("slot.state") if e["state"] in ("draining", "stopping")]


def test_missing_sglang_is_refused_and_server_untouched(running):
    agent, before = running
    name = _real_profile(agent, "pf-nosglang")
    with pytest.raises(AgentError) as exc:
        agent.call("swap", profile=name)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("preflight interpreter:") and "No module named 'sglang'" in msg, msg
    assert "pip install 'sgltui[sglang]'" in msg and "--force interpreter" in msg
    _untouched(agent, before)
    ev = agent.events("preflight")[-1]
    assert ev["ok"] is False and {c["name"] for c in ev["checks"]} >= {"interpreter", "port"}


def test_the_profiles_pythonpath_is_where_the_interpreter_check_looks(agent, tmp_path):
    # SGLang from a source checkout, reached through the profile's [env] PYTHONPATH: the server
    # would import it, so the check must find it too (it looked with the agent's environment).
    pkg = tmp_path / "checkout" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text("")
    name = _real_profile(agent, "pf-pythonpath")
    path = agent.profiles_dir / f"{name}.toml"
    path.write_text(path.read_text() + f'[env]\nPYTHONPATH = "{tmp_path / "checkout"}"\n')
    res = agent.call("preflight", profile=name)
    check = next(c for c in res["checks"] if c["name"] == "interpreter")
    assert check["ok"] and "has sglang.launch_server" in check["message"], check
    # the same profile without it is still refused: the check looks, it does not wave through
    path.write_text(path.read_text().replace("PYTHONPATH", "UNRELATED"))
    res = agent.call("preflight", profile=name)
    check = next(c for c in res["checks"] if c["name"] == "interpreter")
    assert not check["ok"] and "No module named 'sglang'" in check["message"], check


def test_hicache_host_pool_too_big_is_refused_and_server_untouched(running):
    agent, before = running
    name = agent.write_profile("pf-hicache", enable_hierarchical_cache=True, hicache_size=100000)
    with pytest.raises(AgentError, match=r"preflight host-memory: host pool ") as exc:
        agent.call("swap", profile=name)
    msg = str(exc.value)
    assert "host pool 93132 GiB > 467 GiB free simulated RAM (hicache-size 100000 GB" in msg, msg
    assert "Not enough host memory available" in msg and "\n" not in msg
    _untouched(agent, before)


def test_hicache_ratio_host_pool_too_big_is_refused_and_server_untouched(running):
    """Sized by --hicache-ratio: the device pool is worked out before anything stops (issue 12
    left this case to the start-up, which failed after the running server was gone)."""
    agent, before = running
    name = agent.write_profile(
        "pf-ratio", enable_hierarchical_cache=True, hicache_ratio=8.0, sim_host_memory_gb=64
    )
    with pytest.raises(AgentError, match=r"preflight host-memory: host pool ") as exc:
        agent.call("swap", profile=name)
    msg = str(exc.value)
    assert re.search(
        r"host pool \d+ GiB > 50 GiB free simulated RAM \(hicache-ratio 8 x device pool", msg
    ), msg
    assert "lower hicache-ratio" in msg and "--force host-memory" in msg and "\n" not in msg
    _untouched(agent, before)
    ev = agent.events("preflight")[-1]
    assert ev["ok"] is False and ev["profile"] == name


def test_hicache_ratio_host_pool_that_fits_passes(agent):
    name = agent.write_profile("pf-ratio-ok", enable_hierarchical_cache=True, hicache_ratio=2.0)
    checks = agent.call("preflight", profile=name)
    host = next(c for c in checks["checks"] if c["name"] == "host-memory")
    assert (
        host["ok"]
        and "fits in simulated host RAM (hicache-ratio 2 x device pool" in host["message"]
    )


def test_busy_target_port_is_refused_and_server_untouched(running, busy_port):
    agent, before = running
    name = agent.write_profile("pf-busy", port=busy_port)
    with pytest.raises(AgentError, match=rf"preflight port: port {busy_port} is already in use"):
        agent.call("swap", profile=name)
    _untouched(agent, before)


def test_forcing_the_port_check_launches_and_the_server_says_why(agent, busy_port):
    """`--force port` goes past the agent's own pre-check too (it refused with the same words
    the hint had just offered to skip); the server then fails on its bind, with that cause."""
    name = agent.write_profile("pf-forced", port=busy_port)
    with pytest.raises(AgentError, match=rf"preflight port: port {busy_port} is already in use"):
        agent.call("start", profile=name, wait=True)
    slot = agent.call("start", profile=name, force=["port"], wait=True)["slot"]
    assert slot["state"] == "failed", slot
    assert slot["cause"]["kind"] == "port", slot["cause"]
    assert "address already in use" in Path(slot["log_path"]).read_text()


def test_missing_local_model_is_refused_and_server_untouched(running, tmp_path):
    agent, before = running
    name = agent.write_profile("pf-nomodel", model=str(tmp_path / "no-such-model"))
    with pytest.raises(
        AgentError, match=r"preflight model: model path .*no-such-model does not exist"
    ):
        agent.call("swap", profile=name)
    _untouched(agent, before)


def test_same_port_as_the_replaced_server_is_fine(running):
    agent, before = running
    name = agent.write_profile("pf-same", port=before["port"])
    res = agent.call("preflight", profile=name)
    assert res["ok"], res
    port = next(c for c in res["checks"] if c["name"] == "port")
    assert "held by the server being replaced" in port["message"]


def test_force_skips_a_check_and_missing_sglang_is_its_own_cause(running):
    agent, before = running
    name = _real_profile(agent, "pf-forced")
    res = agent.call("swap", profile=name, force=["interpreter"], wait=True)
    result = res["result"]
    assert result["ok"] is False and result["rolled_back"] is True, res
    cause = result["cause"]
    assert cause["kind"] == "import" and "SGLang is not installed" in cause["summary"], cause
    assert "pip install 'sgltui[sglang]'" in cause["fix"]
    slot = res["slot"]
    # Rolled back and healthy: the failure is history, not the cause of a ready slot.
    assert slot["state"] == "ready" and slot["cause"] is None and slot["phase"] is None
    assert slot["last_failure"]["kind"] == "import"
    with pytest.raises(AgentError, match="unknown preflight check 'nope'"):
        agent.call("swap", profile=name, force=["nope"])


def test_rollback_uses_the_resolved_profile_after_its_file_is_deleted(running):
    agent, before = running
    bad = agent.write_profile("pf-oom", sim_fail_at_start="oom")
    (agent.profiles_dir / "pf-a.toml").unlink()
    res = agent.call("swap", profile=bad, wait=True)
    slot = res["slot"]
    assert res["result"]["rolled_back"] is True, res
    assert slot["state"] == "ready" and slot["profile"] == "pf-a"
    assert slot["resolved"]["name"] == "pf-a" and slot["resolved"]["content_hash"]
    assert slot["cause"] is None and slot["last_failure"]["kind"] == "oom"


def test_restart_says_when_the_profile_changed(running):
    agent, before = running
    res = agent.call("restart")
    assert res["profile_changed"] is False
    agent.wait_state("ready")
    agent.write_profile("pf-a", max_running_requests=8)
    res = agent.call("restart")
    assert res["profile_changed"] is True
    agent.wait_state("ready")
    assert agent.events("profile.changed")


def test_cli_refused_swap_is_one_line_exit_1_and_force_names_a_check(running):
    agent, before = running
    name = agent.write_profile("pf-cli", enable_hierarchical_cache=True, hicache_size=100000)
    r = agent_sgltui(agent, "swap", name)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("sgltui: error:")]
    assert len(errors) == 1 and "preflight host-memory:" in errors[0], r.stderr
    assert "--force host-memory" in errors[0] and "Traceback" not in r.stderr
    _untouched(agent, before)
    r = agent_sgltui(agent, "swap", name, "--force", "nonsense")
    assert r.returncode == 2 and "--force takes a preflight check" in r.stderr, r.stderr
    _untouched(agent, before)


def test_profiles_list_marks_key_clashes_across_launchers(agent):
    agent.write_profile("pf-k1", key="x")
    agent.write_profile("pf-k2", key="x")
    agent.write_profile("pf-k3", key="y")
    rows = {p["name"]: p for p in agent.call("profiles")}
    assert rows["pf-k1"]["key_clash"] == ["pf-k2"] and rows["pf-k2"]["key_clash"] == ["pf-k1"]
    assert rows["pf-k3"]["key_clash"] == []
    # The shipped demo and real profiles never share a key.
    shipped = [p for p in rows.values() if not p["name"].startswith("pf-")]
    assert shipped and all(p["key_clash"] == [] for p in shipped)


def test_swap_drains_requests_already_sent_with_a_countdown(agent):
    """Issue 12 #5: the default drain waits for running and queued requests (bounded), so what
    was sent before the swap completes; the countdown is in the events (CLI and TUI show it)."""
    import json as _json
    import threading

    a = agent.write_profile("pf-slow", time_scale=1.0, sim_slow_start=0.01)
    b = agent.write_profile("pf-next")
    port = agent.call("start", profile=a, wait=True)["slot"]["port"]
    out: dict = {}

    def request() -> None:
        body = _json.dumps(
            {"model": "m", "prompt": "hello", "max_tokens": 200, "ignore_eos": True}
        ).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions",
            body,
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            out["body"] = _json.loads(r.read())

    t = threading.Thread(target=request)
    t.start()
    deadline = __import__("time").monotonic() + 20
    while __import__("time").monotonic() < deadline:  # wait until the server runs it
        loads = _json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/loads").read())
        if sum(x.get("num_running_reqs", 0) for x in loads.get("loads", [])):
            break
    agent.call("swap", profile=b)
    t.join(60)
    slot = agent.wait_state("ready", timeout=90)
    assert slot["profile"] == b
    choice = out["body"]["choices"][0]
    assert choice["finish_reason"] == "length", out
    assert out["body"]["usage"]["completion_tokens"] == 200
    drains = agent.events("slot.drain")
    assert drains and drains[0]["requests"] >= 1 and drains[0]["timeout_s"] == 30.0
    assert all(0 <= d["left_s"] <= 30.0 for d in drains)


def test_readopted_slot_rolls_back_to_what_ran_after_its_file_is_deleted(running):

    agent, before = running
    agent.kill9()
    (agent.profiles_dir / "pf-a.toml").unlink()
    st = agent.status()
    slot = st["slots"][0]
    assert slot["state"] == "ready" and slot["pid"] == before["pid"]
    assert slot["resolved"]["name"] == "pf-a"
    bad = agent.write_profile("pf-oom2", sim_fail_at_start="oom")
    res = agent.call("swap", profile=bad, wait=True)
    assert res["result"]["rolled_back"] is True, res
    assert res["slot"]["state"] == "ready" and res["slot"]["profile"] == "pf-a"


def test_profile_rows_say_validity_launcher_and_an_oversized_host_pool(agent):
    """The profile list marks what a key press would refuse, before anyone presses it."""
    agent.write_profile("pf-good", key="1")
    agent.write_profile(
        "pf-huge",
        key="2",
        enable_hierarchical_cache=True,
        hicache_ratio=8.0,
        sim_host_memory_gb=64,
    )
    agent.write_profile("pf-bad", key="3", mem_fraction_static="lots")
    (agent.profiles_dir / "pf-broken.toml").write_text('name = "pf-broken"\nkey = \n')
    _real_profile(agent, "pf-real")
    rows = {r["name"]: r for r in agent.call("profiles")}
    assert rows["pf-good"]["valid"] is True and rows["pf-good"]["problem"] == ""
    assert rows["pf-good"]["launcher"] == "sim" and rows["pf-real"]["launcher"] == "sglang"
    assert rows["pf-good"]["host_pool_problem"] == ""  # typed replies send the default too
    huge = rows["pf-huge"]
    assert huge["valid"] is True
    assert re.fullmatch(r"host pool \d+ GiB > 50 GiB free simulated RAM", huge["host_pool_problem"])
    assert huge["host_pool_how"].startswith("hicache-ratio 8 x device pool ")
    assert huge["host_pool_gib"] > 50
    bad = rows["pf-bad"]
    assert bad["valid"] is False and "mem-fraction-static" in bad["problem"], bad
    assert "\n" not in bad["problem"]
    broken = rows["pf-broken"]
    assert broken["valid"] is False and "invalid TOML" in broken["problem"], broken
    # Fixed on disk: the next listing says so (the cache follows the file).
    agent.write_profile("pf-bad", key="3", mem_fraction_static=0.8)
    rows = {r["name"]: r for r in agent.call("profiles")}
    assert rows["pf-bad"]["valid"] is True
