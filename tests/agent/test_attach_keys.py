"""Issue 51 items 1 and 8: an adopted server keeps its keys across a restart (its profile names
the key files, never the keys), a restart that would drop one is refused, and `attach URL`
without --slot takes ext-PORT while slot 0 serves. The simulator is started by hand, as a user
would; the agent is the real one."""

from __future__ import annotations

import httpx
import pytest

from sgltui.client import AgentError
from tests.fixtures.cli import agent_sgltui

API_KEY, ADMIN_KEY = "k-51-api", "k-51-admin"


def _slot(agent, sid: str) -> dict:
    return next(s for s in agent.status()["slots"] if s["id"] == sid)


def test_an_adopted_server_is_restarted_with_its_keys(agent, sim_server, tmp_path):
    sim = sim_server("--api-key", API_KEY, "--admin-api-key", ADMIN_KEY)
    url = sim.url
    key, admin = tmp_path / "api.key", tmp_path / "admin.key"
    key.write_text(API_KEY + "\n")
    admin.write_text(ADMIN_KEY + "\n")
    r = agent_sgltui(agent, "attach", url, "--slot", "hs", "--api-key-file", str(key))
    assert r.returncode == 0, r.stderr
    # the admin key is one sgltui cannot give back: adopting without its file is refused
    r = agent_sgltui(agent, "adopt", "--slot", "hs")
    assert r.returncode == 1 and "admin api key" in r.stderr, r.stderr
    assert "--admin-api-key-file FILE" in r.stderr
    r = agent_sgltui(agent, "adopt", "--slot", "hs", "--admin-api-key-file", str(admin))
    assert r.returncode == 0, r.stderr
    text = (agent.profiles_dir / f"ext-{sim.port}.toml").read_text()
    assert "[key-files]" in text and str(key) in text and str(admin) in text
    assert API_KEY not in text and ADMIN_KEY not in text  # where the keys are, never the keys

    agent.call("restart", slot="hs", wait=True)
    slot = agent.wait_state("ready", slot="hs")
    assert slot["pid"] != sim.pid  # relaunched by sgltui from the adopted profile
    assert httpx.get(url + "/v1/models", timeout=5).status_code == 401
    auth = {"Authorization": f"Bearer {API_KEY}"}
    assert httpx.get(url + "/v1/models", headers=auth, timeout=5).status_code == 200
    assert httpx.post(url + "/flush_cache", headers=auth, timeout=5).status_code == 401
    admin_auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
    assert httpx.post(url + "/flush_cache", headers=admin_auth, timeout=5).status_code == 200
    state = (agent.state_dir / "agent-state.json").read_text()
    assert API_KEY not in state and ADMIN_KEY not in state

    # the profile loses its key files: a restart would answer anyone, so it is refused
    path = agent.profiles_dir / f"ext-{sim.port}.toml"
    path.write_text(text.split("[key-files]")[0])
    with pytest.raises(AgentError) as refused:
        agent.call("restart", slot="hs", wait=True)
    said = str(refused.value)
    assert "restart refused" in said and "api-key and admin-api-key" in said, said
    assert "answering anyone" in said and "[key-files]" in said
    assert httpx.get(url + "/v1/models", timeout=5).status_code == 401  # still the keyed one


def test_attach_without_slot_takes_ext_port_while_slot_0_serves(agent, sim_server):
    """--help and docs/attach.md promise ext-PORT; it was "slot 0 is ready with ...; name
    another with --slot"."""
    name = agent.write_profile("t-serving")
    agent.call("start", profile=name, wait=True)
    sim = sim_server("--served-model-name", "by-hand")
    r = agent_sgltui(agent, "attach", sim.url)
    assert r.returncode == 0, r.stderr
    assert f"slot ext-{sim.port}: attached {sim.url} (pid {sim.pid}" in r.stdout
    ext = _slot(agent, f"ext-{sim.port}")
    assert ext["external"]["pid"] == sim.pid and ext["state"] == "ready"
    assert _slot(agent, "0")["profile"] == name  # slot 0 serves on, untouched
    r = agent_sgltui(agent, "status")  # the slot's name has its column
    assert f"\next-{sim.port} ext:by-hand " in r.stdout, r.stdout
