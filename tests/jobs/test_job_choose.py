"""`job run --choose`: the trial on the job's own requests, in the real agent on the simulator.

Three simulated profiles that differ only in how many requests they run at once (what MTP vs
plain decoding mostly changes on one GPU): the trial measures each at its automatic concurrency,
keeps every answer, survives a kill -9 of the agent in the middle, and picks the profile a bench
at the job's lengths picks; every custom_id is answered exactly once.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from sgltui.client import AgentError
from tests.fixtures.cli import agent_sgltui as sgltui
from tests.jobs.batch_input import read_output, write_input

# A 32B model at a tenth of real time, start-up 20x faster still: the servers, not this
# machine's client, set the rates, and a swap takes about 2 s (bench/bench_job_choose.py's too).
SIM = {"model": "Qwen/Qwen3-32B", "time_scale": 0.1, "sim_slow_start": 0.05}
OUT_LEN = 64


def _profiles(agent) -> list[str]:
    return [
        agent.write_profile("c-small", max_running_requests=2, **SIM),
        agent.write_profile("c-mid", max_running_requests=8, **SIM),
        agent.write_profile("c-big", max_running_requests=24, **SIM),
    ]


def _status(agent, jid: str) -> dict | None:
    try:
        return agent.call("job_status", job=jid)
    except AgentError:
        return None  # the agent is restarting


def _wait(agent, jid: str, pred, what: str, timeout: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout
    view = None
    while time.monotonic() < deadline:
        view = _status(agent, jid)
        if view is not None and pred(view):
            return view
        time.sleep(0.1)
    raise AssertionError(
        f"job never reached {what}: {json.dumps(view)[:3000]}\n{agent.agent_log()}"
    )


def _cand(view: dict, name: str) -> dict:
    return next(c for c in view["decision"]["candidates"] if c["name"] == name)


@pytest.mark.timeout(240)
def test_choose_trial_survives_kill9_keeps_every_answer_and_agrees_with_bench(agent, tmp_path):
    small, mid, big = _profiles(agent)
    agent.call("start", profile=small, wait=True)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_input(inp, 1500, max_tokens=OUT_LEN)

    view = agent.call(
        "job_run",
        input=str(inp),
        output=str(out),
        choose=f"{small},{mid},{big}",
        trial_requests=200,
    )
    jid = view["id"]
    assert view["decision"]["phase"] == "trial"

    # the slot already runs c-small: measured first, without a swap; then c-mid: kill -9 there
    v = _wait(agent, jid, lambda v: _cand(v, mid)["state"] == "measuring", "c-mid measured")
    assert _cand(v, small)["state"] == "measured" and _cand(v, small)["swap_s"] == 0.0
    _wait(agent, jid, lambda v: _cand(v, mid)["requests"] >= 20, "c-mid's first answers")
    before = agent.call("job_status", job=jid)
    used_before = _cand(before, mid)["requests"]
    agent.kill9()

    # the trial resumes where it was: c-small's figures kept, c-mid goes on (no re-run of it)
    after = _wait(agent, jid, lambda v: v["state"] == "running", "running again")
    assert _cand(after, small) == _cand(before, small)
    assert _cand(after, mid)["state"] in ("measuring", "measured")
    # c-mid's count goes on from the answers written before the kill (read from the output file)
    _wait(agent, jid, lambda v: _cand(v, mid)["requests"] > used_before, "c-mid counted on")

    final = _wait(agent, jid, lambda v: v["state"] == "done", "done", timeout=150)
    d = final["decision"]
    assert d["phase"] == "decided" and d["winner"] == big, json.dumps(d, indent=1)
    for c in d["candidates"]:
        assert c["state"] == "measured", c
        if c["ci_high"] is None:  # a cap ended it before two batches: a rate, no interval
            assert "cap" in c["reason"], c
        else:
            assert c["ci_low"] <= c["tok_s"] <= c["ci_high"]
        assert c["requests"] > 0 and c["projected_s"] is not None
    fastest = max(d["candidates"], key=lambda c: c["tok_s"])
    assert fastest["name"] == big
    # each candidate says what its server ran: the hash the agent kept at its ready
    kept = {e["hash"] for e in agent.events("server.provenance")}
    assert all(c["info_hash"] in kept for c in d["candidates"]), d["candidates"]
    assert final["answered"] == 1500 and final["failed"] == 0

    # exactly once: the test's own reading and `job verify`
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert set(counts) == set(ids) and max(counts.values()) == 1
    r = sgltui(agent, "job", "verify", str(inp), str(out))
    assert r.returncode == 0, r.stdout + r.stderr

    # the evidence: a typed job.decision event, and `job status --json` carries the decision
    (ev,) = [e for e in agent.events("job.decision") if e["job"] == jid]
    assert ev["winner"] == big and {c["name"] for c in ev["candidates"]} == {small, mid, big}
    r = sgltui(agent, "job", "status", jid, "--json")
    assert json.loads(r.stdout)["decision"]["winner"] == big
    assert final["joules"] and final["joules"] > 0

    # a bench at the job's lengths names the same winner
    r = sgltui(
        agent,
        "bench",
        *("--profile", small, "--profile", mid, "--profile", big),
        # at 24 in flight each runs its own batch limit at once (the rest queue in the server):
        # each profile's best point, as the job's automatic concurrency runs it
        *("--concurrency", "24", "--duration", "1.5"),
        *("--input-len", "8", "--output-len", str(OUT_LEN)),
        *("--job-completions", "1500", "--job-output-len", str(OUT_LEN)),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"Use {big}" in r.stdout, r.stdout


def test_preflight_failure_is_skipped_and_one_candidate_means_no_trial(agent, tmp_path):
    small = agent.write_profile("c-small", max_running_requests=2, **SIM)
    agent.call("start", profile=small, wait=True)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 200, max_tokens=8)
    view = agent.call("job_run", input=str(inp), output=str(out), choose=f"{small},no-such-profile")
    final = _wait(agent, view["id"], lambda v: v["state"] == "done", "done")
    d = final["decision"]
    assert d["winner"] == small and "no trial" in d["note"], d
    skipped = _cand(final, "no-such-profile")
    assert skipped["state"] == "skipped" and "no-such-profile" in skipped["reason"]


def test_a_job_smaller_than_the_trial_finishes_in_it_and_says_so(agent, tmp_path):
    small = agent.write_profile("c-small", max_running_requests=2, **SIM)
    mid = agent.write_profile("c-mid", max_running_requests=8, **SIM)
    agent.call("start", profile=small, wait=True)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_input(inp, 40, max_tokens=OUT_LEN)
    view = agent.call(
        "job_run", input=str(inp), output=str(out), choose=f"{small},{mid}", objective="energy"
    )
    final = _wait(agent, view["id"], lambda v: v["state"] == "done", "done")
    d = final["decision"]
    assert "finished during the trial" in (d["note"] or ""), d
    # the energy objective: the fewest joules for the job, from each one's measured joules
    assert d["objective"] == "energy"
    measured = [c for c in d["candidates"] if c["tok_per_j"]]
    if len(measured) == 2:
        assert d["winner"] == max(measured, key=lambda c: c["tok_per_j"])["name"], d
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert set(counts) == set(ids) and max(counts.values()) == 1


@pytest.mark.timeout(180)
def test_choose_on_a_stopped_slot_starts_the_first_candidate_and_decides(agent, tmp_path):
    """The most common case: no server runs yet. The trial starts the first candidate (the
    agent once refused the start's `confirm` inside a task nobody awaited: the trial showed
    'swapping' for ever)."""
    small = agent.write_profile("c-small", max_running_requests=2, **SIM)
    mid = agent.write_profile("c-mid", max_running_requests=8, **SIM)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_input(inp, 1200, max_tokens=8)
    view = agent.call(
        "job_run", input=str(inp), output=str(out), choose=f"{small},{mid}", trial_requests=200
    )
    jid = view["id"]
    first = _wait(
        agent,
        jid,
        lambda v: any(c["state"] == "measuring" for c in v["decision"]["candidates"]),
        "a candidate measured",
        timeout=60,
    )
    assert all(c["state"] != "skipped" for c in first["decision"]["candidates"]), first
    final = _wait(agent, jid, lambda v: v["state"] == "done", "done", timeout=100)
    assert final["decision"]["phase"] == "decided" and final["decision"]["winner"], final[
        "decision"
    ]
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert set(counts) == set(ids) and max(counts.values()) == 1
    assert "never retrieved" not in agent.agent_log()
