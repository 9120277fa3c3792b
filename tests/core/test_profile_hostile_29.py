"""Hostile profiles, issue 29 (F5, F6, F7): each case failed before its fix (a RecursionError
traceback and an empty list; raw terminal escapes from `show --command`; API keys printed in
clear on a command line that was not the one the agent runs)."""

from __future__ import annotations

import json
import shlex
import time

import pytest

from sgltui.cli import main
from sgltui.core import launch_secrets
from sgltui.core.flags import PROBE_TIMEOUT_S
from sgltui.core.profiles import (
    MAX_EXTENDS_DEPTH,
    MAX_NESTING,
    ProfileError,
    get_profile,
    read_raw,
    scan_profiles,
)
from tests.core.helpers import write
from tests.fixtures.cli import sgltui


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _nested(tmp_path, depth: int = 500) -> None:
    write(tmp_path, "deep.toml", f'name = "deep"\n[server]\nx = {"[" * depth}{"]" * depth}\n')
    write(tmp_path, "fine.toml", 'name = "fine"\nlauncher = "sim"\n[server]\nmodel-path = "m"\n')


def test_500_nested_arrays_are_one_line_and_the_rest_is_listed(capsys, tmp_path):
    """F5: RecursionError with a traceback, and nothing listed."""
    _nested(tmp_path)
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "list")
    assert rc == 0 and "Traceback" not in err
    assert any(line.split()[1:2] == ["fine"] for line in out.splitlines()[1:])
    mine = [line for line in err.splitlines() if "deep.toml" in line]
    assert len(mine) == 1 and "nested" in mine[0] and len(mine[0]) < 300, err
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "validate", "--bundled")
    assert rc == 1 and "Traceback" not in out + err
    mine = [line for line in out.splitlines() if "deep.toml" in line]
    assert len(mine) == 1 and "nested" in mine[0], out
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "list", "--json")
    assert rc == 0 and {"fine"} <= {r.get("name") for r in json.loads(out)}


def test_nesting_that_parses_is_still_bounded(tmp_path):
    """A depth tomllib can read (20) is refused too, at its line: code downstream recurses."""
    _nested(tmp_path, MAX_NESTING + 4)
    with pytest.raises(ProfileError) as exc:
        read_raw(tmp_path / "deep.toml")
    assert "deep.toml:3: server.x: nested more than" in str(exc.value)
    _nested(tmp_path, MAX_NESTING)
    assert read_raw(tmp_path / "deep.toml").data["server"]["x"]


OSC52 = "\x1b]52;c;ZWNobyBvd25lZA==\x07"  # writes the clipboard
TITLE = "\x1b]0;owned\x07"  # sets the window title


def test_show_command_escapes_terminal_escapes(capsys, tmp_path):
    """F6: [env] and [server] values reached the terminal raw."""
    (tmp_path / "e.toml").write_text(
        'name = "e"\nlauncher = "sim"\n'
        f"[server]\nmodel-path = {json.dumps('m' + TITLE)}\n"
        f"[env]\nNOTE = {json.dumps('hi' + OSC52)}\n",
        encoding="utf-8",
    )
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "show", "e", "--command")
    assert rc == 0
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "\\x1b]52;c;" in out and "\\x1b]0;owned\\x07" in out, "escaped, as `list` shows them"


SECRETS = {"api-key": "sk-live-0123456789", "admin-api-key": "adm-0123456789"}
ENV_SECRETS = {
    "HF_TOKEN": "hf_abcdefghijk",
    "WANDB_API_KEY": "wb-0123456789",
    "S3_SECRET": "s3-xyz123",
}


def test_show_command_is_what_runs_with_keys_masked(capsys, tmp_path):
    """F7: the keys were printed in clear, on a command line that passed them as flags where
    the agent passes them in a --config file."""
    env = "".join(f'{k} = "{v}"\n' for k, v in ENV_SECRETS.items())
    flags = "".join(f'{k} = "{v}"\n' for k, v in SECRETS.items())
    write(
        tmp_path,
        "k.toml",
        f'name = "k"\nlauncher = "sim"\n[server]\nmodel-path = "m"\nport = 30123\n{flags}'
        f'[env]\nHF_HOME = "/data/hf"\n{env}',
    )
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "show", "k", "--command")
    assert rc == 0
    for secret in [*SECRETS.values(), *ENV_SECRETS.values()]:
        assert secret not in out + err
    words = shlex.split(out.strip())
    for name in ENV_SECRETS:
        assert f"{name}=***" in words
    assert "HF_HOME=/data/hf" in words, "what is not a secret is shown as it is"
    # The argv is the one the agent launches (launch_secrets.launch_command), up to the name of
    # the --config file, which is new at each launch.
    profile = get_profile("k", [tmp_path])
    argv, config = launch_secrets.launch_command(profile, tmp_path / "secrets")
    assert config is not None
    shown = words[len(profile.env) :]
    assert shown[:-1] == argv[:-1] and shown[-2] == "--config"
    assert "--api-key" not in shown and "--admin-api-key" not in shown
    assert "api-key: ***" in out + err and "admin-api-key: ***" in out + err


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("$(id)", "is not an IP address or a host name"),
        ("a b", "is not an IP address or a host name"),
        ("-x.example", "is not an IP address or a host name"),
        ("no-such-host.invalid", "is not an IP address or a host name this host resolves"),
        ("127.0.0.1", None),
        ("0.0.0.0", None),
        ("::", None),
        ("localhost", None),
    ],
)
def test_validate_refuses_a_host_that_is_no_address(capsys, tmp_path, host, problem):
    """F9: `host = "$(id)"` passed validate and failed in the start with a gaierror."""
    write(
        tmp_path,
        "h.toml",
        f'name = "h"\nlauncher = "sim"\n[server]\nmodel-path = "m"\nhost = {json.dumps(host)}\n',
    )
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "validate", "h")
    lines = [line for line in out.splitlines() if "host" in line and "h.toml" in line]
    if problem is None:
        assert rc == 0 and lines == [], out
    else:
        assert rc == 1 and len(lines) == 1 and problem in lines[0], out
        assert "h.toml:5: host:" in lines[0]


