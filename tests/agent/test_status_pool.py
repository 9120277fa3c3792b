"""`sgltui status --pool P` prints that pool and its slots only, text and --json (issue 37)."""

from __future__ import annotations

import json

from tests.fixtures.cli import agent_sgltui as sgltui
from tests.ports import server_port


def test_status_of_one_pool_prints_only_that_pool(agent_handle):
    agent = agent_handle
    cfg = agent.state_dir.parent / "config" / "sgltui"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "host.toml").write_text(
        "simulated_gpus = 2\n"
        f'[[slot]]\nname = "a"\ngpus = [0]\nport = {server_port()}\n\n'
        f'[[slot]]\nname = "b"\ngpus = [1]\nport = {server_port()}\n\n'
        f'[[pool]]\nname = "one"\nslots = ["a"]\nport = {server_port()}\n\n'
        f'[[pool]]\nname = "two"\nslots = ["b"]\nport = {server_port()}\n'
    )
    agent.start()
    r = sgltui(agent, "status", "--pool", "two", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [s["id"] for s in data["slots"]] == ["b"]
    assert [p["name"] for p in data["pools"]] == ["two"]
    text = sgltui(agent, "status", "--pool", "two")
    assert "pool two:" in text.stdout and "pool one" not in text.stdout, text.stdout
    bad = sgltui(agent, "status", "--pool", "three", "--json")
    assert bad.returncode != 0 and "no pool 'three'; pools: one, two" in bad.stderr
