"""A server the user started by hand (issue 38): found, attached, benched and used through, then
adopted and swapped; its resolved args back to a profile. The simulator is started here as a
user would (subprocess, its own session), never through sgltui; the agent is the real one."""

from __future__ import annotations

import json
import threading
import time

import httpx

from tests.fixtures.cli import agent_sgltui, sgltui
from tests.jobs.batch_input import write_input


def _wait(pred, timeout: float = 30.0, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _slot(agent, sid: str) -> dict:
    return next(s for s in agent.status()["slots"] if s["id"] == sid)


def test_a_server_started_by_hand_is_listed_then_attached(agent, sim_server, tmp_path):
    sim = sim_server("--served-model-name", "by-hand")
    url = f"http://127.0.0.1:{sim.port}"
    # found: by process, port and /server_info; `status` says how to attach it
    # (a scan while it loaded lists it "not listening yet" until the next scan: wait for that)
    found = _wait(
        lambda: [u for u in agent.status()["unmanaged"] if u["pid"] == sim.pid and u["url"]],
        what="the hand-started server in status.unmanaged",
    )
    assert found[0]["port"] == sim.port and found[0]["url"] == url
    assert found[0]["model"] == "by-hand"
    r = agent_sgltui(agent, "status", "--json")
    listed = json.loads(r.stdout)["unmanaged"]
    assert {"pid": sim.pid, "port": sim.port, "url": url, "model": "by-hand"}.items() <= next(
        u for u in listed if u["pid"] == sim.pid
    ).items()
    r = agent_sgltui(agent, "status")
    assert r.returncode == 0, r.stderr
    assert f"not managed: sim on :{sim.port}, pid {sim.pid}, by-hand" in r.stdout
    assert f"attach with `sgltui attach {url}`" in r.stdout

    # nothing there: one line that says what to check
    r = agent_sgltui(agent, "attach", "http://127.0.0.1:9")
    assert r.returncode == 1 and "no answer" in r.stderr and "listening there" in r.stderr

    # attached: the agent's only (idle) slot watches it
    r = agent_sgltui(agent, "attach", url)
    assert r.returncode == 0, r.stderr
    assert f"slot 0: attached {url} (pid {sim.pid}" in r.stdout
    st = agent.status()
    assert not [u for u in st["unmanaged"] if u["pid"] == sim.pid]
    slot = st["slots"][0]
    assert slot["state"] == "ready" and slot["external"]["pid"] == sim.pid
    assert slot["external"]["version"] and slot["external"]["info_hash"]

    # its log lines are not ours: `logs` says so (not another launch's log)
    r = agent_sgltui(agent, "logs")
    assert r.returncode == 0 and "started outside sgltui" in r.stdout, r.stdout + r.stderr

    # lifecycle refused with the way forward
    r = agent_sgltui(agent, "stop")
    assert r.returncode == 1 and "sgltui adopt --slot 0" in r.stderr, r.stderr
    agent.write_profile("t-b")
    r = agent_sgltui(agent, "swap", "t-b")
    assert r.returncode == 1 and "which sgltui did not start" in r.stderr, r.stderr

    # memory of its process on the (simulated) GPU, its capacity card from /server_info
    def mem():
        tele = agent.status()["telemetry"]
        return sum(g.get("server_bytes", {}).get("0", 0) for g in tele.get("gpus", []))

    assert _wait(mem, what="the attached server's GPU memory") > 0
    _wait(lambda: _slot(agent, "0").get("capacity"), what="its capacity card")

    # a bench through it, recorded like any other
    r = agent_sgltui(
        agent, "bench", "--concurrency", "2", "--requests", "6",
        "--input-len", "8", "--output-len", "4", "--warmup", "0", "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)
    # every number says what produced it: the resolved args and version, under a hash
    prov = next(iter(run["provenance"].values()))
    assert prov["version"] and prov["args"]["model_path"] and prov["decided"]
    assert prov["args"]["served_model_name"] == "by-hand"
    assert {x["server_info_hash"] for x in run["results"]} == {prov["hash"]}
    # throughput and running requests seen by the agent's telemetry while it ran
    assert agent.status()["telemetry"]["engine"].get("0"), "no engine figures for slot 0"

    # a 100-line job through it
    batch = tmp_path / "in.jsonl"
    write_input(batch, 100)
    r = agent_sgltui(agent, "job", "run", str(batch), "--concurrency", "8", timeout=240)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "100/100" in r.stdout
    outs = (tmp_path / "in.output.jsonl").read_text().splitlines()
    assert len(outs) == 100
    job = json.loads(agent_sgltui(agent, "job", "status", "--json").stdout)
    assert [s["info_hash"] for s in job["segments"]] == [prov["hash"]], job["segments"]

    # the session recorded the attach, and what the server runs
    ev = agent.events("slot.attached")
    assert ev and ev[0]["url"] == url and ev[0]["pid"] == sim.pid
    kept = agent.events("server.provenance")
    assert kept and kept[-1]["hash"] == prov["hash"] and kept[-1]["slot"] == "0"
    r = sgltui("report")
    assert r.returncode == 0, r.stderr
    assert "## What ran" in r.stdout and prov["hash"] in r.stdout, r.stdout
    assert "decided by SGLang: " in r.stdout
    assert f"Servers (see What ran): ext:by-hand `{prov['hash']}` SGLang" in r.stdout

    # detached: it runs on, unwatched, and is listed again; attached again
    r = agent_sgltui(agent, "detach")
    assert r.returncode == 0 and "it runs on" in r.stdout, r.stderr
    assert sim.proc.poll() is None and _slot(agent, "0")["state"] == "stopped"
    _wait(
        lambda: [u for u in agent.status()["unmanaged"] if u["pid"] == sim.pid],
        what="the detached server listed again",
    )
    assert agent_sgltui(agent, "attach", url).returncode == 0

    # the server ends: the slot says so, with how to attach it again
    sim.proc.kill()
    sim.proc.wait(10)
    crashed = _wait(lambda: (s := _slot(agent, "0"))["state"] == "crashed" and s, what="the crash")
    assert "is gone" in crashed["cause"]["summary"]
    assert f"sgltui attach {url}" in crashed["cause"]["fix"]


def test_adopted_server_swaps_with_drain_and_rolls_back_to_itself(agent, sim_server, tmp_path):
    # tokens 20x slower than the other tests' (a request is still in flight at the swap),
    # start-up as fast (--sim-slow-start scales it back)
    sim = sim_server(
        "--max-running-requests", "12", "--chunked-prefill-size", "2048",
        "--sim-slow-start", "0.05", time_scale="0.2",
    )  # fmt: skip
    url = f"http://127.0.0.1:{sim.port}"
    assert agent_sgltui(agent, "attach", url, "--slot", "mine").returncode == 0
    r = agent_sgltui(agent, "adopt", "--slot", "mine", "--name", "handmade")
    assert r.returncode == 0, r.stderr
    path = agent.profiles_dir / "handmade.toml"
    text = path.read_text()
    assert "max-running-requests = 12" in text and "chunked-prefill-size = 2048" in text
    assert 'launcher = "sim"' in text
    slot = _slot(agent, "mine")
    assert slot["profile"] == "handmade" and slot["external"] is None

    # a swap away from it, with its drain: a request in flight on the hand-started process
    # when the swap begins is answered in full before that process gets SIGTERM
    answer: dict = {}

    def long_request() -> None:
        body = {"text": "x", "sampling_params": {"max_new_tokens": 5000, "ignore_eos": True}}
        answer["r"] = httpx.post(url + "/generate", json=body, timeout=60)

    t = threading.Thread(target=long_request)
    t.start()

    def running() -> int:
        loads = httpx.get(url + "/v1/loads", timeout=5).json()["loads"]
        return sum(x.get("num_running_reqs", 0) for x in loads)

    _wait(lambda: running() >= 1, what="the request in flight")
    # ... to a profile that cannot start: rolled back, relaunched from the adopted profile
    bad = agent.write_profile("t-bad", port=sim.port, sim_fail_at_start="oom")
    r = agent_sgltui(agent, "swap", bad, "--slot", "mine", timeout=120)
    t.join(60)
    assert r.returncode != 0 and "rolled back" in (r.stdout + r.stderr), r.stdout + r.stderr
    assert answer["r"].status_code == 200, answer["r"].text
    assert answer["r"].json()["meta_info"]["completion_tokens"] == 5000
    drains = [e for e in agent.events("slot.drain") if e.get("slot") == "mine"]
    assert drains and drains[0]["requests"] >= 1, drains  # it waited for that request
    assert sim.proc.poll() is not None  # the hand-started process was stopped by pid
    slot = _slot(agent, "mine")
    assert slot["state"] == "ready" and slot["profile"] == "handmade", slot
    assert slot["pid"] != sim.pid
    assert httpx.get(url + "/server_info", timeout=5).json()["max_running_requests"] == 12

    # a swap that works
    good = agent.write_profile("t-good")
    r = agent_sgltui(agent, "swap", good, "--slot", "mine", timeout=120)
    assert r.returncode == 0, r.stderr
    assert _slot(agent, "mine")["profile"] == "t-good"
    # a server the agent launched is never listed as one to attach
    assert not [u for u in agent.status()["unmanaged"] if u["port"] == agent.ports["t-good"]]


def test_unusual_flags_round_trip_through_import_from(agent, sim_server, tmp_path):
    flags = (
        "--max-running-requests", "7", "--chunked-prefill-size", "1536",
        "--mem-fraction-static", "0.61", "--schedule-policy", "lpm",
        "--disable-radix-cache", "--served-model-name", "odd",
        "--context-length", "4096",
    )  # fmt: skip
    sim = sim_server(*flags)
    url = f"http://127.0.0.1:{sim.port}"
    out = tmp_path / "odd.toml"
    r = sgltui("profiles", "import", "--from", url, "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "api-key" not in text and "model-path" in text
    before = httpx.get(url + "/server_info", timeout=5).json()
    sim.proc.kill()
    sim.proc.wait(10)
    # the imported profile launched by sgltui runs the same resolved args
    (agent.profiles_dir / "odd.toml").write_text(text)
    r = agent_sgltui(agent, "start", "odd", timeout=120)
    assert r.returncode == 0, r.stderr
    after = httpx.get(url + "/server_info", timeout=5).json()
    from sgltui.core import provenance

    a, b = provenance.server_args(before), provenance.server_args(after)
    diff = [d for d in provenance.differ(a, b) if d[0] not in ("sim_time_scale",)]
    assert not diff, diff
    assert json.loads(json.dumps(after["version"])) == before["version"]


def test_status_without_an_agent_still_lists_a_server_started_by_hand(sim_server):
    sim = sim_server()
    r = sgltui("status")
    assert r.returncode == 3
    assert f"not managed: sim on :{sim.port}, pid {sim.pid}" in r.stdout, r.stdout
    assert "no agent is running" in r.stderr
