"""smg installed while the agent runs is found when a pool needs it (issue 37 item 1).

The agent and its children run with a sitecustomize that hides smg while a marker file exists:
removing the file is `pip install smg` seen from the agent's side. A pool start before it is
refused in one line naming what to install, with no slot started; after it the same agent
starts the pool (no restart). A pool whose slots already run gets its gateway by itself.
"""

from __future__ import annotations

import os
import time

import pytest

from sgltui.agent.pools import gateway
from sgltui.client import AgentError
from tests.fixtures.cli import sgltui
from tests.ports import server_port

from .test_pool import _host_toml, _pool

pytestmark = pytest.mark.skipif(not gateway.smg_available(), reason="smg not installed")

HIDER = """
import os, sys, threading, time

# importlib.util.find_spec answers None for a name whose sys.modules entry is None; an import
# raises ModuleNotFoundError. The entry goes when the marker file does.
marker = os.environ["SGLTUI_TEST_HIDE_SMG"]
if os.path.exists(marker):
    sys.modules["smg"] = None

    def _unhide():
        while os.path.exists(marker):
            time.sleep(0.1)
        sys.modules.pop("smg", None)

    threading.Thread(target=_unhide, daemon=True).start()
"""


@pytest.fixture
def hidden_smg(tmp_path, monkeypatch):
    site = tmp_path / "hide-smg"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDER)
    marker = tmp_path / "smg-hidden"
    marker.touch()
    monkeypatch.setenv("SGLTUI_TEST_HIDE_SMG", str(marker))
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ['PYTHONPATH']}")
    return marker


def _wait(cond, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, what()
        time.sleep(0.2)
    return got


def test_demo_gpus_refuses_in_one_line_before_anything_starts(hidden_smg, agent_handle):
    # agent_handle: its teardown ends an agent that the old code started here
    isolated_env = agent_handle.state_dir
    r = sgltui("demo", "--gpus", "2")
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "demo --gpus 2: no gateway: pip install smg (SGLang's gateway" in lines[0]
    assert "pip install smg" in lines[0]
    assert not (isolated_env / "agent.sock").exists() and not list(isolated_env.glob("demo-host*"))


def test_a_pool_finds_smg_installed_while_the_agent_runs(hidden_smg, agent_handle):
    agent = agent_handle
    port = server_port()
    _host_toml(agent, port)
    agent.start()
    a = agent.write_profile("t-a")
    with pytest.raises(AgentError, match=r"pool all: no gateway: pip install smg"):
        agent.call("start", profile=a, pool="all", wait=True)
    assert {s["state"] for s in agent.status()["slots"]} == {"stopped"}  # nothing started

    # The slots started one by one: the pool says smg is missing, and serves once it is there.
    for slot in ("a", "b"):
        agent.call("start", profile=a, slot=slot, wait=True)
    assert "pip install smg" in (_pool(agent)["error"] or "")
    hidden_smg.unlink()  # `pip install smg`, the agent running on
    pool = _wait(lambda: (p := _pool(agent))["gateway"]["pid"] and p, lambda: _pool(agent))
    assert pool["error"] is None
    _wait(
        lambda: [w["gateway_status"] for w in _pool(agent)["workers"]] == ["ready", "ready"],
        lambda: _pool(agent),
    )
