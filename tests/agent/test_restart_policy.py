"""A server that dies under a batch job is launched again by itself (issue 29, item 2).

Real agent, real simulator killed with SIGKILL, real job: the relaunch comes with no command
typed, the job goes on, and the third crash in 10 minutes gives up and says so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter

from sgltui.client import AgentError
from tests.fixtures.cli import agent_sgltui as sgltui
from tests.jobs.batch_input import read_output, write_input


def _wait(pred, what: str, agent, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        with contextlib.suppress(AgentError):
            last = pred()
            if last:
                return last
        time.sleep(0.05)
    raise AssertionError(f"never {what}: {last}\n{agent.agent_log()}")


def _kill_server(agent) -> int:
    slot = agent.slot()
    assert slot["state"] == "ready", slot
    os.killpg(os.getpgid(slot["pid"]), signal.SIGKILL)
    return slot["pid"]


def _relaunched(agent, old_pid: int):
    def check():
        s = agent.slot()
        return s if s["state"] == "ready" and s["pid"] != old_pid and not s["busy"] else None

    return check


def test_a_crashed_server_under_a_job_is_relaunched_then_the_policy_gives_up(agent, tmp_path):
    a = agent.write_profile("rp-a")
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_input(inp, 4000, max_tokens=8)
    agent.call("job_run", input=str(inp), output=str(out), concurrency=16)
    _wait(lambda: agent.call("job_status")["answered"] >= 200, "200 answered", agent)

    # crash 1: relaunched with what ran, at once (1 s back-off), and the job goes on
    old = _kill_server(agent)
    t0 = time.monotonic()
    slot = _wait(_relaunched(agent, old), "relaunched after crash 1", agent)
    back_s = time.monotonic() - t0
    assert slot["profile"] == "rp-a" and back_s < 30, (slot, back_s)
    assert slot["restart"].startswith(
        "crashed (killed by SIGKILL); relaunched by the restart policy"
    ), slot
    ev = agent.events("slot.restart")
    assert [e["crash"] for e in ev] == [1] and not ev[0]["gave_up"], ev
    before = agent.call("job_status")["answered"]
    _wait(lambda: agent.call("job_status")["answered"] > before + 100, "progress", agent)

    # crash 2: relaunched after 5 s
    old = _kill_server(agent)
    _wait(_relaunched(agent, old), "relaunched after crash 2", agent)

    # crash 3 within 10 minutes: the policy gives up and says so
    _kill_server(agent)
    slot = _wait(
        lambda: (s := agent.slot())["state"] == "crashed" and s["restart"] and s, "crashed", agent
    )
    slot = _wait(
        lambda: "gave up" in ((s := agent.slot())["restart"] or "") and s, "gave up", agent
    )
    assert slot["restart"].startswith("gave up restarting: 3 crashes in 10 minutes"), slot
    assert agent.events("slot.restart")[-1]["gave_up"] is True
    time.sleep(6)  # longer than any back-off: nothing relaunches it
    assert agent.slot()["state"] == "crashed"
    r = sgltui(agent, "status")
    assert "restart: gave up restarting: 3 crashes in 10 minutes" in r.stdout, r.stdout
    assert agent.call("job_status")["state"] == "waiting"

    # a person's restart: the job finishes, every custom_id once
    agent.call("restart", wait=True)
    final = _wait(
        lambda: (v := agent.call("job_status"))["state"] == "done" and v, "done", agent, 120
    )
    assert final["answered"] == 4000 and final["failed"] == 0, final
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert set(counts) == set(ids) and max(counts.values()) == 1
