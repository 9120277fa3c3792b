"""Per-version flag catalogs: which one a profile is checked with, and migrating between them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from sgltui.cli import main
from sgltui.core.flags import (
    bundled_versions,
    load_bundled_catalog,
    load_live_catalog,
    nearest_bundled_version,
)
from sgltui.core.profiles import get_profile, load_profiles
from sgltui.core.validate import check_profile
from tests.core.helpers import write

VERSIONS = ("0.5.22", "0.5.23")

# Flags every 0.5.22 launch of ours used, all deprecated in both releases (the issue expected
# them to be new in 0.5.23; SGLang 0.5.22's parser already marks them, see the catalogs).
OLD_PROFILE = """
name = "old"
description = "written for SGLang 0.5.22"
python = "{python}"

[server]
model-path = "Qwen/Qwen3.6-27B"   # the model
# two attention-DP groups
dp-size = 2
enable-dp-attention = true
disable-cuda-graph = true  # graphs broke on this box
grpc-mode = true
max-running-requests = 8
"""


def fake_interpreter(tmp_path: Path, version: str, importable: bool = False) -> str:
    """An interpreter whose SGLang is `version` by package metadata; importing SGLang fails
    unless `importable`, so a catalog read through an import shows up as a failure."""
    site = tmp_path / f"site-{version}"
    pkg = site / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        f"__version__ = {version!r}\n" if importable else "raise ImportError('imported!')\n"
    )
    dist = site / f"sglang-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    wrapper = tmp_path / f"python-{version}"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --- bundled catalogs ----------------------------------------------------------------------------


def test_both_releases_are_bundled_and_differ_where_sglang_changed():
    assert set(VERSIONS) <= set(bundled_versions())
    old, new = (load_bundled_catalog(v) for v in VERSIONS)
    assert (old.version, new.version) == VERSIONS
    # 0.5.23 added the --enable-hicache alias and dropped --speculative-skip-dp-mlp-sync.
    assert new.lookup("enable-hicache").name == "enable-hierarchical-cache"
    assert old.lookup("enable-hicache") is None
    assert old.lookup("speculative-skip-dp-mlp-sync") and not new.lookup(
        "speculative-skip-dp-mlp-sync"
    )
    for cat in (old, new):
        assert cat.lookup("grpc-mode").replacement == "--smg-grpc-mode"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_shipped_profile_is_clean_on_each_bundled_catalog(version):
    catalog = load_bundled_catalog(version)
    for name, profile in load_profiles().items():
        if profile.launcher != "sglang":
            continue
        errors = [str(i) for i in check_profile(profile, catalog) if i.is_error]
        assert errors == [], (name, version)


def test_nearest_release_for_unknown_versions():
    assert nearest_bundled_version("0.5.30") == "0.5.23"
    assert nearest_bundled_version("0.5.23.post2") == "0.5.23"
    assert nearest_bundled_version("0.5.22rc1") == "0.5.22"
    assert nearest_bundled_version("0.4.0") == bundled_versions()[0]
    with pytest.raises(ValueError, match="no bundled catalog for SGLang 0.5.30"):
        load_bundled_catalog("0.5.30")


# --- picking by the interpreter's installed version ----------------------------------------------


def test_catalog_is_picked_by_installed_version_without_importing_sglang(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    python = fake_interpreter(tmp_path, "0.5.22")  # importing its sglang raises
    cat = load_live_catalog(python)
    assert (cat.source, cat.version, cat.python) == ("bundled", "0.5.22", python)
    assert cat.describe() == f"SGLang 0.5.22 flag catalog bundled with sgltui for {python}"


def test_unknown_newer_version_uses_nearest_catalog_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    python = fake_interpreter(tmp_path, "0.5.30")  # live reading fails: it cannot import
    cat = load_live_catalog(python)
    assert (cat.source, cat.version, cat.installed) == ("bundled", "0.5.23", "0.5.30")
    assert "SGLang 0.5.30 is installed; no catalog for it, using the nearest (0.5.23)" in (
        cat.describe()
    )
    profile_path = write(
        tmp_path, "p.toml", f'python = "{python}"\n[server]\nmodel-path = "m"\nno-such-flag = 1\n'
    )
    issues = check_profile(get_profile(str(profile_path)))
    assert [i.problem for i in issues] == [
        "unknown flag for SGLang 0.5.30 (checked with the 0.5.23 catalog)"
    ]


def test_validate_names_the_version_of_each_profile(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    old = fake_interpreter(tmp_path, "0.5.22")
    write(
        tmp_path,
        "hi.toml",
        f'python = "{old}"\n[server]\nmodel-path = "m"\nenable-hicache = true\n',
    )
    rc, out, _err = run(capsys, "profiles", "validate", str(tmp_path / "hi.toml"))
    assert rc == 1
    assert f"catalog: SGLang 0.5.22 flag catalog bundled with sgltui for {old}; used for hi" in out
    assert (
        "hi.toml:4: enable-hicache: not accepted by SGLang 0.5.22: another SGLang release's "
        "spelling of enable-hierarchical-cache; write enable-hierarchical-cache = true" in out
    )


# --- migrate -------------------------------------------------------------------------------------


def test_old_profile_migrates_to_one_0_5_23_accepts_without_warnings(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    python = fake_interpreter(tmp_path, "0.5.22")
    path = write(tmp_path, "old.toml", OLD_PROFILE.format(python=python))
    before = path.read_text()
    rc, out, _ = run(capsys, "profiles", "validate", str(path))
    assert rc == 0 and "0 errors, 3 warnings" in out
    assert (
        "enable-dp-attention: warning: deprecated in SGLang 0.5.22 (still accepted, with a "
        "warning); write attn-dp-size = 2 and remove dp-size instead" in out
    )

    rc, diff, err = run(capsys, "profiles", "migrate", str(path), "--to", "0.5.23")
    assert rc == 0, err
    assert path.read_text() == before  # a diff only, without --write
    assert diff.splitlines()[4:] == [
        ' model-path = "Qwen/Qwen3.6-27B"   # the model',
        " # two attention-DP groups",
        "-dp-size = 2",
        "-enable-dp-attention = true",
        "-disable-cuda-graph = true  # graphs broke on this box",
        "-grpc-mode = true",
        "+attn-dp-size = 2",
        '+cuda-graph-backend-decode = "disabled"  # graphs broke on this box',
        '+cuda-graph-backend-prefill = "disabled"',
        "+smg-grpc-mode = true",
        " max-running-requests = 8",
    ]
    assert "after migration: 0 errors, 0 warnings for SGLang 0.5.23" in err

    rc, _, err = run(capsys, "profiles", "migrate", str(path), "--to", "0.5.23", "--write")
    assert rc == 0 and "old file is" in err
    assert (tmp_path / "old.toml.bak").read_text() == before
    profile = get_profile(str(path))
    assert check_profile(profile, load_bundled_catalog("0.5.23")) == []
    assert profile.server["attn-dp-size"] == 2 and "dp-size" not in profile.server
    # Migrated already: a second run has nothing to do and leaves the backup alone.
    rc, out, err = run(capsys, "profiles", "migrate", str(path), "--to", "0.5.23", "--write")
    assert rc == 0 and out == "" and "nothing to migrate for SGLang 0.5.23" in err
    assert not (tmp_path / "old.toml.bak.1").exists()


def test_migrate_keeps_explicit_phase_backend_and_overrides_inherited_dp_size(tmp_path, capsys):
    write(tmp_path, "parent.toml", '[server]\nmodel-path = "m"\ndp-size = 4\n')
    child = write(
        tmp_path,
        "child.toml",
        'extends = "parent"\n[server]\nenable-dp-attention = true\n'
        'disable-cuda-graph = true\ncuda-graph-backend-prefill = "breakable"\n',
    )
    rc, diff, err = run(
        capsys, "--profiles", str(tmp_path), "profiles", "migrate", str(child), "--to", "0.5.23"
    )
    assert rc == 0, err
    added = [l for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert added == ["+attn-dp-size = 4", "+dp-size = 1", '+cuda-graph-backend-decode = "disabled"']


def test_migrate_down_renames_an_alias_the_older_release_lacks(tmp_path, capsys):
    path = write(tmp_path, "new.toml", '[server]\nmodel-path = "m"\nenable-hicache = true\n')
    rc, diff, err = run(capsys, "profiles", "migrate", str(path), "--to", "0.5.22", "--write")
    assert rc == 0, err
    assert "+enable-hierarchical-cache = true" in diff
    assert check_profile(get_profile(str(path)), load_bundled_catalog("0.5.22")) == []


def test_migrate_reports_a_flag_removed_without_successor_and_keeps_it(tmp_path, capsys):
    path = write(
        tmp_path,
        "spec.toml",
        '[server]\nmodel-path = "m"\nspeculative-skip-dp-mlp-sync = true\n',
    )
    rc, out, err = run(capsys, "profiles", "migrate", str(path), "--to", "0.5.23", "--write")
    assert rc == 1 and out == ""
    assert "speculative-skip-dp-mlp-sync: removed in SGLang 0.5.23 with no successor" in err
    assert "speculative-skip-dp-mlp-sync" in path.read_text()


def test_migrate_bad_target_is_one_line(tmp_path, capsys):
    path = write(tmp_path, "p.toml", '[server]\nmodel-path = "m"\n')
    rc, _, err = run(capsys, "profiles", "migrate", str(path), "--to", "latest")
    assert rc == 2 and "not an SGLang version; give one such as" in err


# --- the real parser, where the development machine has it ---------------------------------------

REAL = {
    v: next(
        (
            p
            for p in (
                os.environ.get(f"SGLTUI_SGLANG_{v.replace('.', '_')}_PYTHON"),
                f"/tmp/versions-sglang-{v}/bin/python",
                "/tmp/sglang-cpu-env/bin/python" if v == "0.5.23" else None,
            )
            if p and Path(p).exists()
        ),
        None,
    )
    for v in VERSIONS
}

PARSE = r"""
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
import sglang
p = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
ServerArgs.add_cli_args(p)
ns, extra = p.parse_known_args(json.loads(sys.argv[1]))
print(json.dumps({"version": sglang.__version__, "extra": extra}))
"""


@pytest.mark.skipif(REAL["0.5.23"] is None, reason="no SGLang 0.5.23 env (sglang-cpu-env.sh)")
def test_migrated_profile_parses_with_real_sglang_0_5_23_without_deprecation_warnings(
    tmp_path, capsys
):
    import json
    import subprocess

    path = write(tmp_path, "old.toml", OLD_PROFILE.format(python=sys.executable))
    assert run(capsys, "profiles", "migrate", str(path), "--to", "0.5.23", "--write")[0] == 0
    argv = get_profile(str(path)).flag_argv()
    proc = subprocess.run(
        [REAL["0.5.23"], "-c", PARSE, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=""),
        start_new_session=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"version": "0.5.23", "extra": []}
    assert "deprecated" not in proc.stderr.lower()


# --- launcher entry point: `sglang serve` where the env has it -----------------------------------


def _env_with_serve(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "env" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    program = bin_dir / "sglang"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    return bin_dir


def test_auto_entrypoint_uses_sglang_serve_where_the_env_has_it(tmp_path):
    bin_dir = _env_with_serve(tmp_path)
    path = write(tmp_path, "p.toml", f'python = "{bin_dir}/python"\n[server]\nmodel-path = "m"\n')
    profile = get_profile(str(path))
    assert profile.argv() == [str(bin_dir / "sglang"), "serve", "--model-path", "m"]
    pinned = write(
        tmp_path,
        "q.toml",
        f'python = "{bin_dir}/python"\nentrypoint = "launch_server"\n[server]\nmodel-path = "m"\n',
    )
    assert get_profile(str(pinned)).argv()[1:3] == ["-m", "sglang.launch_server"]
    # sgltui's own interpreter has no `sglang` program next to it: launch_server, as before.
    bare = write(tmp_path, "r.toml", '[server]\nmodel-path = "m"\n')
    assert get_profile(str(bare)).argv()[:3] == [sys.executable, "-m", "sglang.launch_server"]


def test_serve_entrypoint_without_the_program_is_a_one_line_error(tmp_path):
    path = write(tmp_path, "p.toml", 'entrypoint = "serve"\n[server]\nmodel-path = "m"\n')
    (issue,) = [i for i in check_profile(get_profile(str(path))) if i.is_error]
    assert issue.key == "entrypoint" and "has no `sglang serve`" in issue.problem
    assert 'write entrypoint = "launch_server"' in issue.fix
    bad = write(tmp_path, "b.toml", 'entrypoint = "srv"\n[server]\nmodel-path = "m"\n')
    with pytest.raises(Exception, match="unknown entrypoint 'srv'"):
        get_profile(str(bad))


def test_import_reads_both_entry_points_and_renders_back_the_same_command(tmp_path):
    from sgltui.core.profile_import import import_command

    bin_dir = _env_with_serve(tmp_path)
    served = import_command(f"{bin_dir}/sglang serve org/m --tp-size 2", load_bundled_catalog())
    assert served.python == str(bin_dir / "python") and served.entrypoint == "auto"
    assert served.argv() == [
        str(bin_dir / "sglang"),
        "serve",
        "--model-path",
        "org/m",
        "--tp-size",
        "2",
    ]
    module = import_command(
        f"{bin_dir}/python -m sglang.launch_server --model-path org/m", load_bundled_catalog()
    )
    assert module.entrypoint == "launch_server"
    assert module.argv() == [
        str(bin_dir / "python"),
        "-m",
        "sglang.launch_server",
        "--model-path",
        "org/m",
    ]
