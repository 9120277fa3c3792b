"""Fleet over a real OpenSSH server: two local users on 127.0.0.1 stand for two hosts, each
with its own agent and simulator, reached with `ssh USER@127.0.0.1 sgltui agent bridge`."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sgltui.fleet import config as fleet_config
from sgltui.fleet.client import HostClient, HostError
from sgltui.fleet.link import HostLink
from tests.fleet import sshd as sshd_mod

why = sshd_mod.unavailable()
pytestmark = pytest.mark.skipif(why is not None, reason=why or "")

PROFILE = """name = "t"
launcher = "sim"
[server]
model-path = "meta-llama/Llama-3.1-8B-Instruct"
port = {port}
sim-time-scale = 0.01
"""


@pytest.fixture(scope="module")
def fleet_hosts():
    s = sshd_mod.start(2)
    try:
        for u in s.users:
            prof = u.home / ".config" / "sgltui" / "profiles"
            prof.mkdir(parents=True)
            (prof / "t.toml").write_text(PROFILE.format(port=sshd_mod.free_port()))
            pw = pwd.getpwnam(u.name)
            for p in [u.home / ".config", *(u.home / ".config").rglob("*")]:
                os.chown(p, pw.pw_uid, pw.pw_gid)
        yield s
    finally:
        sshd_mod.stop_agents(s)
        sshd_mod.stop(s)
    assert not s.root.exists(), "the test users' homes are left behind"


@pytest.fixture
def fleet_file(fleet_hosts, tmp_path) -> Path:
    return fleet_hosts.fleet_toml(tmp_path / "fleet.toml")


def sgltui(fleet_file: Path, *words: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sgltui", "--fleet", str(fleet_file), *words],
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )


def test_fleet_status_and_host_commands_reach_both_hosts(fleet_file):
    r = sgltui(fleet_file, "--host", "h1", "start", "t")
    assert r.returncode == 0, r.stderr
    r = sgltui(fleet_file, "fleet", "status", "--json")
    assert r.returncode == 0, r.stderr
    hosts = {h["name"]: h for h in json.loads(r.stdout)["hosts"]}
    assert set(hosts) == {"h1", "h2"}
    assert all(h["reachable"] for h in hosts.values())
    assert [(s["id"], s["profile"], s["state"]) for s in hosts["h1"]["slots"]] == [
        ("h1/0", "t", "ready")
    ]
    assert [s["state"] for s in hosts["h2"]["slots"]] == ["stopped"]
    assert hosts["h1"]["gpus"] >= 1  # the simulator's GPU, as h1's agent samples it


def _failing(fleet_hosts, tmp_path, host_line: str, ssh_opts: list[str] | None = None) -> str:
    opts = ssh_opts or ["-F", str(fleet_hosts.ssh_config)]
    f = tmp_path / "bad.toml"
    f.write_text(f'[ssh]\noptions = {json.dumps(opts)}\n\n[[host]]\nname = "bad"\n{host_line}\n')
    r = sgltui(f, "fleet", "status", "--timeout", "20")
    assert r.returncode == 3
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, r.stdout
    r2 = sgltui(f, "--host", "bad", "status")
    assert r2.returncode != 0
    err = r2.stderr.strip().splitlines()
    assert len(err) == 1, r2.stderr
    assert lines[0].split(" ", 1)[1].strip() in err[0]
    return lines[0]


def test_no_sgltui_on_the_remote_path_is_one_line(fleet_hosts, tmp_path):
    u = fleet_hosts.users[0].name
    line = _failing(fleet_hosts, tmp_path, f'ssh = "{u}@127.0.0.1"\nsgltui = "sgltui-nowhere"')
    assert "host bad" in line and "not on the remote PATH" in line and "sgltui = " in line


def test_auth_failure_is_one_line(fleet_hosts, tmp_path):
    line = _failing(fleet_hosts, tmp_path, 'ssh = "nosuchuser-sgf@127.0.0.1"')
    assert "host bad" in line and "authentication failed" in line


def test_host_key_mismatch_is_one_line(fleet_hosts, tmp_path):
    other = tmp_path / "known_hosts"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")])
    key = (tmp_path / "k.pub").read_text().split()
    other.write_text(f"[127.0.0.1]:{fleet_hosts.port} {key[0]} {key[1]}\n")
    u = fleet_hosts.users[0].name
    opts = ["-F", str(fleet_hosts.ssh_config), "-o", f"UserKnownHostsFile={other}"]
    line = _failing(fleet_hosts, tmp_path, f'ssh = "{u}@127.0.0.1"', opts)
    assert "host bad" in line and "host key verification failed" in line


def test_version_mismatch_is_one_line(fleet_hosts, tmp_path):
    # A far "sgltui" whose agent answers the hello as another release would.
    fake = fleet_hosts.root / "bin" / "sgltui-old"
    fake.write_text(
        "#!/bin/sh\nread line\n"
        'printf \'{"id":1,"ok":true,"result":{"version":"0.0.1","protocol":1,"pid":1}}\\n\'\n'
        "sleep 5\n"
    )
    os.chmod(fake, 0o755)
    u = fleet_hosts.users[0].name
    opts = ["-F", str(fleet_hosts.ssh_config)]
    f = tmp_path / "old.toml"
    f.write_text(
        f'[ssh]\noptions = {json.dumps(opts)}\n\n[[host]]\nname = "old"\n'
        f'ssh = "{u}@127.0.0.1"\nsgltui = "{fake}"\n'
    )
    r = sgltui(f, "fleet", "status", "--timeout", "20")
    assert r.returncode == 3
    line = r.stdout.strip()
    assert len(line.splitlines()) == 1
    assert "host old" in line and "0.0.1" in line and "install sgltui" in line


def test_cutting_one_hosts_ssh_leaves_the_other_and_it_comes_back(fleet_file):
    fleet = fleet_config.load(fleet_file)

    async def run() -> None:
        seen: dict[str, list[tuple[float, bool]]] = {"h1": [], "h2": []}
        links = {
            h.name: HostLink(
                fleet,
                h,
                interval_s=0.2,
                on_change=lambda st: seen[st.name].append((time.monotonic(), st.reachable)),
            )
            for h in fleet.hosts
        }
        tasks = [asyncio.create_task(lk.run()) for lk in links.values()]
        try:

            async def until(cond, timeout=60.0) -> None:
                deadline = time.monotonic() + timeout
                while not cond():
                    assert time.monotonic() < deadline, {n: lk.state for n, lk in links.items()}
                    await asyncio.sleep(0.05)

            await until(lambda: all(lk.state.reachable for lk in links.values()))
            cut = links["h1"].client
            assert cut is not None and cut.pid is not None
            os.kill(cut.pid, signal.SIGKILL)  # the ssh of h1 only
            t_cut = time.monotonic()
            await until(lambda: not links["h1"].state.reachable, 20)
            assert "unreachable since" in links["h1"].state.line()
            # Meanwhile h2 answers its polls as before.
            n2 = len([t for t, ok in seen["h2"] if t > t_cut and ok])
            await until(lambda: len([t for t, ok in seen["h2"] if t > t_cut and ok]) > n2 + 2, 20)
            assert links["h2"].state.reachable
            await until(lambda: links["h1"].state.reachable, 60)  # reconnected by itself
            assert links["h1"].client is not None and links["h1"].client.pid != cut.pid
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        # Every ssh it started is gone (each in its own process group, reaped).
        for lk in links.values():
            assert lk.client is None

    asyncio.run(run())


def test_a_host_nobody_answers_is_one_line_and_leaves_no_ssh(fleet_hosts, tmp_path):
    f = tmp_path / "down.toml"
    u = fleet_hosts.users[1].name
    opts = ["-F", str(fleet_hosts.ssh_config), "-p", str(sshd_mod.free_port())]
    f.write_text(
        f'[ssh]\noptions = {json.dumps(opts)}\n\n[[host]]\nname = "down"\nssh = "{u}@127.0.0.1"\n'
    )
    fleet = fleet_config.load(f)

    async def run() -> None:
        c = HostClient(fleet, fleet.hosts[0])
        with pytest.raises(HostError) as e:
            await c.connect(timeout=15)
        assert str(e.value).startswith("host down (")
        assert "no ssh server answers" in str(e.value)
        assert c.proc is None  # ssh stopped and reaped

    asyncio.run(run())
