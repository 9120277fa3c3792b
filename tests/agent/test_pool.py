"""A pool of two slots behind the real smg (agent/pools/pools.py, agent/pools/gateway.py) on the simulator:
started with --pool, served under "default", rolled to another profile under streaming load
with no client error, and a job through it that loses nothing when a slot's server and then the
gateway are killed -9."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time

import httpx
import msgspec
import pytest

from sgltui.agent.pools import gateway
from sgltui.client import call_sync
from tests.fixtures.agent import alive
from tests.ports import server_port

pytestmark = pytest.mark.skipif(not gateway.smg_available(), reason="smg not installed")


def _host_toml(agent, pool_port: int) -> None:
    cfg = agent.state_dir.parent / "config" / "sgltui"
    cfg.mkdir(parents=True, exist_ok=True)
    slots = "".join(
        f'[[slot]]\nname = "{n}"\ngpus = [{i}]\nport = {server_port()}\n\n'
        for i, n in enumerate("ab")
    )
    (cfg / "host.toml").write_text(
        "simulated_gpus = 2\n"
        + slots
        + f'[[pool]]\nname = "all"\nslots = ["a", "b"]\nport = {pool_port}\n'
    )


def _pool_call(agent, op, **args):
    res = call_sync(agent.state_dir, op, autostart=False, client_name="test", **args)
    agent._note(res.get("pool") or {})
    return res


def _pool(agent) -> dict:
    return next(p for p in agent.status()["pools"] if p["name"] == "all")


def _wait_workers(agent, statuses, timeout=30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        pool = _pool(agent)
        if [w["gateway_status"] for w in pool["workers"]] == statuses:
            return pool
        assert time.monotonic() < deadline, pool
        time.sleep(0.2)


@pytest.fixture
def pool_agent(agent_handle):
    agent = agent_handle
    port = server_port()
    _host_toml(agent, port)
    agent.endpoint = f"http://127.0.0.1:{port}"
    yield agent
    with contextlib.suppress(Exception):
        pid = _pool(agent)["gateway"]["pid"]
        if pid:
            os.killpg(pid, signal.SIGKILL)  # should the agent's shutdown not have


def test_a_pool_of_two_starts_serves_default_and_rolls_under_streams_with_no_error(pool_agent):
    agent = pool_agent
    a = agent.write_profile("t-a")
    b = agent.write_profile("t-b")
    agent.start()
    res = _pool_call(agent, "start", profile=a, pool="all", wait=True)
    assert [s["state"] for s in res["pool"]["slots"]] == ["ready", "ready"], res
    pool = _wait_workers(agent, ["ready", "ready"])
    assert pool["gateway"]["pid"] and pool["endpoint"] == agent.endpoint
    assert [s["gpus"] for s in agent.status()["slots"]] == [[0], [1]]
    # Started in the same second with one profile, each slot still has its own launch and log
    # (issue 39: they shared one, and each slot read both servers' lines as its own).
    slots = agent.status()["slots"]
    assert len({s["launch_id"] for s in slots}) == 2 and len({s["log_path"] for s in slots}) == 2
    r = httpx.post(
        agent.endpoint + "/v1/completions",
        json={"model": "default", "prompt": "hi", "max_tokens": 4},
        timeout=10,
    )
    assert r.status_code == 200, r.text

    # 8 streaming clients for the whole roll.
    stop = threading.Event()
    outcomes: list[str] = []

    def client() -> None:
        with httpx.Client(timeout=30) as c:
            while not stop.is_set():
                body = {"model": "default", "prompt": "x", "max_tokens": 24, "stream": True}
                try:
                    with c.stream("POST", agent.endpoint + "/v1/completions", json=body) as r:
                        text = "".join(r.iter_text())
                    if r.status_code != 200:
                        outcomes.append(f"HTTP {r.status_code}: {text[:200]}")
                    elif "[DONE]" not in text or "error" in text:
                        outcomes.append(f"truncated: {text[-200:]}")
                    else:
                        outcomes.append("ok")
                except httpx.HTTPError as exc:
                    outcomes.append(f"error: {exc!r}")

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        res = _pool_call(agent, "swap", profile=b, pool="all", wait=True)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    roll = res["pool"]["roll"]
    assert roll["state"] == "done" and roll["done"] == ["a", "b"], roll
    assert [s["profile"] for s in res["pool"]["slots"]] == [b, b]
    bad = [o for o in outcomes if o != "ok"]
    assert outcomes and not bad, bad[:5]
    steps = [(e.get("slot"), e["step"]) for e in agent.events("pool.roll")]
    assert steps[0] == (None, "begin") and steps[-1] == (None, "end")
    assert [s for s in steps if s[1] == "removed"] == [("a", "removed"), ("b", "removed")]
    _wait_workers(agent, ["ready", "ready"])

    from tests.fixtures.cli import agent_sgltui

    r = agent_sgltui(
        agent, "bench", "--pool", "all", "--concurrency", "2", "--requests", "4",
        "--input-len", "8", "--output-len", "4", "--warmup", "0",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = agent_sgltui(agent, "bench", "--pool", "nope", "--requests", "4")
    assert r.returncode == 1 and "no pool 'nope'" in r.stderr
    # The gateway's metrics are on the session's timeline.
    from pathlib import Path

    timeline = Path(agent.status()["agent"]["session_dir"]) / "timeline.jsonl"
    samples = [json.loads(x) for x in timeline.read_text().splitlines() if '"gateways"' in x]
    assert samples and "all" in samples[-1]["gateways"], len(samples)
    assert {w["url"] for w in samples[-1]["gateways"]["all"]["workers"]}


def test_a_pool_of_one_keeps_the_front_on_the_pool_port(agent_handle):
    agent = agent_handle
    cfg = agent.state_dir.parent / "config" / "sgltui"
    cfg.mkdir(parents=True, exist_ok=True)
    port = server_port()
    (cfg / "host.toml").write_text(
        f'[[slot]]\nname = "a"\ngpus = [0]\nport = {server_port()}\n'
        f'[[pool]]\nname = "solo"\nslots = ["a"]\nport = {port}\n'
    )
    name = agent.write_profile("t-a")
    agent.start()
    _pool_call(agent, "start", profile=name, pool="solo", wait=True)
    pool = next(p for p in agent.status()["pools"] if p["name"] == "solo")
    assert pool["gateway"] == {"pid": None, "state": "front"}
    deadline = time.monotonic() + 10
    while True:
        try:
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/completions",
                json={"model": "default", "prompt": "hi", "max_tokens": 2},
                timeout=10,
            )
            if r.status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_slot_that_fails_rolls_back_and_stops_the_roll_the_pool_serving(pool_agent):
    from sgltui.client import AgentError

    agent = pool_agent
    a = agent.write_profile("t-a")
    bad = agent.write_profile("t-oom", sim_fail_at_start="oom")
    agent.start()
    _pool_call(agent, "start", profile=a, pool="all", wait=True)
    _wait_workers(agent, ["ready", "ready"])
    with pytest.raises(AgentError, match="roll stopped at slot a") as err:
        _pool_call(agent, "swap", profile=bad, pool="all", wait=True)
    assert "\n" not in str(err.value)
    # the real cause (the OOM), and no 'mixed' for a pool that serves one profile (issue 35 F7)
    msg = str(err.value)
    assert "t-oom failed on slot a" in msg and "memory" in msg.lower(), msg
    assert "mixed" not in msg and f"serves {a} on every slot" in msg, msg
    pool = _wait_workers(agent, ["ready", "ready"])  # a is back (rolled back), b never left
    assert pool["roll"]["state"] == "stopped" and pool["roll"]["slot"] == "a"
    assert [s["profile"] for s in agent.status()["slots"]] == [a, a]
    r = httpx.post(
        agent.endpoint + "/v1/completions",
        json={"model": "default", "prompt": "hi", "max_tokens": 4},
        timeout=10,
    )
    assert r.status_code == 200


def test_a_bad_host_file_is_refused_before_the_agent_starts(agent_handle):
    agent = agent_handle
    cfg = agent.state_dir.parent / "config" / "sgltui"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "host.toml").write_text(
        'simulated_gpus = 2\n[[slot]]\nname = "a"\ngpus = [0]\n'
        '[[pool]]\nname = "all"\nslots = ["a", "z"]\nport = 1\n'
    )
    from tests.fixtures.cli import sgltui

    r = sgltui("--profiles", str(agent.profiles_dir), "agent", "start")
    assert r.returncode != 0 and "unknown slot 'z'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_job_through_the_pool_survives_kill_9_of_a_slot_and_of_the_gateway(pool_agent, tmp_path):
    agent = pool_agent
    a = agent.write_profile("t-a")
    agent.start()
    _pool_call(agent, "start", profile=a, pool="all", wait=True)
    _wait_workers(agent, ["ready", "ready"])
    n = 1500
    inp = tmp_path / "in.jsonl"
    with inp.open("w") as f:
        for i in range(n):
            body = {"model": "default", "prompt": f"p{i}", "max_tokens": 16}
            f.write(
                json.dumps(
                    {"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}
                )
                + "\n"
            )
    out = tmp_path / "out.jsonl"
    job = agent.call("job_run", input=str(inp), output=str(out), pool="all", concurrency=8)
    jid = job["id"] if "id" in job else job["job"]["id"]

    def answered() -> int:
        view = agent.call("job_status", job=jid)
        return int(view.get("answered") or 0), view

    def wait_answered(k: int, timeout=60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            got, view = answered()
            if got >= k or view.get("state") in ("done", "failed", "cancelled"):
                return view
            assert time.monotonic() < deadline, view
            time.sleep(0.1)

    wait_answered(200)
    pid_a = agent.slot("a")["pid"]
    os.killpg(pid_a, signal.SIGKILL)  # a slot's server dies under the job
    wait_answered(600)
    gw_pid = _pool(agent)["gateway"]["pid"]
    os.killpg(gw_pid, signal.SIGKILL)  # then the gateway
    view = wait_answered(n, timeout=120)
    deadline = time.monotonic() + 60
    while view.get("state") != "done":
        assert time.monotonic() < deadline, view
        time.sleep(0.2)
        view = agent.call("job_status", job=jid)
    ids = [json.loads(line)["custom_id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(f"r{i}" for i in range(n)), (len(ids), len(set(ids)))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r.get("error") is None for r in rows), [r for r in rows if r.get("error")][:3]
    pool = _pool(agent)
    assert pool["gateway"]["pid"] not in (None, gw_pid)
    from tests.fixtures.cli import agent_sgltui

    # The summary names where it was sent: the pool, not the slot the request record carries.
    for argv in (("job", "status", jid), ("job", "list")):
        r = agent_sgltui(agent, *argv)
        assert "pool all" in r.stdout and "slot " not in r.stdout, r.stdout


def test_demo_stop_stops_the_demo_on_every_slot_of_the_pool(pool_agent):
    """`sgltui demo --stop` after `demo --gpus 2`: each slot's demo server stops, not only the
    first slot's (it stopped slot '0' alone, which a host.toml pool does not have)."""
    from tests.fixtures.cli import agent_sgltui

    agent = pool_agent
    demo = agent.write_profile("demo-fast")
    agent.start()
    _pool_call(agent, "start", profile=demo, pool="all", wait=True)
    assert [s["state"] for s in agent.status()["slots"]] == ["ready", "ready"]
    r = agent_sgltui(agent, "demo", "--stop")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(slot a)" in r.stdout and "(slot b)" in r.stdout, r.stdout
    assert [s["state"] for s in agent.status()["slots"]] == ["stopped", "stopped"]
    # the user's host.toml: the agent and the pool's gateway are theirs and stay
    assert "demo's agent" not in r.stdout and _pool(agent)["gateway"]["pid"]


