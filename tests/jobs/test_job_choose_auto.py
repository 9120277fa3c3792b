"""`job run --choose auto`: the candidates are the serving profile and `sgltui advise`'s
proposals, each with its delta in `job status --json`; the trial survives a kill -9 of the agent
mid-trial and every custom_id is answered exactly once (the real agent on the simulator)."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from sgltui.client import AgentError
from tests.fixtures.cli import agent_sgltui as sgltui
from tests.jobs.batch_input import read_output, write_input

# A dense 32B model at a tenth of real time (the rates are the servers', not this machine's);
# its flag holds it at 2 running while its KV pool (cut to 4096 tokens) holds dozens of the
# job's short requests: advise proposes the raise.
SIM = {"model": "Qwen/Qwen3-32B", "time_scale": 0.1, "sim_slow_start": 0.05}
OUT_LEN = 64


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
    raise AssertionError(f"job never reached {what}: {json.dumps(view)[:3000]}")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_choose_auto_measures_the_proposal_across_kill9_exactly_once(agent, tmp_path):
    serving = agent.write_profile("c-flag", max_running_requests=2, max_total_tokens=4096, **SIM)
    agent.call("start", profile=serving, wait=True)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_input(inp, 2000, max_tokens=OUT_LEN)

    r = sgltui(
        agent,
        *("job", "run", str(inp), "-o", str(out), "--no-wait"),
        *("--choose", "auto", "--choose-max", "1", "--trial-requests", "700"),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    jid = json.loads(sgltui(agent, "job", "status", "--json").stdout)["id"]
    view = agent.call("job_status", job=jid)
    cands = view["decision"]["candidates"]
    assert [c["name"] for c in cands][0] == serving and len(cands) == 2
    proposal = cands[1]
    assert cands[0]["delta"] == {}
    raised = proposal["delta"]["max-running-requests"]
    assert proposal["name"] == f"{serving}+mrr{raised}" and 2 < raised < 4096 // OUT_LEN

    # kill -9 while the proposal is measured: the trial resumes where it was
    _wait(agent, jid, lambda v: v["decision"]["candidates"][1]["requests"] >= 10, "proposal")
    agent.kill9()
    final = _wait(agent, jid, lambda v: v["state"] == "done", "done", timeout=150)
    d = final["decision"]
    assert d["winner"] == proposal["name"], json.dumps(d, indent=1)
    assert [c["delta"] for c in d["candidates"]] == [{}, {"max-running-requests": raised}]
    assert final["answered"] == 2000 and final["failed"] == 0
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert set(counts) == set(ids) and max(counts.values()) == 1

    # the report's why: a paragraph for the proposal, with what bound the serving profile,
    # what the raise was expected to buy and what it measured (the session after the kill -9)
    r = sgltui(agent, "report", agent.status()["agent"]["session_dir"], "--format", "md")
    assert r.returncode == 0, r.stderr
    (why,) = [line for line in r.stdout.splitlines() if line.startswith(f"**{proposal['name']}**")]
    assert "bound by the flag: max-running-requests = 2" in why
    assert "Measured" in why and "the serving profile's" in why and why.endswith("It won.")
