"""Issue 29's done-when: a 5,000-request job survives a kill -9 of the agent and, separately, of
its server, ending with every custom_id exactly once and no command typed.

Nothing here starts an agent or a server after the kill: the test only asks (autostart off).
The figures (time to come back) are printed for the record (`pytest -s`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter

from sgltui.client import AgentError
from tests.jobs.batch_input import read_output, write_input

N = 5000


def _until(pred, what: str, agent, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        with contextlib.suppress(AgentError):
            last = pred()
            if last:
                return last
        time.sleep(0.02)
    raise AssertionError(f"never {what}: {last}\n{agent.agent_log()}")


def _start_job(agent, tmp_path):
    a = agent.write_profile("sv-a")
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_input(inp, N, max_tokens=8)
    agent.call("job_run", input=str(inp), output=str(out), concurrency=32)
    _until(lambda: agent.call("job_status")["answered"] >= 1000, "1000 answered", agent)
    return inp, out, ids


def _finish(agent, inp, out, ids) -> None:
    final = _until(
        lambda: (v := agent.call("job_status"))["state"] == "done" and v, "done", agent, 180
    )
    assert final["answered"] == N and final["failed"] == 0, final
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert set(counts) == set(ids) and [c for c, n in counts.items() if n != 1] == []
    r = subprocess.run(
        [sys.executable, "-m", "sgltui", "job", "verify", str(inp), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_5000_request_job_survives_a_kill9_of_the_agent(agent, tmp_path):
    inp, out, ids = _start_job(agent, tmp_path)
    server = agent.slot()["pid"]
    t0 = time.monotonic()
    agent.kill9()
    back_s = time.monotonic() - t0
    # By itself, no command typed; the 5 s budget is bench/bench_comeback.py's (figures there).
    assert back_s < 20, back_s
    before = agent.call("job_status")["answered"]
    _until(lambda: agent.call("job_status")["answered"] > before, "progress", agent, 30)
    resumed_s = time.monotonic() - t0
    assert agent.slot()["pid"] == server  # the server was re-adopted, not relaunched
    _finish(agent, inp, out, ids)
    assert len(agent.events("job.resume_after_restart")) == 1  # resumed exactly once
    print(f"\nagent kill -9: serving again in {back_s:.2f}s, job answering in {resumed_s:.2f}s")


def test_a_5000_request_job_survives_a_kill9_of_its_server(agent, tmp_path):
    inp, out, ids = _start_job(agent, tmp_path)
    old = agent.slot()["pid"]
    os.killpg(os.getpgid(old), signal.SIGKILL)
    t0 = time.monotonic()
    _until(
        lambda: (s := agent.slot())["state"] == "ready" and s["pid"] != old,
        "relaunched",
        agent,
        60,
    )
    ready_s = time.monotonic() - t0
    before = agent.call("job_status")["answered"]
    _until(lambda: agent.call("job_status")["answered"] > before, "progress", agent, 30)
    resumed_s = time.monotonic() - t0
    _finish(agent, inp, out, ids)
    print(f"\nserver kill -9: ready again in {ready_s:.2f}s, job answering in {resumed_s:.2f}s")