def test_demo_stop_ends_the_demos_own_agent_its_standby_and_gateway(pool_agent, monkeypatch):
    """Issue 51 item 11: `demo --stop` after `demo --gpus 2` and a standby left the standby
    (its weights pinned in host RAM) and the pool's gateway running. The demo's standbys stop,
    and an agent on the demo's own host.toml ends with its gateway."""
    from tests.fixtures.cli import agent_sgltui

    agent = pool_agent
    user_toml = agent.state_dir.parent / "config" / "sgltui" / "host.toml"
    demo_toml = agent.state_dir / "demo-host-2.toml"  # where `sgltui demo --gpus 2` writes it
    agent.state_dir.mkdir(parents=True, exist_ok=True)
    demo_toml.write_text(user_toml.read_text())
    user_toml.unlink()
    monkeypatch.setenv("SGLTUI_HOST_FILE", str(demo_toml))
    demo, warm = agent.write_profile("demo-fast"), agent.write_profile("demo-warm")
    agent.start()
    _pool_call(agent, "start", profile=demo, pool="all", wait=True)
    res = agent.call("standby_add", profile=warm, slot="a", wait=True)
    assert res["result"]["ok"], agent.agent_log()[-1500:]
    gw_pid = _wait_workers(agent, ["ready", "ready"])["gateway"]["pid"]
    sleeper = next(s for s in agent.slot("a")["standbys"] if s["profile"] == warm)["pid"]
    r = agent_sgltui(agent, "demo", "--stop")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"stopped the standby {warm} (slot a)" in r.stdout, r.stdout
    assert "stopped the demo's agent" in r.stdout
    for pid in (gw_pid, sleeper, *agent.agent_pids):
        assert not alive(pid), (pid, r.stdout)


