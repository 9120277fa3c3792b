"""Batch jobs in the real agent against the real simulator: swaps, kill -9, exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sgltui.client import AgentError
from tests.jobs.batch_input import read_output, write_input

SLOW_TOKENS = {"time_scale": 1.0, "sim_slow_start": 0.01}  # start-up as at 0.01, tokens real-time


def _wait_job(agent, pred, what: str, timeout: float = 60.0, job: str | None = None) -> dict:
    deadline = time.monotonic() + timeout
    view = None
    while time.monotonic() < deadline:
        try:
            view = agent.call("job_status", job=job)
        except AgentError:
            view = None  # the agent is restarting
        if view is not None and pred(view):
            return view
        time.sleep(0.1)
    raise AssertionError(f"job never reached {what}: {view}\n{agent.agent_log()}")


def _verify_cli(inp: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sgltui", "job", "verify", str(inp), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.timeout(300)  # its last wait allows 240 s for 3,000 answers on a slow machine
def test_two_swaps_and_kill9_every_custom_id_answered_once(agent, tmp_path):
    # Real-time tokens with a fast start: the job must still be running at every kill and swap
    # below. At the fixture's 0.01 time scale the simulator answered all 3,000 in about 2 s and
    # the job was done before the restarted agent could show progress (a CI failure).
    a = agent.write_profile("t-a", **SLOW_TOKENS)
    b = agent.write_profile("t-b", **SLOW_TOKENS)
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "batch.jsonl", tmp_path / "answers.jsonl"
    ids = write_input(inp, 3000, max_tokens=24)

    view = agent.call("job_run", input=str(inp), output=str(out), concurrency=32, name="big")
    assert view["total"] == 3000 and view["answered"] == 0
    jid = view["id"]

    # swap 1 (drain: in-flight requests finish on the old server)
    _wait_job(agent, lambda v: v["answered"] >= 400, "400 answered")
    res = agent.call("swap", profile=b, wait=True)
    assert res["slot"]["state"] == "ready" and res["slot"]["profile"] == b, res
    _wait_job(
        agent,
        lambda v: any(s["profile"] == b and s["completions"] > 0 for s in v["segments"]),
        "answers from the new server",
    )

    # kill -9 of the agent mid-job; a new agent resumes the job from the output file
    old_pid = agent.pid
    before = agent.call("job_status")["answered"]
    os.kill(old_pid, signal.SIGKILL)
    agent.start()
    assert agent.pid != old_pid
    _wait_job(
        agent,
        lambda v: v["state"] == "running" and v["answered"] > before + 200,
        "progress after the restart",
        job=jid,
    )

    # kill -9 of the runner itself: the agent starts another that resumes
    runner = agent.call("job_status", job=jid)["runner_pid"]
    os.kill(runner, signal.SIGKILL)
    _wait_job(
        agent,
        lambda v: v["runner_pid"] not in (None, runner) and v["state"] == "running",
        "a new runner",
        job=jid,
    )

    # swap 2, forced: in-flight requests are cancelled and sent again on the new server
    res = agent.call("swap", profile=a, wait=True, drain="force")
    assert res["slot"]["state"] == "ready" and res["slot"]["profile"] == a, res

    final = _wait_job(agent, lambda v: v["state"] == "done", "done", timeout=240, job=jid)
    assert final["answered"] == 3000 and final["failed"] == 0, final

    # the test's own reading of the output: each custom_id exactly once, each a 200
    lines = read_output(out)
    counts = Counter(line["custom_id"] for line in lines)
    assert set(counts) == set(ids)
    assert [c for c, n in counts.items() if n != 1] == []
    assert all(line["response"]["status_code"] == 200 and line["error"] is None for line in lines)
    assert all(line["response"]["body"]["choices"] for line in lines)
    assert read_output(tmp_path / "answers.errors.jsonl") == []
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert not (tmp_path / "answers.jsonl.lock").exists()  # a finished job leaves no lock file

    verdict = _verify_cli(inp, out)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert "3,000 answered" in verdict.stdout

    # what the session log says: both swaps held and released the job; segments per profile
    holds = agent.events("job.hold")
    assert len(holds) >= 1  # the first swap was in the first agent's session
    profiles = [s["profile"] for s in final["segments"]]
    assert b in profiles and a in profiles

    # the report: the job's segments per profile, their completions adding up to the job
    session = agent.status()["agent"]["session_dir"]
    rep = subprocess.run(
        [sys.executable, "-m", "sgltui", "report", session, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rep.returncode == 0, rep.stderr
    (job,) = [j for j in json.loads(rep.stdout)["jobs"] if j["job"] == jid]
    assert job["state"] == "done" and job["answered"] == 3000
    segs = job["segments"]
    assert {x["profile"] for x in segs} >= {a, b}
    assert sum(x["completions"] for x in segs) == 3000, (segs, final["segments"])
    assert all(x["tok_s"] and x["tok_s"] > 0 for x in segs if x["completions"])


def test_bad_input_is_one_error_and_nothing_is_written(agent, tmp_path):
    a = agent.write_profile("t-a")
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "bad.jsonl", tmp_path / "bad.out.jsonl"
    write_input(inp, 50)
    lines = inp.read_text().splitlines()
    lines[30] = lines[3]  # a duplicate custom_id on line 31
    inp.write_text("\n".join(lines) + "\n")
    with pytest.raises(AgentError) as err:
        agent.call("job_run", input=str(inp), output=str(out))
    msg = str(err.value)
    assert ":31:" in msg and "duplicate custom_id" in msg and "req-000003" in msg
    assert not out.exists()
    assert agent.call("job_list") == []
    time.sleep(0.5)  # the refused runner's exit is handled too
    assert list((agent.state_dir / "jobs").glob("*.json")) == []  # no record to resume

    cli = subprocess.run(
        [sys.executable, "-m", "sgltui", "job", "run", str(inp), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 1
    assert cli.stderr.count("\n") == 1 and "duplicate custom_id" in cli.stderr
    assert not out.exists()


def test_final_failures_go_to_the_errors_file_and_verify_says_so(agent, tmp_path):
    a = agent.write_profile("t-a")
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "mixed.jsonl", tmp_path / "mixed.out.jsonl"
    write_input(inp, 40, bad=(5, 17))
    deadline = time.monotonic() + 30
    while not (agent.slot().get("capacity") or {}).get("max_running_requests"):
        assert time.monotonic() < deadline, "no capacity card"
        time.sleep(0.1)
    mrr = agent.slot()["capacity"]["max_running_requests"]
    view = agent.call("job_run", input=str(inp), output=str(out))  # concurrency auto
    # auto: no bench of this profile yet, so the server's effective max_running_requests
    assert view["concurrency_mode"] == "auto" and view["concurrency"] == mrr
    final = _wait_job(agent, lambda v: v["state"] == "done", "done", job=view["id"])
    assert final["answered"] == 38 and final["failed"] == 2
    errors = read_output(tmp_path / "mixed.out.errors.jsonl")
    assert sorted(e["custom_id"] for e in errors) == ["req-000005", "req-000017"]
    assert all(e["response"]["status_code"] == 400 for e in errors)
    verdict = _verify_cli(inp, out)
    assert verdict.returncode == 1
    assert "2 failed" in verdict.stdout and "req-000005" in verdict.stdout


def test_pinned_job_makes_a_swap_ask_first(agent, tmp_path):
    # Tokens 10x slower than the default, start-up as fast: at the default, 2,000 answers of 256
    # tokens took a few seconds, and the job could end before the pause below found it running.
    # The test cancels it: the slower tokens cost no time.
    slow = {"time_scale": 0.1, "sim_slow_start": 0.1}
    a, b = agent.write_profile("t-a", **slow), agent.write_profile("t-b", **slow)
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "p.jsonl", tmp_path / "p.out.jsonl"
    write_input(inp, 2000, max_tokens=256)  # long answers: the job outlasts the swap below
    view = agent.call("job_run", input=str(inp), output=str(out), concurrency=8, pinned=True)
    with pytest.raises(AgentError) as err:
        agent.call("swap", profile=b, wait=True)
    assert "pinned" in str(err.value) and "--yes" in str(err.value)
    assert agent.slot()["profile"] == a
    res = agent.call("swap", profile=b, wait=True, confirm=True)
    assert res["slot"]["profile"] == b
    # pause and live concurrency from the CLI ops
    paused = agent.call("job_pause", job=view["id"])
    assert paused["state"] == "paused"
    _wait_job(agent, lambda v: v["quiet"], "nothing in flight while paused", job=view["id"])
    time.sleep(0.7)  # a progress line after the pause
    n = agent.call("job_status", job=view["id"])["answered"]
    time.sleep(0.5)
    assert agent.call("job_status", job=view["id"])["answered"] == n
    agent.call("job_set", job=view["id"], concurrency=3)
    agent.call("job_resume", job=view["id"])
    _wait_job(
        agent,
        lambda v: v["state"] == "running" and v["in_flight"] <= 3 and v["answered"] > n,
        "running at 3",
        job=view["id"],
    )
    cancelled = agent.call("job_cancel", job=view["id"])
    assert cancelled["state"] == "cancelled"
    lines = read_output(out)
    assert len(lines) == len({line["custom_id"] for line in lines})
    st = agent.status()
    assert [j["state"] for j in st["jobs"]] == ["cancelled"]
    assert json.dumps(st)  # status --json carries the job


def test_a_stop_holds_the_job_and_a_start_resumes_it(agent, tmp_path):
    a = agent.write_profile("t-a")
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "s.jsonl", tmp_path / "s.out.jsonl"
    # Long answers at a low concurrency: at this time scale 600 short ones took under a second,
    # and a stop that came after the last answer found a job already done (CI saw it).
    write_input(inp, 600, max_tokens=256)
    view = agent.call("job_run", input=str(inp), output=str(out), concurrency=2)
    _wait_job(agent, lambda v: v["answered"] >= 50, "50 answered", job=view["id"])
    agent.call("stop", wait=True)
    held = _wait_job(agent, lambda v: v["state"] in ("waiting", "done") and v["quiet"], "waiting",
                     job=view["id"])  # fmt: skip
    assert held["state"] == "waiting", f"the job ended before the stop held it: {held}"
    assert held["failed"] == 0 and held["hold"] is None
    agent.call("start", profile=a, wait=True)
    final = _wait_job(agent, lambda v: v["state"] == "done", "done", job=view["id"])
    assert final["answered"] == 600 and final["failed"] == 0
    assert {x["launch_id"] for x in final["segments"]} == {
        e["launch_id"] for e in agent.events("launch")
    }
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert len(counts) == 600 and set(counts.values()) == {1}


def test_a_finished_job_shows_its_average_rate(agent, tmp_path):
    """Issue 37: a done job read '0.0 compl/s' (the rate of the last seconds, none once it
    ends): it shows its average over the time it was sent."""
    a = agent.write_profile("t-a")
    agent.call("start", profile=a, wait=True)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 60)
    jid = agent.call("job_run", input=str(inp), output=str(out))["id"]
    view = _wait_job(agent, lambda v: v["state"] == "done", "done", job=jid)
    assert view["completions_s"] > 0 and view["tok_s"] > 0, view
    cli = subprocess.run(
        [sys.executable, "-m", "sgltui", "job", "status", jid],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert " 0.0 compl/s" not in cli.stdout and "compl/s" in cli.stdout, cli.stdout + cli.stderr
