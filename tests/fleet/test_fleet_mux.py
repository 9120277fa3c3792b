"""ssh connection sharing (fleet/mux.py): the options a fleet's ssh gets, the user's own
multiplexing left alone, and over a real sshd one kept connection that a later command reuses."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from sgltui.fleet import mux
from sgltui.fleet import ssh as fleet_ssh
from sgltui.fleet.config import Fleet, Host
from tests.fleet import sshd as sshd_mod


@pytest.fixture
def short_state(monkeypatch):
    # a control socket's path must fit a unix socket's 107 bytes: pytest's tmp_path may not
    d = Path(tempfile.mkdtemp(prefix="mx", dir="/tmp"))
    monkeypatch.setenv("SGLTUI_STATE_DIR", str(d / "state"))
    monkeypatch.setenv("HOME", str(d / "home"))  # no ~/.ssh/config of the machine's
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_a_fleets_ssh_shares_one_connection_per_host_in_a_private_dir(short_state):
    fleet = Fleet(path=short_state / "fleet.toml", hosts=(Host("h1", "me@gpu1"),))
    argv = fleet_ssh.argv(fleet, fleet.hosts[0], "agent", "bridge")
    d = short_state / "state" / "ssh"
    assert argv[argv.index("--") - 1] == "me@gpu1"
    opts = " ".join(argv)
    assert "ControlMaster=auto" in opts and "ControlPersist=60s" in opts
    assert f"ControlPath={d}/%C" in opts
    st = d.stat()
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()


def test_the_users_own_multiplexing_and_the_switch_add_none(short_state):
    cfg = short_state / "cfg"
    cfg.write_text("Host *\n  ServerAliveInterval 5\n")
    assert mux.options("ssh", ["-F", str(cfg)])  # a config without Control*: shared
    assert mux.options("ssh", ["-F", str(cfg)], enabled=False) == []  # multiplex = false
    assert mux.options("/opt/bin/tsh-wrapper", []) == []  # not OpenSSH's ssh
    assert mux.options("ssh", ["-o", "ControlPath=/x/%C"]) == []
    assert mux.options("ssh", ["-S", "none"]) == []
    included = short_state / "more.conf"
    included.write_text("Host gpu*\n  ControlPersist = 10m\n")
    user = short_state / "user_cfg"
    user.write_text(f"# ControlMaster no (a comment)\nInclude {included}\n")
    assert mux.options("ssh", ["-F", str(user)]) == []  # set in an included file
    home_cfg = short_state / "home" / ".ssh" / "config"
    home_cfg.parent.mkdir(parents=True)
    home_cfg.write_text("Host *\n  ControlMaster auto\n  ControlPath ~/.ssh/cm-%C\n")
    assert mux.options("ssh", []) == []  # ~/.ssh/config's own


def test_no_sharing_where_the_control_sockets_path_would_not_fit(tmp_path):
    assert mux.control_dir(tmp_path / ("x" * 60)) is None


why = sshd_mod.unavailable()


@pytest.mark.slow
@pytest.mark.skipif(why is not None, reason=why or "")
def test_a_later_fleet_status_reuses_the_kept_connection(short_state):
    s = sshd_mod.start(1)
    try:
        f = s.fleet_toml(short_state / "fleet.toml")
        d = short_state / "state" / "ssh"

        def status(path: Path) -> None:
            r = subprocess.run(
                [sys.executable, "-m", "sgltui", "--fleet", str(path), "fleet", "status", "--json"],
                capture_output=True,
                text=True,
                timeout=120,
                start_new_session=True,
            )
            hosts = json.loads(r.stdout)["hosts"]
            assert [h["reachable"] for h in hosts] == [True], r.stdout + r.stderr

        status(f)
        socks = list(d.iterdir())
        assert len(socks) == 1 and stat.S_ISSOCK(socks[0].lstat().st_mode)
        masters = _masters(d)
        assert len(masters) == 1  # ControlPersist: it outlived the command
        status(f)
        assert _masters(d) == masters  # the second command's ssh was a client of it
        assert list(d.iterdir()) == socks
        subprocess.run(["ssh", "-S", str(socks[0]), "-O", "exit", "x"], capture_output=True)

        off = short_state / "off.toml"
        off.write_text(f.read_text().replace("[ssh]\n", "[ssh]\nmultiplex = false\n", 1))
        status(off)
        assert list(d.iterdir()) == [] and _masters(d) == []
    finally:
        for p in _masters(short_state / "state" / "ssh"):
            psutil.Process(p).kill()
        sshd_mod.stop(s)


def _masters(d: Path) -> list[int]:
    """The pids of ssh masters whose control socket is in `d` (ssh titles them PATH [mux])."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        line = " ".join(p.info["cmdline"] or [])
        if str(d) in line and "[mux]" in line:
            found.append(p.pid)
    return sorted(found)