def test_kill_9_of_the_agent_the_next_one_readopts_the_gateway_and_the_pool_answers(pool_agent):
    """The agent dies (kill -9), its keeper starts another: that one takes over the running smg
    (the same process, found by its recorded pid and start time) instead of ending it, so
    clients of the pool see no error; `agent stop --stop-servers` then leaves no smg."""
    from tests.fixtures.cli import agent_sgltui

    agent = pool_agent
    a = agent.write_profile("t-a")
    agent.start()
    _pool_call(agent, "start", profile=a, pool="all", wait=True)
    gw_pid = _wait_workers(agent, ["ready", "ready"])["gateway"]["pid"]

    stop = threading.Event()
    outcomes: list[str] = []

    def client() -> None:
        with httpx.Client(timeout=10) as c:
            while not stop.is_set():
                body = {"model": "default", "prompt": "x", "max_tokens": 4}
                try:
                    r = c.post(agent.endpoint + "/v1/completions", json=body)
                    outcomes.append("ok" if r.status_code == 200 else f"HTTP {r.status_code}")
                except httpx.HTTPError as exc:
                    outcomes.append(f"error: {exc!r}")

    thread = threading.Thread(target=client)
    thread.start()
    try:
        new = agent.kill9()
        deadline = time.monotonic() + 30
        while (pool := _pool(agent))["gateway"] != {"pid": gw_pid, "state": "running"}:
            assert time.monotonic() < deadline, (pool, agent.agent_log())
            time.sleep(0.1)
        _wait_workers(agent, ["ready", "ready"])
        seen = len(outcomes)
        while len(outcomes) < seen + 5:  # served on, under the new agent
            assert thread.is_alive()
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=30)
    bad = [o for o in outcomes if o != "ok"]
    assert not bad, (len(outcomes), bad[:5])
    assert agent.status()["agent"]["pid"] == new
    assert f"re-adopted smg pid {gw_pid}" in agent.agent_log()

    r = agent_sgltui(agent, "agent", "stop", "--stop-servers")
    assert r.returncode == 0, r.stderr
    assert not alive(gw_pid)


