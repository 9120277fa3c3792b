"""issue 18 #8 and issue 14: after a live run nothing in the state dir or the simulated-GPU folder
is readable by the group or others (folders 0700, files 0600), whatever wrote it: the agent's
log, pid and state files, the session, server logs, the demo load's log, bench results; and
`sgltui status` with no agent running creates nothing."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from tests.fixtures.cli import agent_sgltui as sgltui


def _open_to_others(root: Path) -> list[str]:
    bad = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            st = p.lstat()
            if stat.S_ISSOCK(st.st_mode) or stat.S_ISLNK(st.st_mode):
                continue  # the socket is born 0600 (its own test); links point inside
            if st.st_mode & 0o077:
                bad.append(f"{oct(st.st_mode & 0o777)} {p.relative_to(root)}")
    return bad


def test_nothing_in_the_state_dir_is_group_or_world_readable(agent, tmp_path):
    old = os.umask(0o022)  # the usual umask: everything would be 0644/0755 without care
    try:
        name = agent.write_profile("t-modes", enable_metrics=True)
        agent.call("start", profile=name)
        agent.wait_state("ready")
        assert agent.call("demo_load", on=True)["on"] is True
        deadline = time.monotonic() + 30
        while not (agent.state_dir / "demo_load.log").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        agent.call("demo_load", on=False)
        r = sgltui(
            agent,
            "bench",
            "--profile",
            name,
            "--concurrency",
            "2",
            "--requests",
            "4",
            "--input-len",
            "8",
            "--output-len",
            "8",
        )
        assert r.returncode == 0, r.stdout + r.stderr + agent.agent_log()
        session = Path(agent.status()["agent"]["session_dir"])
        assert list((session / "bench").glob("*.json")), "the bench run wrote no result"
        for must in ("agent.log", "agent.pid", "agent-state.json", "demo_load.log"):
            assert (agent.state_dir / must).exists(), must
        assert _open_to_others(agent.state_dir) == []
        simgpu = Path(os.environ["SGLTUI_SIM_GPU_DIR"])
        assert simgpu.is_dir() and _open_to_others(simgpu) == []
        assert stat.S_IMODE(simgpu.stat().st_mode) == 0o700
    finally:
        os.umask(old)


def test_status_without_an_agent_creates_no_session(tmp_path):
    state = tmp_path / "fresh-state"
    r = subprocess.run(
        [sys.executable, "-m", "sgltui", "--state-dir", str(state), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert r.returncode == 3, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("sgltui: error:")]
    assert len(errors) == 1 and "no agent is running" in errors[0], r.stderr
    assert not (state / "sessions").exists()
    assert not (state / "agent.pid").exists()
