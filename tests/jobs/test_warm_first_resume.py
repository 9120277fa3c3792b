"""Warm-first across kill -9s (real agent, real simulator, real runner): the runner killed in the
middle of its warm-first pass, then the agent killed in the middle of the next runner's; every
custom_id is answered exactly once, the held-back items read again from the file."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

from sgltui.client import AgentError
from tests.jobs.batch_input import read_output
from tests.jobs.shared_input import write_shared


def _wait(agent, pred, what: str, timeout: float = 60.0, job: str | None = None) -> dict:
    deadline = time.monotonic() + timeout
    view = None
    while time.monotonic() < deadline:
        try:
            view = agent.call("job_status", job=job)
        except AgentError:
            view = None  # the agent is restarting
        if view is not None and pred(view):
            return view
        time.sleep(0.02)
    raise AssertionError(f"job never reached {what}: {view}\n{agent.agent_log()}")


def _mid_pass(v: dict) -> bool:
    wf = v.get("warm_first") or {}
    return (
        v["state"] == "running" and wf.get("left", 0) > 0 and wf.get("primed", 0) - wf["left"] >= 3
    )


def test_kill9_of_the_runner_and_the_agent_mid_pass_answers_each_custom_id_once(agent, tmp_path):
    # tokens at real time: a pass of 40 at 4 running lasts a few seconds, a window the 20 ms
    # polls of a loaded machine (two test workers on two cores) still see; at a third of real
    # time the new runner's pass came and went between two status reads now and then
    a = agent.write_profile("wf-a", time_scale=1.0, sim_slow_start=0.01)
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_shared(inp, 40, 10, max_tokens=8)
    jid = agent.call("job_run", input=str(inp), output=str(out), concurrency=4)["id"]

    v = _wait(agent, _mid_pass, "the middle of the first pass", job=jid)
    assert v["warm_first"]["primed"] == 40 and v["warm_first"]["passes"] == 1
    runner = v["runner_pid"]
    os.kill(runner, signal.SIGKILL)
    _wait(
        agent,
        lambda v: v["runner_pid"] not in (None, runner) and _mid_pass(v),
        "the new runner's pass",
        job=jid,
    )
    before = agent.call("job_status", job=jid)["runner_pid"]
    agent.kill9()
    # the next agent's runner re-reads what is not in the output and primes on its start
    v = _wait(
        agent,
        lambda v: (
            v["runner_pid"] not in (None, before) and (v.get("warm_first") or {}).get("primed")
        ),
        "the third runner's pass",
        job=jid,
    )
    assert v["warm_first"]["passes"] == 1
    final = _wait(agent, lambda v: v["state"] == "done", "done", timeout=120, job=jid)
    assert final["answered"] == 400 and final["failed"] == 0, final
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert set(counts) == {f"r{i}" for i in range(400)}
    assert [c for c, n in counts.items() if n != 1] == []