def test_a_pool_jobs_segments_follow_what_the_pool_runs_across_a_roll(pool_agent, tmp_path):
    """A job through the pool is spread over its slots, so its segments are what the pool's
    routable slots run: t-a, then (mid-roll) both, then t-b; they add up to the job. They were
    one slot's launch, so a rolled pool's job still read t-a to its end."""
    from tests.fixtures.cli import agent_sgltui

    agent = pool_agent
    slow = {
        "time_scale": 1.0,
        "sim_slow_start": 0.01,
    }  # tokens in real time: the job outlasts the roll
    a, b = agent.write_profile("t-a", **slow), agent.write_profile("t-b", **slow)
    agent.start()
    _pool_call(agent, "start", profile=a, pool="all", wait=True)
    _wait_workers(agent, ["ready", "ready"])
    n = 120
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    with inp.open("w") as f:
        for i in range(n):
            body = {"model": "default", "prompt": f"p{i}", "max_tokens": 128}
            row = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}
            f.write(json.dumps(row) + "\n")
    job = agent.call("job_run", input=str(inp), output=str(out), pool="all", concurrency=2)
    jid = job["id"] if "id" in job else job["job"]["id"]

    def view() -> dict:
        return agent.call("job_status", job=jid)

    deadline = time.monotonic() + 60
    while int(view().get("answered") or 0) < 2:
        assert time.monotonic() < deadline, view()
        time.sleep(0.1)
    res = _pool_call(agent, "swap", profile=b, pool="all", wait=True)
    assert res["pool"]["roll"]["state"] == "done", res
    v = view()
    assert v["state"] == "running" and int(v["answered"]) < n, v  # the roll crossed the job
    agent.call("job_set", job=jid, concurrency=64)  # the rest, quickly
    deadline = time.monotonic() + 120
    while (v := view())["state"] != "done":
        assert v["state"] in ("running", "checking", "waiting"), v
        assert time.monotonic() < deadline, v
        time.sleep(0.2)
    segs = v["segments"]
    profiles = [s["profile"] for s in segs]
    assert profiles[0] == a and profiles[-1] == b, segs
    assert set(profiles) <= {a, b, f"mixed: {a}, {b}"}, segs
    assert sum(s["completions"] for s in segs) == n, segs
    assert len({s["launch_id"] for s in segs}) == len(segs), segs  # each kept apart
    r = agent_sgltui(agent, "job", "status", jid)
    assert f"segment {b} (pool all #" in r.stdout, r.stdout


