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


def test_fleet_report_merges_the_hosts_sessions_on_one_clock(fleet_file):
    r = sgltui(fleet_file, "--host", "h2", "start", "t")  # h1's t runs since the test above
    assert r.returncode == 0, r.stderr
    r = sgltui(fleet_file, "fleet", "report", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert [h["name"] for h in rep["hosts"]] == ["h1", "h2"]
    assert all(h["error"] is None and abs(h["offset_s"]) < 1.0 for h in rep["hosts"])
    launches = [(e["slot"], e["profile"]) for e in rep["timeline"] if e["what"] == "launch"]
    assert ("h1/0", "t") in launches and ("h2/0", "t") in launches
    assert launches.index(("h1/0", "t")) < launches.index(("h2/0", "t"))  # one clock
    assert [e["ts"] for e in rep["timeline"]] == sorted(e["ts"] for e in rep["timeline"])


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


def test_tui_over_the_bridge_one_hosts_ssh_cut_leaves_the_other_and_it_comes_back(fleet_file):
    from textual.widgets import DataTable

    from sgltui.tui.fleet import FleetApp

    fleet = fleet_config.load(fleet_file)

    async def run() -> None:
        app = FleetApp(fleet, interval_s=0.2)
        async with app.run_test(size=(120, 30)) as pilot:
            hosts = app.query_one("#hosts", DataTable)
            slots = app.query_one("#slots", DataTable)
            links = {lk.host.name: lk for lk in app.links}

            async def until(cond, timeout=60.0) -> None:
                deadline = time.monotonic() + timeout
                while not cond():
                    assert time.monotonic() < deadline, [lk.state for lk in app.links]
                    await pilot.pause(0.1)

            def cell(table: DataTable, key: str, col: int) -> str:
                try:
                    return str(table.get_row(key)[col])
                except Exception:
                    return ""

            await until(lambda: cell(hosts, "h1", 1) == "reachable" == cell(hosts, "h2", 1))
            await until(lambda: cell(slots, "h1/0", 2) != "" and cell(slots, "h2/0", 2) != "")
            cut = links["h1"].client
            assert cut is not None and cut.pid is not None
            os.kill(cut.pid, signal.SIGKILL)  # h1's ssh only
            await until(lambda: cell(hosts, "h1", 1).startswith("unreachable since"), 20)
            assert cell(hosts, "h1", 1).endswith(", retrying")
            assert cell(hosts, "h2", 1) == "reachable"
            n2 = links["h2"].state.polls
            await until(lambda: links["h2"].state.polls > n2 + 2, 20)  # h2 polled on, unaffected
            await until(lambda: cell(hosts, "h1", 1) == "reachable", 60)  # back by itself
            assert links["h1"].client is not None and links["h1"].client.pid != cut.pid
            # R restarts the host/slot under the cursor, on that host only.
            h1_launch = links["h1"].state.status.slots[0].launch_id
            h2_launch = links["h2"].state.status.slots[0].launch_id
            assert h2_launch is not None
            slots.focus()
            await pilot.press("home", "down")
            assert app.selected_slot() == "h2/0"
            await pilot.press("R")
            await until(lambda: links["h2"].state.status.slots[0].launch_id != h2_launch, 30)
            await until(lambda: cell(slots, "h2/0", 2) == "ready", 30)
            assert links["h1"].state.status.slots[0].launch_id == h1_launch
        # Quitting stopped and reaped every ssh the links ran.
        assert all(lk.client is None for lk in app.links)

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
