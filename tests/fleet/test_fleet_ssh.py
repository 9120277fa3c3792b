"""Fleet over a real OpenSSH server: two local users on 127.0.0.1 stand for two hosts, each
with its own agent and simulator, reached with `ssh USER@127.0.0.1 sgltui agent bridge`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sgltui.agent.pools import gateway as gw_mod
from sgltui.fleet import config as fleet_config
from sgltui.fleet.client import HostClient, HostError
from tests.fleet import sshd as sshd_mod
from tests.ports import server_port
from tests.tui.helpers import pick_row, pick_slot

why = sshd_mod.unavailable()
pytestmark = [pytest.mark.skipif(why is not None, reason=why or ""), pytest.mark.slow]  # real sshd

PROFILE = """name = "{name}"
launcher = "sim"
{key}
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
            # t on key 8: what the pool test starts its cross-host pool with.
            (prof / "t.toml").write_text(
                PROFILE.format(name="t", key='key = "8"', port=server_port())
            )
            # t2 on key 9: what the TUI test swaps h2's slot to.
            t2 = PROFILE.format(name="t2", key='key = "9"', port=server_port())
            (prof / "t2.toml").write_text(t2)
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
    assert "(or old's version here)" in line and "there here" not in line, line  # issue 35


def test_tui_over_the_bridge_one_hosts_ssh_cut_leaves_the_other_and_it_comes_back(
    fleet_hosts, fleet_file
):
    """The main app on the fleet: both hosts in the Hosts view and their slots as host/slot; a
    profile key on h2's slot swaps it on h2's agent (h1's server untouched); kill -9 of h1's
    ssh (its account locked: sshd lets no new login in) shows h1 unreachable while h2 goes on,
    h1's slot stays in the slots view marked unreachable and refuses a key at once, and h1
    comes back once it lets logins in again."""
    from textual.notifications import Notify

    from sgltui.tui.app import make_app
    from sgltui.tui.config import TuiConfig
    from sgltui.tui.fleetsource import FleetSource
    from sgltui.tui.screens import DrainChoice
    from sgltui.tui.widgets.hosts import HostsPane
    from sgltui.tui.widgets.slots import SlotsPane

    app = None
    for h in ("h1", "h2"):  # t runs on both since the tests above (this one alone: start it)
        sgltui(fleet_file, "--host", h, "start", "t")
    fleet = fleet_config.load(fleet_file)
    src = FleetSource.from_fleet(fleet, interval_s=0.2)
    links = {lk.state.name: lk for lk in src.links}

    said: list[str] = []

    def hook(msg) -> None:
        if isinstance(msg, Notify):
            said.append(msg.notification.message)

    def row(sid: str) -> str:
        pane = app.query_one(SlotsPane)
        return next((str(o.prompt) for o in pane.options if o.id == f"slot:{sid}"), "")

    h1_user = fleet_hosts.users[0].name

    async def run() -> None:
        nonlocal app
        app = make_app(src, config=TuiConfig(), load_user_themes=False)
        async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
            hosts = app.query_one(HostsPane)

            async def until(cond, timeout=60.0) -> None:
                deadline = time.monotonic() + timeout
                while not cond():
                    assert time.monotonic() < deadline, [lk.state for lk in src.links]
                    await pilot.pause(0.1)

            def slot(sid: str):
                return app.model.slot(sid)

            def line(host: str) -> str:
                return next((ln for ln in hosts.text.splitlines() if f" {host} " in ln), "")

            await until(lambda: "●" in line("h1") and "●" in line("h2"))
            await until(lambda: all(slot(s) and slot(s).state == "ready" for s in ("h1/0", "h2/0")))
            h1_launch = slot("h1/0").launch_id
            # A profile key on h2's slot: the swap goes to h2's agent, through h2's link.
            await pick_slot(pilot, app, "h2/0", timeout=30)
            assert app.model.current_id == "h2/0" and src.focus_host == "h2"
            await pilot.press("9")  # t2
            # A request the simulator's warm-up left in its latest figures makes the app ask
            # how to drain: either way the swap goes ahead.
            await until(
                lambda: (
                    isinstance(app.screen, DrainChoice)
                    or slot("h2/0").swap is not None
                    or slot("h2/0").profile == "t2"
                )
            )
            if isinstance(app.screen, DrainChoice):
                await pilot.press("d")
            await until(lambda: slot("h2/0").profile == "t2" and slot("h2/0").state == "ready")
            assert slot("h1/0").profile == "t" and slot("h1/0").launch_id == h1_launch
            # Cut h1's ssh: h1 says since when, h2 is polled on, h1 comes back on a new ssh.
            cut = links["h1"].client
            assert cut is not None and cut.pid is not None
            _lock(h1_user, True)
            try:
                os.kill(cut.pid, signal.SIGKILL)
                # and h1's end of the connection: a kept connection (ssh's sharing) would
                # otherwise give the link a new session at once, no login needed
                _cut_sshd_sessions(h1_user)
                await until(lambda: "unreachable since" in line("h1"), 20)
                assert line("h1").endswith(", retrying[/]") and "●" in line("h2")
                n2 = links["h2"].state.polls
                await until(lambda: links["h2"].state.polls > n2 + 2, 20)
                # h1's slot stays, as h1 last said, dimmed and unreachable; a key on it is
                # refused at once in one line, nothing sent.
                await until(lambda: "unreachable since" in row("h1/0"), 20)
                assert row("h1/0").startswith("[dim]") and " t " in row("h1/0")
                assert "unreachable" not in row("h2/0")
                await pick_slot(pilot, app, "h1/0", timeout=30)
                said.clear()
                await pilot.press("9")
                await until(lambda: said, 10)
                assert said[0].startswith("host h1: unreachable since "), said
                assert said[0].endswith(", retrying; nothing sent"), said
            finally:
                _lock(h1_user, False)
            src.retry_now()  # (the palette's "retry unreachable hosts")
            await until(lambda: "●" in line("h1"), 60)
            await until(lambda: "unreachable" not in row("h1/0"), 20)
            assert links["h1"].client is not None and links["h1"].client.pid != cut.pid
            await until(lambda: slot("h1/0") is not None and slot("h1/0").launch_id == h1_launch)
        # Quitting stopped and reaped every ssh the links ran.
        assert all(lk.client is None for lk in src.links)

    asyncio.run(run())