def test_a_rolling_swap_wakes_each_slots_standby_under_streams(pool_agent):
    """issue 34: `standby add --pool` keeps a profile warm on every slot; the roll to it is
    warm on each, and back again, with no client error (issue 45: the add too)."""
    agent = pool_agent
    a = agent.write_profile("t-a")
    b = agent.write_profile("t-b")
    agent.start()
    _pool_call(agent, "start", profile=a, pool="all", wait=True)
    _wait_workers(agent, ["ready", "ready"])
    stop = threading.Event()
    outcomes: list[str] = []

    def client() -> None:
        with httpx.Client(timeout=30) as c:
            while not stop.is_set():
                body = {"model": "default", "prompt": "x", "max_tokens": 16, "stream": True}
                try:
                    with c.stream("POST", agent.endpoint + "/v1/completions", json=body) as r:
                        text = "".join(r.iter_text())
                    ok = r.status_code == 200 and "[DONE]" in text and "error" not in text
                    outcomes.append("ok" if ok else f"{r.status_code}: {text[-200:]}")
                except httpx.HTTPError as exc:
                    outcomes.append(f"error: {exc!r}")

    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        # The add sleeps one slot's server at a time, its worker out of smg first (the DELETE
        # awaited) and back (smg routing to it) before the next: a ready worker at every moment.
        res = _pool_call(agent, "standby_add", profile=b, pool="all", wait=True)
        assert res["result"]["ok"], res["result"]
        slots = agent.status()["slots"]
        assert [[w["profile"] for w in s["standbys"]] for s in slots] == [[b], [b]]
        _wait_workers(agent, ["ready", "ready"])
        for to in (b, a):
            res = _pool_call(agent, "swap", profile=to, pool="all", wait=True)
            assert res["pool"]["roll"]["state"] == "done", res["pool"]["roll"]
            slots = agent.status()["slots"]
            assert [s["profile"] for s in slots] == [to, to]
            assert [s["last_swap"]["kind"] for s in slots] == ["warm", "warm"]
            _wait_workers(agent, ["ready", "ready"])
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    bad = [o for o in outcomes if o != "ok"]
    assert outcomes and not bad, bad[:5]


