"""`sgltui job ...` as a user runs it, against the real agent and simulator."""

from __future__ import annotations

import json

from tests.fixtures.cli import sgltui
from tests.jobs.batch_input import write_input


def test_job_commands_from_the_cli(agent, tmp_path):
    # Tokens 10x slower than the default, start-up as fast: the big job must still run when the
    # CLI pauses it a few commands later (at the default, 3,000 answers of 64 tokens take
    # seconds); it is cancelled, so this costs no time.
    a = agent.write_profile("t-a", time_scale=0.1, sim_slow_start=0.1)
    agent.call("start", profile=a, wait=True)
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    write_input(small, 60)
    write_input(big, 3000, max_tokens=64)

    # watching: a progress line until the end, then the status; exit 0 when all answered
    run = sgltui("job", "run", str(small), "--concurrency", "4", "--name", "small")
    assert run.returncode == 0, run.stderr
    assert "60 requests checked" in run.stdout and "60/60" in run.stdout
    assert "segment t-a" in run.stdout
    assert (tmp_path / "small.output.jsonl").exists()  # the default output name

    started = sgltui("job", "run", str(big), "-o", str(tmp_path / "b.out.jsonl"),
                      "--concurrency", "2", "--no-wait")  # fmt: skip
    assert started.returncode == 0 and "it runs in the agent" in started.stdout
    assert sgltui("job", "set", "--concurrency", "6").returncode == 0
    st = json.loads(sgltui("job", "status", "--json").stdout)
    assert st["name"] == "big" and st["concurrency"] == 6 and st["concurrency_mode"] == "fixed"
    assert "paused" in sgltui("job", "pause").stdout
    listed = sgltui("job", "list")
    assert "small" in listed.stdout and "done" in listed.stdout and "paused" in listed.stdout
    assert json.loads(sgltui("status", "--json").stdout)["jobs"][1]["state"] == "paused"
    assert "running" in sgltui("job", "resume", "big").stdout
    assert "cancelled" in sgltui("job", "cancel").stdout
    bad = sgltui("job", "set", "--concurrency", "0")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1
    verify = sgltui("job", "verify", str(big), str(tmp_path / "b.out.jsonl"))
    assert verify.returncode == 1 and "missing" in verify.stdout  # cancelled part-way
