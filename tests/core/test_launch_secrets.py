"""Secrets leave argv for a 0600 --config file (issue 18 #7); the file is removed once read."""

from __future__ import annotations

import asyncio
import os
import stat

import pytest

from sgltui.agent.secret_config import launch_argv, remove_when_read
from sgltui.core import launch_secrets
from sgltui.core.flags import load_bundled_catalog
from sgltui.core.profiles import ProfileError, get_profile
from sgltui.core.validate import check_profile
from sgltui.sim.cli import read_yaml_mapping
from tests.core.helpers import write

KEY = "sk-Abc.123_~!#$%&*+/=?^`{|}-xyz"


def _profile(tmp_path, extra: str = "", launcher: str = "sim"):
    body = (
        f'name = "s"\nlauncher = "{launcher}"\n[server]\nmodel-path = "org/m"\n'
        f'api-key = "{KEY}"\nadmin-api-key = "adm-{KEY}"\nport = 30001\n{extra}'
    )
    return get_profile(str(write(tmp_path, "s.toml", body)))


def test_the_argv_names_a_0600_file_and_holds_no_key(tmp_path):
    folder = tmp_path / "secrets"
    argv, path = launch_secrets.launch_command(_profile(tmp_path), folder)
    assert KEY not in " ".join(argv)
    assert argv[-2:] == ["--config", str(path)] and "--port" in argv
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    # SGLang reads it with yaml.safe_load; the simulator with the same reader (or its subset).
    expected = {"api-key": KEY, "admin-api-key": f"adm-{KEY}"}
    assert read_yaml_mapping(path.read_text()) == expected
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(path.read_text()) == expected


def test_no_secret_no_file(tmp_path):
    path = write(tmp_path, "p.toml", 'name = "p"\n[server]\nmodel-path = "m"\n')
    profile = get_profile(str(path))
    argv, config = launch_secrets.launch_command(profile, tmp_path / "secrets")
    assert config is None and argv == profile.argv()
    assert not (tmp_path / "secrets").exists()


@pytest.mark.parametrize("key", ["has space", "ключ", "tab\there", "x\x1b[0m"])
def test_keys_that_cannot_be_a_header_are_refused(tmp_path, key):
    body = f'name = "s"\n[server]\nmodel-path = "m"\napi-key = {__import__("json").dumps(key)}\n'
    profile = get_profile(str(write(tmp_path, "s.toml", body)))
    errors = [str(i) for i in check_profile(profile, load_bundled_catalog()) if i.is_error]
    assert any("api-key: must be printable ASCII" in e for e in errors), errors
    with pytest.raises(ProfileError, match="printable ASCII"):
        launch_secrets.launch_command(profile, tmp_path / "secrets")


def test_a_profile_config_file_and_a_key_do_not_mix(tmp_path):
    profile = _profile(tmp_path, 'config = "mine.yaml"\n', launcher="sglang")
    errors = [str(i) for i in check_profile(profile, load_bundled_catalog()) if i.is_error]
    assert any("config: cannot be combined with api-key" in e for e in errors), errors
    with pytest.raises(ProfileError, match="takes only one"):
        launch_secrets.launch_command(profile, tmp_path / "secrets")


def test_stale_files_are_swept(tmp_path):
    folder = tmp_path / "secrets"
    old = launch_secrets.write_config(folder, {"api-key": "a"})
    new = launch_secrets.write_config(folder, {"api-key": "b"})
    os.utime(old, (1, 1))
    assert launch_secrets.sweep(folder) == 1
    assert not old.exists() and new.exists()


async def test_removed_once_read(tmp_path):
    path = launch_secrets.write_config(tmp_path / "s", {"api-key": "k"})
    os.utime(path, ns=(1_000_000_000, 2_000_000_000))  # atime before mtime: a read moves it
    task = asyncio.create_task(remove_when_read(path, lambda: False, poll_s=0.01))
    await asyncio.sleep(0.05)
    assert path.exists(), "kept until the server has read it"
    path.read_text()
    assert await asyncio.wait_for(task, 10) == "read"
    assert not path.exists()