def test_a_job_through_the_pool_targets_the_pool_in_status_record_pane_and_report(
    pool_agent, tmp_path
):
    """Issue 36 item 5: a job through a pool was filed under the pool's first slot; its target
    (a slot or a pool) is first-class: `sgltui status --json`, `sgltui job status --json`, its
    record on disk, the Jobs pane and `sgltui report` all say `pool all`."""
    from sgltui.protocol import JobView
    from sgltui.tui.widgets.jobs import render_job
    from tests.fixtures.cli import agent_sgltui

    agent = pool_agent
    a = agent.write_profile("t-a")
    agent.start()
    _pool_call(agent, "start", profile=a, pool="all", wait=True)
    _wait_workers(agent, ["ready", "ready"])
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    with inp.open("w") as f:
        for i in range(40):
            body = {"model": "default", "prompt": f"p{i}", "max_tokens": 8}
            row = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}
            f.write(json.dumps(row) + "\n")
    job = agent.call("job_run", input=str(inp), output=str(out), pool="all", concurrency=4)
    jid = job["id"] if "id" in job else job["job"]["id"]
    deadline = time.monotonic() + 60
    while (v := agent.call("job_status", job=jid))["state"] != "done":
        assert time.monotonic() < deadline, v
        time.sleep(0.2)
    pool = {"kind": "pool", "name": "all"}

    r = agent_sgltui(agent, "status", "--json")
    assert r.returncode == 0, r.stderr
    (shown,) = [j for j in json.loads(r.stdout)["jobs"] if j["id"] == jid]
    assert shown["target"] == pool, shown
    r = agent_sgltui(agent, "job", "status", jid, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["target"] == pool, r.stdout
    record = json.loads((agent.state_dir / "jobs" / f"{jid}.json").read_text())
    assert record["target"] == pool, record  # persisted: a restarted agent keeps it
    fields = {k: v[k] for k in JobView.__struct_fields__ if k in v}
    assert "pool all" in render_job(msgspec.convert(fields, JobView))  # the Jobs pane

    session = agent.status()["agent"]["session_dir"]
    r = agent_sgltui(agent, "report", session, "--format", "json")
    assert r.returncode == 0, r.stderr
    (rep,) = [j for j in json.loads(r.stdout)["jobs"] if j["job"] == jid]
    assert rep["target"] == "pool all", rep
    r = agent_sgltui(agent, "report", session)
    assert r.returncode == 0, r.stderr
    assert f"({jid}, pool all): done" in r.stdout, r.stdout


def test_the_demo_load_reaches_a_pool_of_one_behind_the_front(agent_handle):
    """`sgltui demo`'s host: slot 'a' in pool 'all' behind the agent's front (one member, no
    gateway). The demo load looked for a slot named '0' and a gateway's pid, found neither and
    idled: the demo showed 0 tok/s while its top bar said the load ran."""
    from tests.fixtures.sim import streaming_total

    agent = agent_handle
    cfg = agent.state_dir.parent / "config" / "sgltui"
    cfg.mkdir(parents=True, exist_ok=True)
    port, server = server_port(), server_port()
    (cfg / "host.toml").write_text(
        f'[[slot]]\nname = "a"\ngpus = [0]\nport = {server}\n'
        f'[[pool]]\nname = "all"\nslots = ["a"]\nport = {port}\n'
    )
    name = agent.write_profile("t-a", enable_metrics=True)
    agent.start()
    _pool_call(agent, "start", profile=name, pool="all", wait=True)
    assert _pool(agent)["gateway"]["state"] == "front"
    assert call_sync(agent.state_dir, "demo_load", autostart=False, on=True)["on"] is True
    url = f"http://127.0.0.1:{server}"
    deadline = time.monotonic() + 30
    while streaming_total(url, "sglang:num_requests_total") < 3:
        assert time.monotonic() < deadline, "the demo load sent nothing to the pool's server"
        time.sleep(0.2)
    assert call_sync(agent.state_dir, "demo_load", autostart=False, on=False)["on"] is False
