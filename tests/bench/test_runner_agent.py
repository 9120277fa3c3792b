"""`sgltui bench` through the agent: two demo-derived simulator profiles swapped in turn,
each measured, compared, tied to its command hash and capacity, recorded in the session."""

from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path

from sgltui.core.profiles import get_profile
from tests.fixtures.cli import agent_sgltui as sgltui


def write_demo_profiles(profiles_dir: Path, port: int) -> list[str]:
    names = []
    for base in ("demo-mtp", "demo-no-mtp"):
        name = "b-" + base.removeprefix("demo-")
        (profiles_dir / f"{name}.toml").write_text(
            f'name = "{name}"\nextends = "{base}"\nlauncher = "sim"\n[server]\nport = {port}\nsim-time-scale = 0.01\n'
        )
        names.append(name)
    return names


def test_bench_two_profiles_through_agent(agent, free_port, tmp_path):
    names = write_demo_profiles(agent.profiles_dir, free_port)
    out_csv = tmp_path / "cmp.csv"
    r = sgltui(
        agent,
        "bench",
        "--profile",
        names[0],
        "--profile",
        names[1],
        "--concurrency",
        "2,6",
        "--requests",
        "12",
        "--input-len",
        "16",
        "--output-len",
        "24",
        "--job-completions",
        "902087",
        "--job-output-len",
        "24",
        "--export-csv",
        str(out_csv),
    )
    assert r.returncode == 0, r.stdout + r.stderr + agent.agent_log()
    assert "Time to finish 902,087 completions" in r.stdout
    assert any(line.startswith("Use b-") for line in r.stdout.splitlines())
    path = Path(r.stdout.strip().splitlines()[-1].split("result: ", 1)[1])
    session = Path(agent.status()["agent"]["session_dir"])
    assert path.parent == session / "bench"
    data = json.loads(path.read_text())
    assert data["state"] == "done"
    assert [(e["profile"], e["concurrency"]) for e in data["results"]] == [
        (names[0], 2),
        (names[0], 6),
        (names[1], 2),
        (names[1], 6),
    ]
    for e in data["results"]:
        prof = get_profile(e["profile"], [agent.profiles_dir])
        assert e["command_hash"] == prof.command_hash()
        assert e["server_version"] and e["capacity"]["max_running_requests"] >= 1
        assert e["metrics"]["completed"] == 12 and e["metrics"]["total_output_tokens"] == 12 * 24
        assert e["metrics"]["max_concurrent_requests"] == e["concurrency"]
        # GPU energy from the agent's power samples (the simulator publishes its modelled power)
        assert e["metrics"]["joules"] > 0 and e["metrics"]["tok_per_j"] > 0
        assert (path.parent / e["requests_path"]).is_file()
    caps = {e["profile"]: e["capacity"]["max_running_requests"] for e in data["results"]}
    assert caps[names[0]] == 4  # the MTP profile's small batch, as its capacity card says
    assert (
        data["results"][0]["metrics"]["accept_length"] is not None
    )  # speculative: from /server_info
    assert len(list(csv.DictReader(out_csv.open()))) == 4
    # the sweep left the last profile serving, and the session has the run's events
    assert agent.slot()["profile"] == names[1]
    types = [ev["type"] for ev in agent.events() if ev.get("run_id") == data["run_id"]]
    assert types[0] == "bench.start" and "bench.progress" in types and types[-1] == "bench.done"