async def test_removed_when_the_launch_is_over_even_unread(tmp_path):
    path = launch_secrets.write_config(tmp_path / "s", {"api-key": "k"})
    over = False
    task = asyncio.create_task(remove_when_read(path, lambda: over, poll_s=0.01))
    await asyncio.sleep(0.05)
    assert path.exists()
    over = True
    assert await asyncio.wait_for(task, 10) == "launch over"
    assert not path.exists()


async def test_launch_argv_starts_the_watcher(tmp_path):
    argv = launch_argv(_profile(tmp_path), tmp_path / "state", lambda: True)
    config = argv[argv.index("--config") + 1]
    for _ in range(200):
        if not os.path.exists(config):
            break
        await asyncio.sleep(0.02)
    assert not os.path.exists(config)


def test_the_sims_own_reader_without_pyyaml(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "yaml", None)  # import yaml -> ImportError
    text = launch_secrets.config_text({"api-key": KEY}) + "# note\nport: 30001\nx: word\n"
    assert read_yaml_mapping(text) == {"api-key": KEY, "port": 30001, "x": "word"}


def test_the_agents_resolved_profile_takes_the_same_channel(tmp_path):
    """The agent launches a Resolved (agent/slot/resolved.py), not a core Profile: it must pass the
    flags less the secrets through (a launch with a key failed with a TypeError otherwise)."""
    from sgltui.agent.slot.resolved import Resolved

    argv, path = launch_secrets.launch_command(Resolved.of(_profile(tmp_path)), tmp_path / "s")
    assert KEY not in " ".join(argv) and argv[-2:] == ["--config", str(path)]


def test_a_key_that_leads_with_a_dash_is_refused_and_never_generated(tmp_path, monkeypatch):
    """SGLang's --config merge turns `api-key: "-x"` into `--api-key -x`, which argparse reads as
    a flag: the real simulator exits 2 on it (as SGLang does). A pool member's key came from
    token_urlsafe, which led with "-" 1 time in 64 (CI's `fleet pool up` flake, exit code 2)."""
    import subprocess
    import sys

    from sgltui.agent.pools.exposure import Exposures

    bad = "-" + KEY
    path = write(tmp_path, "bad.yaml", launch_secrets.config_text({"api-key": bad}))
    sim = subprocess.run(
        [sys.executable, "-m", "sgltui.sim", "--model-path", "org/m", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sim.returncode == 2 and "argument --api-key: expected one argument" in sim.stderr
    body = f'name = "s"\n[server]\nmodel-path = "m"\napi-key = "{bad}"\n'
    profile = get_profile(str(write(tmp_path, "s.toml", body)))
    errors = [str(i) for i in check_profile(profile, load_bundled_catalog()) if i.is_error]
    assert any('api-key: must not start with "-"' in e for e in errors), errors
    with pytest.raises(ProfileError, match='must not start with "-"'):
        launch_secrets.launch_command(profile, tmp_path / "secrets")
    # new_key() draws again; an exposure keeps its key unless it is one of those
    drawn = iter(["-first", "second"])
    monkeypatch.setattr(launch_secrets.secrets, "token_urlsafe", lambda n: next(drawn))
    assert launch_secrets.new_key() == "second"
    state = tmp_path / "state"
    (state / "secrets").mkdir(parents=True)
    (state / "secrets" / "exposed.json").write_text(
        '{"0": {"address": "10.0.0.1", "api_key": "-old"}, "1": {"address": "a", "api_key": "k"}}'
    )
    drawn = iter(["new"])
    exposures = Exposures(state)
    assert exposures.set("0", "10.0.0.1").api_key == "new"
    assert exposures.set("1", "a").api_key == "k"
