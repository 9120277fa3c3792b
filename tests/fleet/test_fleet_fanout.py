"""A fleet of many hosts (issue 35): `fleet status` to 2,000 hosts started 2,000 ssh at once
and printed 2,000 'Future exception was never retrieved'. The fan-out is bounded, and each
unreachable host is its own line."""

from __future__ import annotations

import os
import stat
import sys
import textwrap

from sgltui.fleet import link
from tests.fixtures.cli import sgltui

HOSTS = 150


def test_fleet_status_to_many_hosts_bounds_the_ssh_fanout(tmp_path):
    running = tmp_path / "running"
    running.mkdir()
    peak = tmp_path / "peak"
    fake = tmp_path / "fake-ssh"
    # an ssh that cannot connect, after a moment: counts how many run at once
    fake.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import os, sys, time
            me = os.path.join({str(running)!r}, str(os.getpid()))
            open(me, "w").close()
            n = len(os.listdir({str(running)!r}))
            with open({str(peak)!r}, "a") as f:
                f.write(f"{{n}}\\n")
            time.sleep(0.3)
            os.unlink(me)
            print("ssh: connect to host x port 22: Connection timed out", file=sys.stderr)
            sys.exit(255)
            """
        )
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    hosts = "".join(f'[[host]]\nname = "h{i}"\nssh = "u@h{i}"\n\n' for i in range(HOSTS))
    f = tmp_path / "fleet.toml"
    f.write_text(f'[ssh]\ncommand = "{fake}"\n\n' + hosts)
    r = sgltui("--fleet", str(f), "fleet", "status", "--timeout", "20", timeout=240)
    assert r.returncode != 0
    most = max(int(x) for x in peak.read_text().split())
    assert most <= link.FANOUT, most
    assert "never retrieved" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert sum("unreachable" in ln for ln in r.stdout.splitlines()) >= HOSTS, r.stdout[-2000:]
    assert os.listdir(running) == []
