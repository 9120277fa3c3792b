"""Shared test set-up.

Every test runs with its own state, config and simulated-GPU directories, so nothing touches the
user's real ~/.local/state/sgltui and tests never see each other's agents or simulators.
Area-specific fixtures live in tests/fixtures/<area>.py and are loaded here as plugins.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ports import server_port

pytest_plugins = [
    f"tests.fixtures.{p.stem}"
    for p in sorted((Path(__file__).parent / "fixtures").glob("*.py"))
    if p.stem != "__init__"
]


# A test that starts a real agent (these fixtures) takes seconds: it is `slow` without saying
# so; other slow tests carry @pytest.mark.slow (the fast subset: pytest -m "not slow").
SLOW_FIXTURES = frozenset({"agent_handle"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """Point every sgltui location at a fresh temporary directory."""
    state = tmp_path / "state"
    monkeypatch.setenv("SGLTUI_STATE_DIR", str(state))
    monkeypatch.setenv("SGLTUI_SIM_GPU_DIR", str(tmp_path / "simgpu"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdgstate"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # The agent's OpenAI endpoint (agent/endpoint/endpoint.py) binds a fixed port: off unless a test
    # turns it on (tests/agent/test_endpoint.py), so parallel agents never race for it.
    monkeypatch.setenv("SGLTUI_ENDPOINT_PORT", "off")
    # Make `python -m sgltui...` in child processes import this checkout.
    root = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return state


@pytest.fixture
def free_port() -> int:
    return server_port()


@pytest.fixture
def busy_port():
    """A port that a listening socket holds for the whole test."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def spawn():
    """Start child processes in their own process group; kill and reap every one at teardown."""
    procs: list[subprocess.Popen] = []

    def _spawn(argv: list[str], **kwargs) -> subprocess.Popen:
        kwargs.setdefault("start_new_session", True)
        proc = subprocess.Popen(argv, **kwargs)
        procs.append(proc)
        return proc

    yield _spawn
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


PYTHON = sys.executable