def test_bench_stop_keeps_partial_results(agent, free_port):
    names = write_demo_profiles(agent.profiles_dir, free_port)
    r = sgltui(
        agent,
        "bench",
        "--profile",
        names[1],
        "--concurrency",
        "2",
        "--duration",
        "60",
        "--input-len",
        "8",
        "--output-len",
        "8",
        "--detach",
    )
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.strip()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = {x["run_id"]: x for x in agent.call("bench_list")}[run_id]
        if (run.get("progress") or {}).get("phase") == "measure":
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"run never reached the measure phase: {run}")
    stop = sgltui(agent, "bench", "stop", run_id)
    assert stop.returncode == 0 and "stopped" in stop.stdout
    path = Path(run["path"])
    deadline = time.monotonic() + 15
    while json.loads(path.read_text())["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert json.loads(path.read_text())["state"] == "stopped"
    # no load generator outlives the stop
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(path.parent / run_id) not in ps


def test_bench_profile_that_fails_to_start_is_reported_and_sweep_goes_on(agent, free_port):
    """A swap to a profile that cannot start rolls back to the previous one; the runner must see
    that (through the slot's last_swap), record the failure for that profile and carry on, not
    wait out its ready timeout."""
    names = write_demo_profiles(agent.profiles_dir, free_port)
    (agent.profiles_dir / "b-oom.toml").write_text(
        f'name = "b-oom"\nextends = "demo-no-mtp"\nlauncher = "sim"\n[server]\nport = {free_port}\n'
        'sim-time-scale = 0.01\nsim-fail-at-start = "oom"\n'
    )
    r = sgltui(
        agent,
        "bench",
        "--profile",
        names[1],
        "--profile",
        "b-oom",
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--input-len",
        "8",
        "--output-len",
        "8",
        "--json",
        timeout=150,
    )
    path = next(
        Path(p) for p in (Path(agent.status()["agent"]["session_dir"]) / "bench").glob("*.json")
    )
    data = json.loads(path.read_text())
    by_profile = {e["profile"]: e for e in data["results"]}
    assert by_profile[names[1]]["metrics"]["completed"] == 4, r.stdout + r.stderr
    failed = by_profile["b-oom"]
    assert failed.get("error") and "b-oom" in failed["error"], failed
    assert data["state"] == "done"
    # the rollback brings the first profile back
    slot = agent.wait_state("ready", timeout=60)
    assert slot["profile"] == names[1]
    assert slot["last_swap"]["to"] == "b-oom" and slot["last_swap"]["rolled_back"] is True


def test_a_sweep_puts_back_the_profile_that_served(agent, free_port):
    """Issue 37 item 2: the slot served b-mtp; a sweep of b-no-mtp (and a third profile) left
    it on the last one benched. It is put back, and the result, `sgltui bench`'s output and
    the bench.done event (the Activity pane's line) say so."""
    names = write_demo_profiles(agent.profiles_dir, free_port)  # b-mtp, b-no-mtp
    agent.call("start", profile=names[0], wait=True)
    r = sgltui(
        agent, "bench", "--profile", names[1], "--concurrency", "2", "--requests", "6",
        "--input-len", "16", "--output-len", "16",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr + agent.agent_log()
    slot = agent.status()["slots"][0]
    assert (slot["profile"], slot["state"]) == (names[0], "ready"), (
        r.stdout + agent.agent_log()[-3000:]
    )
    assert f"slot 0 put back on {names[0]} (it served that before the bench)" in r.stdout
    path = Path(r.stdout.strip().splitlines()[-1].split("result: ", 1)[1])
    assert json.loads(path.read_text())["put_back"] == {
        "slot": "0", "profile": names[0], "ok": True,
    }  # fmt: skip
    events = (path.parent.parent / "events.jsonl").read_text().splitlines()
    done = [json.loads(e) for e in events if '"bench.done"' in e][-1]
    assert done["put_back"]["profile"] == names[0]

    from sgltui import protocol
    from sgltui.tui.activity_items import activity_item

    # the Activity pane's line for the event
    item = activity_item(protocol.decode_event(done), None, time.time)
    assert item is not None and f"slot 0 put back on {names[0]}" in item.text, item


def test_a_swap_of_the_benched_slot_asks_and_yes_cuts_the_bench(agent, free_port):
    """Issue 51 item 7: a swap of the slot a bench sweeps was accepted silently (the drain waited
    on the bench's load, the result read as a clean run). It asks, naming the bench, as for a
    pinned job; `--yes` stops the bench first and its result and report say the swap cut it."""
    names = write_demo_profiles(agent.profiles_dir, free_port)  # b-mtp, b-no-mtp
    agent.call("start", profile=names[0], wait=True)
    r = sgltui(
        agent, "bench", "--profile", names[1], "--concurrency", "2", "--duration", "60",
        "--input-len", "8", "--output-len", "8", "--detach",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.strip()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = {x["run_id"]: x for x in agent.call("bench_list")}[run_id]
        if (run.get("progress") or {}).get("phase") == "measure":
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"run never reached the measure phase: {run}")
    refused = sgltui(agent, "swap", names[0])
    assert refused.returncode != 0
    assert f"bench run {run_id} is using slot 0" in refused.stderr, refused.stderr
    assert "--yes" in refused.stderr and "cut by this swap" in refused.stderr
    assert agent.status()["slots"][0]["profile"] == names[1]  # nothing was touched
    t0 = time.monotonic()
    yes = sgltui(agent, "swap", names[0], "--yes")
    assert yes.returncode == 0, yes.stderr + agent.agent_log()[-3000:]
    slot = agent.wait_state("ready", timeout=60)
    assert slot["profile"] == names[0]
    assert time.monotonic() - t0 < 20  # no drain waited out on the bench's load (30 s)
    path = Path(run["path"])
    data = json.loads(path.read_text())
    assert data["state"] == "stopped" and "put_back" not in data  # the slot is the swap's
    assert data["cut"]["to"] == names[0] and data["cut"]["slot"] == "0"
    shown = sgltui(agent, "bench", "compare", str(path))
    assert f"CUT by a swap of slot 0 to {names[0]}" in shown.stdout, shown.stdout
    assert {x["run_id"]: x for x in agent.call("bench_list")}[run_id]["state"] == "stopped"
    time.sleep(0.5)  # the run's bench.done is written once its runner is reaped
    events = (path.parent.parent / "events.jsonl").read_text().splitlines()
    done = [json.loads(e) for e in events if '"bench.done"' in e][-1]
    assert done["cut"]["to"] == names[0]
    assert agent.status()["slots"][0]["profile"] == names[0]  # and it stays so