def _tails(s: sshd_mod.Sshd, lines: int = 15) -> str:
    """What each host's agent and the pool's gateway said last (a failure's evidence: the
    hosts' homes go with the fixture)."""
    out = []
    for u in s.users:
        logs = [u.state_dir / "agent.log", u.state_dir / "gateways" / "xp.log"]
        logs += sorted(u.state_dir.glob("sessions/*/servers/*.log"))[-2:]
        for path in logs:
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"== {u.name} {path.name}\n" + "\n".join(tail))
    return "\n".join(out)


def _cut_sshd_sessions(user: str) -> None:
    """End sshd's processes serving `user`'s connections (by pid): as if the network to that
    host went, whether the fleet's ssh kept its connection or not."""
    uid = pwd.getpwnam(user).pw_uid
    for p in psutil.process_iter(["name", "uids"]):
        if p.info["name"] == "sshd" and p.info["uids"] and p.info["uids"].real == uid:
            with contextlib.suppress(psutil.Error):
                p.kill()


def _lock(user: str, locked: bool) -> None:
    """sshd lets no new login of a locked account in (its open sessions go on)."""
    subprocess.run(["usermod", "-L" if locked else "-U", user], check=True, capture_output=True)


@pytest.mark.skipif(not gw_mod.smg_available(), reason=gw_mod.NOT_INSTALLED)
def test_tui_starts_and_rolls_a_pool_across_hosts_from_its_row(fleet_hosts, tmp_path):
    """fleet.toml's pool over h1/0 and h2/0 (gateway h1) in the fleet app: one row over its
    members on their hosts. A profile key on that row starts it (`up`: each member served to
    the gateway with its key), the next one rolls it across both hosts (the fleet source runs
    CrossPool on the links' own connections): each host's slot runs the new profile, the
    roll's lines show as notes, and the pool serves."""
    import httpx
    from textual.notifications import Notify

    from sgltui.tui.app import make_app
    from sgltui.tui.config import TuiConfig
    from sgltui.tui.fleetsource import FleetSource
    from sgltui.tui.widgets.slots import SlotsPane

    port = server_port()
    pool = f'[[pool]]\nname = "xp"\nslots = ["h1/0", "h2/0"]\ngateway = "h1"\nport = {port}\n'
    fleet_file = fleet_hosts.fleet_toml(tmp_path / "fleet.toml", address="127.0.0.1", tail=pool)
    fleet = fleet_config.load(fleet_file)
    src = FleetSource.from_fleet(fleet, interval_s=0.2)
    said: list[str] = []
    errors: list[str] = []

    def hook(msg) -> None:
        if isinstance(msg, Notify):
            said.append(msg.notification.message)
            if msg.notification.severity == "error":
                errors.append(msg.notification.message)

    async def run() -> None:
        app = make_app(src, config=TuiConfig(), load_user_themes=False)
        async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
            pane = app.query_one(SlotsPane)

            async def until(cond, timeout=60.0) -> None:
                deadline = time.monotonic() + timeout
                while not cond():
                    assert time.monotonic() < deadline, (
                        said,
                        [o.prompt for o in pane.options],
                        _tails(fleet_hosts),
                    )
                    await pilot.pause(0.1)

            def ids() -> list[str]:
                return [o.id for o in pane.options]

            def slot(sid: str):
                return app.model.slot(sid)

            def runs(profile: str) -> bool:
                return all(
                    (s := slot(sid)) is not None and (s.profile, s.state) == (profile, "ready")
                    for sid in ("h1/0", "h2/0")
                )

            # The pool's row follows its members, whichever host they are on.
            await until(lambda: ids()[:3] == ["slot:h1/0", "slot:h2/0", "pool:h1/xp"])
            await pick_row(pilot, app, "pool:h1/xp", timeout=30)
            await until(lambda: app.picked_pool == "h1/xp")  # the app has read the move
            await pilot.press("8")  # t: the pool is not up: `up` with t
            await until(lambda: errors or any(s.startswith("pool xp up on h1: ") for s in said))
            assert not errors, (said, _tails(fleet_hosts))
            assert runs("t"), said
            up = next(s for s in said if s.startswith("pool xp up on h1: "))
            assert up.endswith("h1/0 ready, h2/0 ready"), said
            said.clear()
            await pilot.press("9")  # t2: a rolling swap across both hosts
            await until(lambda: errors or any(s.startswith("pool xp rolled to t2: ") for s in said))
            assert not errors, (said, _tails(fleet_hosts))
            assert "h1/0: out of the gateway; swapping to t2" in said, said
            assert "h2/0: back in the gateway, ready, runs t2" in said, said
            assert said[-1] == "pool xp rolled to t2: h1/0, h2/0", said
            await until(lambda: runs("t2"))  # each host's own status says so
            await until(lambda: "rolling" not in str(pane.options[2].prompt))
            async with httpx.AsyncClient(trust_env=False) as http:
                r = await http.post(
                    f"http://127.0.0.1:{port}/v1/completions",
                    json={"model": "default", "prompt": "hi", "max_tokens": 4},
                    timeout=30,
                )
            assert r.status_code == 200, r.text

    try:
        asyncio.run(run())
    finally:
        sgltui(fleet_file, "fleet", "pool", "down", "xp")


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
