"""Commands on one slot racing each other (issue 29, F1): `stop` and `restart` (and `start`) sent
at the same moment must be serialized whatever their order. Before the fix a stop that cancelled
a restart mid-stop left the slot in `stopping` for good (every later command failed with
LifecycleError), and a start in that window spawned a server the slot never tracked."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import os
import signal
import threading
import urllib.request

import psutil

from sgltui.client import AgentError, call_sync

TERMINAL = ("ready", "stopped", "failed", "crashed")


def _call(agent, op: str, **args) -> str:
    try:
        res = call_sync(
            agent.state_dir,
            op,
            autostart=False,
            profiles_dirs=[agent.profiles_dir],
            client_name=f"race-{op}",
            wait=True,
            **args,
        )
    except AgentError as exc:  # a refusal ("busy with ...") is a fine outcome of a race
        return f"refused: {exc}"
    agent._note(res)
    return res["slot"]["state"]


def _long_request(port: int) -> None:
    body = json.dumps(
        {"model": "m", "prompt": "hi", "max_tokens": 100000, "ignore_eos": True, "stream": True}
    ).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"}
    )
    with (
        contextlib.suppress(OSError, http.client.HTTPException),
        urllib.request.urlopen(req, timeout=30) as r,
    ):
        while r.read(4096):
            pass


def _load(port: int) -> int:
    with (
        contextlib.suppress(OSError, ValueError),
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/loads", timeout=2) as r,
    ):
        loads = json.loads(r.read()).get("loads", [])
        return sum(
            int(x.get("num_running_reqs", 0)) + int(x.get("num_waiting_reqs", 0)) for x in loads
        )
    return 0


def _sims_on(port: int) -> list[int]:
    """Simulator processes serving `port` (a server the slot does not track shows up here)."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if "sgltui.sim" in cmd and str(port) in cmd:
            out.append(p.pid)
    return out


def _check(agent, name: str, port: int, what: object) -> None:
    """The slot settles in ready or stopped, runs nothing it does not track, takes commands."""
    slot = agent.wait_state(TERMINAL, timeout=60)
    assert slot["state"] in ("ready", "stopped"), (what, slot, agent.agent_log())
    tracked = set(slot["pids"]) if slot["state"] == "ready" else set()
    stray = [p for p in _sims_on(port) if p not in tracked]
    assert stray == [], (what, slot)
    if slot["state"] != "ready":  # bring it back for the next round
        res = agent.call("start", profile=name, wait=True)
        assert res["slot"]["state"] == "ready", res


def test_stop_during_a_restarts_stop_leaves_the_slot_stopped(agent):
    # The restart is caught while it stops the old server: the window where F1 stranded it.
    name = agent.write_profile("t-a")
    port = agent.ports["t-a"]
    agent.call("start", profile=name, wait=True)
    # A request in flight keeps the server from exiting on SIGTERM (it drains it): the forced
    # restart stays in `stopping` until the SIGKILL after the grace (2 s here).
    threading.Thread(target=_long_request, args=(port,), daemon=True).start()
    for _ in range(200):
        if _load(port):
            break
    agent.call("restart", drain="force")
    slot = agent.slot()
    for _ in range(200):
        slot = agent.slot()
        if slot["state"] == "stopping":
            break
    assert slot["state"] == "stopping", slot
    res = agent.call("stop", wait=True)
    assert res["slot"]["state"] == "stopped", (res, agent.agent_log())
    _check(agent, name, port, "stop during restart")
    agent.call("stop", wait=True)
    assert _sims_on(port) == []


def test_stop_restart_start_racing_never_strand_the_slot(agent):
    name = agent.write_profile("t-a")
    port = agent.ports["t-a"]
    agent.call("start", profile=name, wait=True)
    pool = concurrent.futures.ThreadPoolExecutor(3)
    try:
        for i in range(3):
            ops = [("stop", {}), ("restart", {})] + ([("start", {"profile": name})] if i else [])
            futures = [pool.submit(_call, agent, op, **a) for op, a in ops]
            outcomes = [f.result(timeout=120) for f in futures]
            _check(agent, name, port, (i, outcomes))
        assert agent.call("stop", wait=True)["slot"]["state"] == "stopped"
        assert _sims_on(port) == []
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        for pid in _sims_on(port):
            os.kill(pid, signal.SIGKILL)
