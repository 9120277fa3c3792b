"""Kubernetes hosts in a fleet (fleet/kube.py): a fake kubectl (tests/fleet/fake_kubectl.py)
runs the real `sgltui agent bridge` per pod, so each pod is a real agent; what only a cluster
can show is in docs/kubernetes.md."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from sgltui.agent.pools import gateway as gw_mod
from sgltui.fleet import config as fleet_config
from sgltui.fleet import kube, transport
from sgltui.fleet.client import HostClient, HostError
from tests.fixtures.agent import AgentHandle
from tests.ports import server_port

FAKE = Path(__file__).with_name("fake_kubectl.py")
PODS = [
    {"name": f"sgltui-{i}", "namespace": "ml", "labels": {"app": "sgltui"}, "podIP": f"10.1.0.{i}"}
    for i in range(3)
]


class Kube:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        for name, words in (("kubectl", ""), ("ssh", "ssh"), ("sgltui", "-m sgltui")):
            script = self.bin / name
            target = "" if name == "sgltui" else str(FAKE)
            script.write_text(f'#!/bin/sh\nexec {sys.executable} {target} {words} "$@"\n')
            script.chmod(0o755)
        self.cfg = root / "kube.json"
        self.write()

    def write(self, **cfg) -> None:
        cfg.setdefault("pods", PODS)
        self.cfg.write_text(json.dumps({"root": str(self.root), **cfg}))

    def fleet(self, hosts: str) -> Path:
        path = self.root / "fleet.toml"
        path.write_text(f'[ssh]\ncommand = "{self.bin / "ssh"}"\n' + hosts)
        return path

    def host(self, name: str, **keys: str) -> str:
        keys = {"kind": "kubernetes", "kubectl": str(self.bin / "kubectl"), **keys}
        keys.setdefault("sgltui", str(self.bin / "sgltui"))
        return f'[[host]]\nname = "{name}"\n' + "".join(f'{k} = "{v}"\n' for k, v in keys.items())

    def profile(self, pod: str, name: str = "t") -> None:
        d = self.root / pod / "config" / "sgltui" / "profiles"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{name}.toml").write_text(
            f'name = "{name}"\nlauncher = "sim"\n[server]\n'
            f'model-path = "meta-llama/Llama-3.1-8B-Instruct"\nport = {server_port()}\n'
            "sim-time-scale = 0.01\n"
        )

    def stop_agents(self) -> None:
        for state in self.root.glob("*/state"):
            AgentHandle(state, state).kill_everything()


@pytest.fixture
def kube_env(tmp_path, monkeypatch):
    k = Kube(tmp_path / "kube")
    monkeypatch.setenv("FAKE_KUBE", str(k.cfg))
    yield k
    k.stop_agents()


def _cli(*words: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sgltui", *words], capture_output=True, text=True, timeout=timeout
    )


def test_kubernetes_hosts_in_fleet_toml_and_their_kubectl_argv(tmp_path):
    def parse(hosts: list[dict]) -> fleet_config.Fleet:
        return fleet_config.parse({"host": hosts}, tmp_path / "fleet.toml")

    fleet = parse(
        [
            {"name": "gpu1", "ssh": "alice@gpu1"},
            {"name": "k", "kind": "kubernetes", "context": "prod", "namespace": "ml",
             "pod": "sgltui-0", "container": "agent", "kubectl": "/opt/kubectl"},
        ]
    )  # fmt: skip
    k = fleet.host("k")
    assert transport.bridge_argv(fleet, k) == [
        "/opt/kubectl", "--context", "prod", "--namespace", "ml", "exec", "-i", "sgltui-0",
        "-c", "agent", "--", "sgltui", "agent", "bridge",
    ]  # fmt: skip
    assert transport.bridge_argv(fleet, fleet.host("gpu1"))[0] == "ssh"
    assert k.target == "pod sgltui-0 in ml, context prod"
    for bad, says in (
        ({"name": "k", "kind": "kubernetes"}, "give pod ="),
        ({"name": "k", "kind": "kubernetes", "pod": "p", "selector": "a=b"}, "one of the two"),
        ({"name": "k", "kind": "kubernetes", "pod": "p", "ssh": "x"}, "has no ssh"),
        ({"name": "k", "kind": "kubernetes", "pod": "--all"}, "not an option"),
        ({"name": "k", "ssh": "a@b", "pod": "p"}, 'for kind = "kubernetes"'),
        ({"name": "k", "kind": "docker", "pod": "p"}, 'kind must be "ssh" or "kubernetes"'),
    ):
        with pytest.raises(fleet_config.FleetConfigError, match=says):
            parse([bad])


def test_a_selector_lists_three_pods_or_none_or_is_refused(kube_env):
    sel = {"name": "k", "kind": "kubernetes", "namespace": "ml", "selector": "app=sgltui"}
    sel["kubectl"] = str(kube_env.bin / "kubectl")
    path = kube_env.root / "fleet.toml"
    fleet = fleet_config.parse({"host": [sel]}, path, pods=kube.pod_hosts)
    assert [(h.name, h.pod, h.address) for h in fleet.hosts] == [
        (f"k.sgltui-{i}", f"sgltui-{i}", f"10.1.0.{i}") for i in range(3)
    ]
    none = fleet_config.parse({"host": [{**sel, "selector": "app=other"}]}, path, kube.pod_hosts)
    (h,) = none.hosts
    assert "selector app=other in ml matches no pods" in str(h.pods_error)
    with pytest.raises(HostError, match="matches no pods"):  # its link says so, at once
        asyncio.run(HostClient(none, h).connect())
    kube_env.write(forbid_list=True)
    (h,) = fleet_config.parse({"host": [sel]}, path, kube.pod_hosts).hosts
    assert "not allowed to list pods" in str(h.pods_error)
    assert "\n" not in str(h.pods_error)
    # a pool over its pods: the file still says why they are missing, in one line
    pool = {"name": "xp", "slots": ["k.sgltui-0/0", "k.sgltui-1/0"], "gateway": "k.sgltui-0"}
    with pytest.raises(
        fleet_config.FleetConfigError, match="pod of selector host k, which listed none"
    ):
        fleet_config.parse({"host": [sel], "pool": [pool]}, path, kube.pod_hosts)
    kube_env.write()
    fleet = fleet_config.parse({"host": [sel], "pool": [pool]}, path, kube.pod_hosts)
    assert fleet.address("k.sgltui-1") == "10.1.0.1"  # where the gateway reaches its server


@pytest.mark.slow  # two CLI runs: ~3 s
def test_unreachable_forbidden_missing_and_empty_are_one_line_each(kube_env):
    kube_env.write(pods=PODS, unreachable=["gone"], forbidden=["sgltui-1"])
    path = kube_env.fleet(
        kube_env.host("down", context="gone", namespace="ml", pod="sgltui-0")
        + kube_env.host("rbac", namespace="ml", pod="sgltui-1")
        + kube_env.host("typo", namespace="ml", pod="sgltui-9")
        + kube_env.host("empty", namespace="ml", selector="app=none")
    )
    t0 = time.monotonic()
    res = _cli("--fleet", str(path), "fleet", "status", "--json")
    assert res.returncode == 3, res.stderr
    errors = {h["name"]: h["error"] for h in json.loads(res.stdout)["hosts"]}
    assert "the cluster is unreachable" in errors["down"] and "i/o timeout" in errors["down"]
    assert "not allowed to create pods/exec" in errors["rbac"]
    assert "ask for a Role with create pods/exec in ml" in errors["rbac"]
    assert "no such pod" in errors["typo"] and "fix pod = ..." in errors["typo"]
    assert "matches no pods" in errors["empty"]
    assert all("\n" not in e for e in errors.values()), errors
    assert time.monotonic() - t0 < 30  # each failed at once; none waited for a timeout
    # a one-shot command on a forbidden pod: the same line, kubectl's exit; a named pod needs
    # no listing of the fleet's selectors (a dead cluster there would hold it up)
    (kube_env.root / "calls.log").unlink()
    res = _cli("--fleet", str(path), "--host", "rbac", "status")
    calls = [json.loads(x) for x in (kube_env.root / "calls.log").read_text().splitlines()]
    assert [c[c.index("exec") :][:3] for c in calls] == [["exec", "-i", "sgltui-1"]]
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert "not allowed to create pods/exec" in res.stderr


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_mixed_fleet_pods_and_ssh_real_agents(kube_env):
    kube_env.profile("sgltui-0")
    path = kube_env.fleet(
        kube_env.host("k", namespace="ml", selector="app=sgltui")
        + f'[[host]]\nname = "gpu1"\nssh = "alice@gpu1"\nsgltui = "{kube_env.bin / "sgltui"}"\n'
    )
    kube_env.write(pods=PODS[:1])  # one pod (one GPU node) listed by the selector
    res = _cli("--fleet", str(path), "--host", "k.sgltui-0", "start", "t")
    assert res.returncode == 0, res.stderr
    res = _cli("--fleet", str(path), "fleet", "status", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    hosts = {h["name"]: h for h in json.loads(res.stdout)["hosts"]}
    assert set(hosts) == {"k.sgltui-0", "gpu1"} and all(h["reachable"] for h in hosts.values())
    assert hosts["k.sgltui-0"]["ssh"] == "pod sgltui-0 in ml"
    (slot,) = hosts["k.sgltui-0"]["slots"]
    assert slot["id"] == "k.sgltui-0/0" and slot["state"] == "ready" and slot["profile"] == "t"
    # each pod is its own agent (its own state dir), not the ssh host's
    assert (kube_env.root / "sgltui-0" / "state").is_dir()
    assert (kube_env.root / "alice_gpu1" / "state").is_dir()

    async def bridge_ends_with_its_link() -> None:
        fleet = fleet_config.load(path, pods=kube.pod_hosts)
        client = HostClient(fleet, fleet.host("k.sgltui-0"))
        await client.connect()
        t0 = time.perf_counter()
        for _ in range(20):
            await client.call("ping")
        rtt_ms = (time.perf_counter() - t0) / 20 * 1000
        pid = client.pid
        assert pid is not None and rtt_ms < 50, rtt_ms
        await client.close()
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"

    asyncio.run(bridge_ends_with_its_link())
    assert os.path.exists(kube_env.root / "sgltui-0" / "state")


@pytest.mark.slow  # two agents, two simulators and smg: 11-17 s here, `pool up` most of it
@pytest.mark.timeout(180)
@pytest.mark.skipif(not gw_mod.smg_available(), reason=gw_mod.NOT_INSTALLED)
def test_a_pool_across_a_pod_and_an_ssh_host_serves_through_the_pods_gateway(kube_env):
    """fleet.toml's [[pool]] over a selector's pod and an SSH host (the fake's ssh: a second
    agent of its own), the gateway on the pod: `fleet pool up` starts both members, each
    reached at its address (the pod's IP from the listing), and requests come back through
    the gateway (which saw both ready)."""
    kube_env.write(pods=[{**PODS[0], "podIP": "127.0.0.1"}])
    kube_env.profile("sgltui-0")
    kube_env.profile("alice_gpu1")  # the ssh host's own agent and profiles
    port = server_port()
    path = kube_env.fleet(
        kube_env.host("k", namespace="ml", selector="app=sgltui")
        + f'[[host]]\nname = "gpu1"\nssh = "alice@gpu1"\nsgltui = "{kube_env.bin / "sgltui"}"\n'
        + 'address = "127.0.0.1"\n'
        + '[[pool]]\nname = "xp"\nslots = ["k.sgltui-0/0", "gpu1/0"]\ngateway = "k.sgltui-0"\n'
        + f"port = {port}\n"
    )
    try:
        res = _cli("--fleet", str(path), "fleet", "pool", "up", "xp", "--profile", "t", timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "k.sgltui-0/0 ready, gpu1/0 ready" in res.stdout, res.stdout
        assert f"pool xp on k.sgltui-0 http://127.0.0.1:{port}" in res.stdout, res.stdout
        body = {"model": "default", "prompt": "hello", "max_tokens": 4}
        with httpx.Client(timeout=30) as c:
            for i in range(8):
                r = c.post(f"http://127.0.0.1:{port}/v1/completions", json={**body, "user": str(i)})
                assert r.status_code == 200 and r.json()["choices"][0]["text"], r.text
        # the gateway is the pod's agent's (its state dir), not the ssh host's
        assert (kube_env.root / "sgltui-0" / "state" / "secrets" / "remote-pools.json").exists()
        assert not (
            kube_env.root / "alice_gpu1" / "state" / "secrets" / "remote-pools.json"
        ).exists()
    finally:
        _cli("--fleet", str(path), "fleet", "pool", "down", "xp", timeout=60)