@pytest.mark.slow
def test_validate_bounds_a_slow_interpreter_and_names_its_profile(tmp_path):
    """F12: validate ran each profile's `python` with a 30 s bound, one after the other, and
    said nothing of which one was slow (one slow interpreter made it take 31 s)."""
    slow = tmp_path / "bin" / "python"
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\nexec sleep 60\n")  # exec: the timeout's kill reaches the sleep
    slow.chmod(0o755)
    write(
        tmp_path, "p/slow.toml", f'name = "slow"\npython = "{slow}"\n[server]\nmodel-path = "m"\n'
    )
    for i in range(3):  # the same interpreter, spelt otherwise: asked once
        write(tmp_path, f"p/also{i}.toml", f'name = "also{i}"\npython = "{slow.parent}/./python"\n')
    write(tmp_path, "p/fine.toml", 'name = "fine"\n[server]\nmodel-path = "m"\n')
    started = time.monotonic()
    r = sgltui("--profiles", str(tmp_path / "p"), "profiles", "validate", timeout=120)
    took = time.monotonic() - started
    assert took < PROBE_TIMEOUT_S + 12, f"validate took {took:.1f} s"
    notes = [line for line in r.stdout.splitlines() if "slow interpreter" in line]
    assert len(notes) == 1, r.stdout + r.stderr
    assert "also0, also1, also2, slow" in notes[0] and f"within {PROBE_TIMEOUT_S:.0f} s" in notes[0]
    assert "5 profiles checked" in r.stdout and "Traceback" not in r.stderr


def test_a_resolution_reused_down_a_chain_follows_a_reread_parent(tmp_path):
    """Resolutions are reused by the children (1,000 profiles in chains of 32 listed in 4.7 s):
    a file re-read since (ProfileIndex replaces its raw) must not leave a stale one in use."""
    write(
        tmp_path, "a.toml", 'name = "a"\nlauncher = "sim"\n[server]\nmodel-path = "m"\nport = 1\n'
    )
    write(tmp_path, "b.toml", 'name = "b"\nextends = "a"\n')
    write(tmp_path, "c.toml", 'name = "c"\nextends = "b"\n')
    found = scan_profiles([tmp_path])
    assert found.resolve("c").server["port"] == 1 and found.resolve("b").parents == ("a",)
    write(
        tmp_path, "a.toml", 'name = "a"\nlauncher = "sim"\n[server]\nmodel-path = "m"\nport = 2\n'
    )
    found.raw["a"] = read_raw(tmp_path / "a.toml")
    assert found.resolve("c").server["port"] == 2
    assert found.resolve("c").parents == ("b", "a")
    # Depth still counts through a reused resolution.
    for i in range(MAX_EXTENDS_DEPTH + 1):
        write(tmp_path, f"d{i}.toml", f'name = "d{i}"\nextends = "{f"d{i - 1}" if i else "a"}"\n')
    found = scan_profiles([tmp_path])
    assert len(found.resolve(f"d{MAX_EXTENDS_DEPTH - 1}").parents) == MAX_EXTENDS_DEPTH
    with pytest.raises(ProfileError, match="levels deep"):
        found.resolve(f"d{MAX_EXTENDS_DEPTH}")


def test_importing_what_show_command_prints_leaves_the_masked_secrets_out(capsys, tmp_path):
    """`profiles import -- "$(profiles show NAME --command)"` (README) gave config = the
    secrets file's placeholder path and HF_TOKEN = "***"."""
    write(
        tmp_path,
        "k.toml",
        'name = "k"\nlauncher = "sim"\n[server]\nmodel-path = "m"\napi-key = "sk-0123456789"\n'
        '[env]\nHF_TOKEN = "hf_0123456789"\nHF_HOME = "/data/hf"\n',
    )
    rc, command, _ = run(capsys, "--profiles", str(tmp_path), "profiles", "show", "k", "--command")
    assert rc == 0
    rc, out, err = run(capsys, "profiles", "import", "--", command.strip())
    assert rc == 0, err
    assert "config" not in out and "***" not in out and 'HF_HOME = "/data/hf"' in out
    assert "left out --config" in err and "left out HF_TOKEN (masked)" in err
