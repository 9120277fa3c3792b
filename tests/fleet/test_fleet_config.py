"""fleet.toml: every bad value is one line naming the file, the key and the fix."""

from __future__ import annotations

import pytest

from sgltui.fleet import config, ssh
from sgltui.fleet.config import FleetConfigError, Host


def load(tmp_path, text: str):
    p = tmp_path / "fleet.toml"
    p.write_text(text)
    return config.load(p)


def test_hosts_ssh_and_remote_command(tmp_path):
    f = load(
        tmp_path,
        '[ssh]\ncommand = "/usr/bin/ssh"\noptions = ["-F", "cfg"]\n'
        '[[host]]\nname = "gpu1"\nssh = "alice@gpu1"\n'
        '[[host]]\nname = "gpu2"\nssh = "alice@gpu2"\nsgltui = "/opt/v env/bin/sgltui"\n'
        'address = "10.0.0.2"\n',
    )
    assert [h.name for h in f.hosts] == ["gpu1", "gpu2"]
    assert f.host("gpu2").address == "10.0.0.2"
    argv = ssh.bridge_argv(f, f.host("gpu2"))
    assert argv[0] == "/usr/bin/ssh" and "BatchMode=yes" in argv
    assert argv[-3:] == ["alice@gpu2", "--", "'/opt/v env/bin/sgltui' agent bridge"]
    assert config.split_address("gpu1/a") == ("gpu1", "a")
    assert config.split_address("a") == (None, "a")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no hosts"),
        ("[[host]]\nname = 'a'\n", "needs ssh"),
        ("[[host]]\nname = 'a/b'\nssh = 'x'\n", "a name is letters"),
        ("[[host]]\nname = 'a'\nssh = '-oProxyCommand=x'\n", "starts with '-'"),
        ("[[host]]\nname = 'a'\nssh = 'x'\n[[host]]\nname = 'a'\nssh = 'y'\n", "two hosts"),
        ("[[host]]\nname = 'a'\nssh = 'x'\nport = 22\n", "no key 'port'"),
        ("[ssh]\noptions = '-F x'\n[[host]]\nname = 'a'\nssh = 'x'\n", "list of strings"),
        ("[[host]\n", "fix the TOML"),
        ("[[pool]]\nname = 'p'\n[[host]]\nname = 'a'\nssh = 'x'\n", "two or more host/slot"),
        (
            "[[pool]]\nname = 'p'\nslots = ['a/0', 'b/0']\ngateway = 'a'\n"
            "[[host]]\nname = 'a'\nssh = 'x'\n[[host]]\nname = 'b'\nssh = 'y'\n",
            "host 'b' has no address",
        ),
        (
            "[[pool]]\nname = 'p'\nslots = ['a/0', 'c/0']\ngateway = 'a'\n"
            "[[host]]\nname = 'a'\nssh = 'x'\n",
            "no host named 'c'",
        ),
        (
            "[[pool]]\nname = 'p'\nslots = ['a/0', 'a/1']\ngateway = 'z'\n"
            "[[host]]\nname = 'a'\nssh = 'x'\n",
            "no host named 'z'",
        ),
    ],
)
def test_bad_fleet_files_are_one_line(tmp_path, text, says):
    with pytest.raises(FleetConfigError) as e:
        load(tmp_path, text)
    msg = str(e.value)
    assert says in msg and str(tmp_path) in msg and "\n" not in msg


def test_missing_file_and_unknown_host(tmp_path):
    with pytest.raises(FleetConfigError, match="no fleet file"):
        config.load(tmp_path / "nope.toml")
    f = load(tmp_path, "[[host]]\nname = 'a'\nssh = 'x'\n")
    with pytest.raises(FleetConfigError, match="no host named 'b'.*hosts: a"):
        f.host("b")


def test_ssh_failures_name_the_host_and_the_fix():
    h = Host("gpu1", "alice@gpu1", sgltui="/opt/sgltui")
    cases = {
        "Host key verification failed.": "known_hosts",
        "alice@gpu1: Permission denied (publickey).": "without a password",
        "ssh: Could not resolve hostname gpu1: Name or service not known": "fix ssh = ...",
        "ssh: connect to host gpu1 port 22: Connection refused": "sshd running",
    }
    for err, fix in cases.items():
        line = ssh.explain(h, 255, err)
        assert line.startswith("host gpu1 (alice@gpu1): ") and fix in line, line
    assert "not on the remote PATH" in ssh.explain(h, 127, "sh: 1: /opt/sgltui: not found")
    # issue 35: a one-shot command (`sgltui --host gpu1 status`) exits: it must not say
    # "retrying"; a link that does retry says so
    timeout = "ssh: connect to host gpu1 port 22: Connection timed out"
    assert ssh.explain(h, 255, timeout).endswith("; retrying")
    once = ssh.explain(h, 255, timeout, retrying=False)
    assert "retrying" not in once and "check the network" in once, once


def test_report_merge_moves_each_host_onto_our_clock():
    from sgltui.fleet.report import merge, render_markdown

    a = {"session": {"name": "s1"}, "launches": [{"ts": 1000.0, "slot": "0", "profile": "p"}]}
    # b's clock runs 5 s ahead: its launch at 1004 (its clock) happened before a's at 1000.
    b = {"session": {"name": "s2"}, "launches": [{"ts": 1004.0, "slot": "x", "profile": "q"}]}
    m = merge({"a": (a, 0.0), "b": (b, 5.0), "c": ({"error": "host c: down"}, None)})
    assert [(e["slot"], e["ts"]) for e in m["timeline"]] == [("b/x", 999.0), ("a/0", 1000.0)]
    assert m["hosts"][2]["error"] == "host c: down"
    assert "| b/x | launch | q |" in render_markdown(m)


def test_a_bare_sgltui_with_a_fleet_file_opens_the_hosts_view(tmp_path, monkeypatch):
    from sgltui import cli
    from sgltui.commands import tui as tui_cmd
    from sgltui.tui.fleetsource import FleetSource

    opened: list[str] = []

    def run(args, demo, source=None):
        opened.append("fleet" if isinstance(source, FleetSource) else "host")
        return 0

    monkeypatch.setattr(tui_cmd, "_run", run)
    f = tmp_path / "fleet.toml"
    f.write_text("[[host]]\nname = 'a'\nssh = 'x'\n")
    assert cli.main(["--fleet", str(f)]) == 0  # the one app, on the fleet's hosts
    assert cli.main([]) == 0  # no fleet.toml in this test's config dir: this host's app
    assert cli.main(["tui"]) == 0
    assert cli.main(["--fleet", str(f), "fleet", "tui"]) == 0  # the same, by name
    assert opened == ["fleet", "host", "host", "fleet"]


def test_a_pool_across_hosts_is_parsed(tmp_path):
    f = load(
        tmp_path,
        "[[host]]\nname = 'a'\nssh = 'x'\n[[host]]\nname = 'b'\nssh = 'y'\naddress = '10.0.0.2'\n"
        "[[pool]]\nname = 'xp'\nslots = ['a/0', 'b/0']\ngateway = 'a'\n",
    )
    p = f.pool("xp")
    assert (p.slots, p.gateway, p.port, p.host) == (
        (("a", "0"), ("b", "0")),
        "a",
        30090,
        "127.0.0.1",
    )
    # The gateway's own host may stay on loopback; the others listen on their address.
    assert (f.address("a"), f.address("b")) == ("127.0.0.1", "10.0.0.2")
    with pytest.raises(FleetConfigError, match="no pool named 'q'"):
        f.pool("q")
