"""A session recorded live: the real agent runs simulated servers whose profiles carry an API key.

The key must appear in no file of the session (events, timeline, server logs, reports), and the
report of this live session must show what happened: three launches and two swaps.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from sgltui.session.reader import load_session, session_dirs
from sgltui.session.report import build_report, render

pytestmark = pytest.mark.slow  # a live agent session: seconds each

pytest.importorskip("sgltui.agent.daemon", reason="agent area not in this tree")
pytest.importorskip("sgltui.sim.server", reason="simulator area not in this tree")
client = pytest.importorskip("sgltui.client", reason="agent client not in this tree")

API_KEY = "sk-e2e-5b2c8d1f9e7a"
HF_TOKEN = "hf_e2eTokenValue1234"


def _profile(name: str, extends: str, key: str, port: int) -> str:
    return (
        f'name = "{name}"\nkey = "{key}"\nextends = "{extends}"\nlauncher = "sim"\n'
        f'[server]\nport = {port}\napi-key = "{API_KEY}"\nsim-time-scale = 0.01\n'
        f'[env]\nHF_TOKEN = "{HF_TOKEN}"\n'
    )


def _wait(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def _slot(state: Path) -> dict:
    return client.call_sync(state, "status", autostart=False)["slots"][0]


def _settled(state: Path, profile: str):
    def check():
        s = _slot(state)
        return (
            s if (s["profile"] == profile and s["state"] == "ready" and not s.get("swap")) else None
        )

    return check


def _start_when_no_orphans(state: Path, profiles: Path) -> None:
    """The agent refuses to launch while orphaned sglang:: processes exist anywhere on the host;
    other suites running in parallel create short-lived ones on purpose. Wait them out."""
    deadline = time.monotonic() + 90
    while True:
        try:
            client.call_sync(
                state, "start", autostart=False, profile="e2e-a", profiles_dirs=[profiles]
            )
            return
        except client.AgentError as exc:
            if "leftover SGLang processes" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def test_live_session_keeps_the_api_key_off_disk_and_reports_two_swaps(
    isolated_env, tmp_path, spawn, free_port
):
    state = isolated_env
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "e2e-a.toml").write_text(_profile("e2e-a", "demo-no-mtp", "7", free_port))
    (profiles / "e2e-b.toml").write_text(_profile("e2e-b", "demo-mtp", "8", free_port))
    agent_log = open(tmp_path / "agent.out", "wb")
    agent = spawn(
        [
            sys.executable,
            "-m",
            "sgltui.agent",
            "--state-dir",
            str(state),
            "--profiles",
            str(profiles),
            "--foreground",
        ],
        stdout=agent_log,
        stderr=agent_log,
    )
    _wait(
        lambda: (state / "agent.sock").exists() or agent.poll() is not None, 30, "the agent socket"
    )
    assert agent.poll() is None, (tmp_path / "agent.out").read_text()

    _start_when_no_orphans(state, profiles)
    _wait(_settled(state, "e2e-a"), 60, "e2e-a ready")
    time.sleep(1.5)  # a few timeline samples while serving
    client.call_sync(state, "swap", autostart=False, profile="e2e-b", profiles_dirs=[profiles])
    _wait(_settled(state, "e2e-b"), 60, "swap to e2e-b")
    time.sleep(1.5)
    client.call_sync(state, "swap", autostart=False, profile="e2e-a", profiles_dirs=[profiles])
    _wait(_settled(state, "e2e-a"), 60, "swap back to e2e-a")
    client.call_sync(state, "shutdown", autostart=False, stop_servers=True)
    agent.wait(timeout=60)

    (session,) = session_dirs(state)
    # The server did print its key (SGLang's server_args line), so the scrubber had work to do.
    logs = sorted((session / "servers").glob("*.log"))
    assert len(logs) == 3 and "api_key='***" in logs[0].read_text().replace(
        "*" * len(API_KEY), "***"
    )
    report = build_report(load_session(session))
    rendered = {fmt: render(report, fmt) for fmt in ("md", "json", "csv")}

    leaks = []
    for root, _dirs, files in os.walk(session):
        for f in files:
            data = Path(root, f).read_bytes()
            for secret in (API_KEY, HF_TOKEN):
                if secret.encode() in data:
                    leaks.append(f"{Path(root, f).relative_to(session)} holds {secret[:6]}...")
    for fmt, text in rendered.items():
        if API_KEY in text or HF_TOKEN in text:
            leaks.append(f"report {fmt}")
    assert leaks == []

    assert [x["profile"] for x in report["launches"]] == ["e2e-a", "e2e-b", "e2e-a"]
    assert all(
        x["outcome"] in ("ready", "stopped") and x["start_s"] and x["start_s"] > 0
        for x in report["launches"]
    )
    swaps = report["swaps"]
    assert [(s["from"], s["to"], s["ok"]) for s in swaps] == [
        ("e2e-a", "e2e-b", True),
        ("e2e-b", "e2e-a", True),
    ]
    for s in swaps:
        assert s["timings_s"]["total"] > 0 and s["timings_s"]["load"] is not None
    served = {x["profile"]: x["serving_s"] for x in report["time_in_profile"]}
    assert served["e2e-a"] > 1.0 and served["e2e-b"] > 1.0
    assert report["session"]["ended"] is True and report["notes"] == []
