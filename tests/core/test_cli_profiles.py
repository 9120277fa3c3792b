"""`sgltui profiles ...`: outputs, exit codes, one-line errors."""

from __future__ import annotations

import json

import pytest

from sgltui.cli import main
from sgltui.core.profiles import get_profile
from tests.core.helpers import write
from tests.fixtures.cli import sgltui


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_shows_keys_names_launchers(capsys):
    rc, out, err = run(capsys, "profiles", "list")
    assert rc == 0 and err == ""
    rows = [line.split() for line in out.splitlines()[1:]]
    by_name = {r[1]: r for r in rows}
    assert by_name["mtp"][:4] == ["#", "mtp", "sglang", "base"]
    assert by_name["demo-mtp"][:4] == ["3", "demo-mtp", "sim", "mtp"]
    assert len(rows) == 10


def test_list_json_and_broken_files(capsys, tmp_path):
    write(tmp_path, "bad.toml", "name = \n")
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "list", "--json")
    assert rc == 0
    data = json.loads(out)
    assert {"name": "demo-base", "key": "1", "launcher": "sim"}.items() <= data[1].items()
    assert any("bad.toml:1: invalid TOML" in d.get("error", "") for d in data)


def test_show_prints_resolved_toml_and_command(capsys):
    rc, out, _ = run(capsys, "profiles", "show", "mtp-hicache")
    assert rc == 0
    header = out.splitlines()[0]
    assert header.startswith("# ") and header.endswith(
        "profiles/mtp-hicache.toml  (inherits: mtp-hicache -> mtp -> base; values below are resolved)"
    )
    assert 'model-path = "Qwen/Qwen3.6-27B"' in out and "enable-hierarchical-cache = true" in out
    rc, out, _ = run(capsys, "profiles", "show", "mtp", "--command")
    assert rc == 0
    assert out.strip() == get_profile("mtp").command_line()
    assert " -m sglang.launch_server --model-path Qwen/Qwen3.6-27B " in out and out.startswith(
        "CUDA_VISIBLE_DEVICES=0 "
    )


def test_show_unknown_is_one_line_error(capsys):
    rc, out, err = run(capsys, "profiles", "show", "mtpp")
    assert rc == 1 and out == ""
    assert err == "sgltui: error: no profile named 'mtpp'; did you mean mtp, no-mtp?\n"


def test_validate_all_bundled_says_which_catalog(capsys):
    rc, out, _ = run(capsys, "profiles", "validate")
    assert rc == 0
    assert "catalog: SGLang 0.5.23 flag catalog bundled with sgltui" in out
    assert out.strip().endswith("10 profiles checked: 0 errors, 0 warnings")


def test_validate_paths_errors_warnings_and_strict(capsys, tmp_path):
    bad = write(
        tmp_path,
        "bad.toml",
        """
        name = "bad"
        extends = "base"
        [server]
        speculative-algorithm = "MTP"
    """,
    )
    warn = write(
        tmp_path, "warn.toml", 'name = "warn"\nextends = "base"\n[server]\ncontext-length = "32k"\n'
    )
    rc, out, _ = run(capsys, "profiles", "validate", str(bad))
    assert rc == 1
    assert (
        f'{bad}:4: speculative-algorithm: "MTP" is not a speculative algorithm name in SGLang'
        in out
    )
    assert f"{bad}:4: speculative-algorithm: warning: without max-running-requests" in out
    assert out.strip().endswith("1 profile checked: 1 error, 1 warning")
    rc, out, _ = run(capsys, "profiles", "validate", str(warn))
    assert rc == 0 and "warning: '32k' means 32000" in out
    assert run(capsys, "profiles", "validate", "--strict", str(warn))[0] == 1
    # A directory, a name and a missing file.
    rc, out, _ = run(
        capsys,
        "--profiles",
        str(tmp_path),
        "profiles",
        "validate",
        str(tmp_path),
        "mtp",
        str(tmp_path / "nope.toml"),
    )
    assert (
        rc == 1
        and "3 profiles checked: 2 errors" in out
        and "nope.toml: no such profile file" in out
    )


def test_validate_reports_malformed_toml_with_line(capsys, tmp_path):
    path = write(tmp_path, "broken.toml", 'name = "x"\n[server\n')
    rc, out, _ = run(capsys, "profiles", "validate", str(path))
    assert rc == 1
    assert f"{path}:2: invalid TOML: " in out


def test_import_round_trip_through_the_cli(capsys, tmp_path):
    rc, command, _ = run(capsys, "profiles", "show", "demo-mtp-hicache", "--command")
    out_file = tmp_path / "copy.toml"
    rc, out, err = run(capsys, "profiles", "import", "-o", str(out_file), "--", command.strip())
    assert rc == 0 and out == ""
    assert err.startswith(f"wrote {out_file} (profile copy, ")
    copy, original = get_profile(str(out_file)), get_profile("demo-mtp-hicache")
    assert copy.name == "copy"
    assert (copy.launcher, copy.server, copy.env, copy.argv()) == (
        original.launcher,
        original.server,
        original.env,
        original.argv(),
    )
    # Refuses to overwrite; the error says how.
    rc, _, err = run(capsys, "profiles", "import", "-o", str(out_file), "--", command.strip())
    assert (
        rc == 1
        and err
        == f"sgltui: error: {out_file} exists; pass --force to overwrite it or choose another -o FILE\n"
    )


def test_import_to_stdout_and_errors(capsys):
    rc, out, err = run(
        capsys, "profiles", "import", "--name", "x", "--", "sglang", "serve", "org/m", "--tp", "2"
    )
    assert (
        rc == 0
        and out
        == 'name = "x"\nlauncher = "sglang"\n\n[server]\nmodel-path = "org/m"\ntp-size = 2\n'
    )
    rc, out, err = run(
        capsys,
        "profiles",
        "import",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--mamba-scheduler-strategy",
        "no_buffer",
    )
    assert rc == 1 and out == ""
    assert err == (
        "sgltui: error: --mamba-scheduler-strategy is not accepted by SGLang 0.5.23 (renamed after 0.5.12); "
        "use --mamba-radix-cache-strategy\n"
    )
    rc, out, err = run(
        capsys,
        "profiles",
        "import",
        "--",
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--speculative-algorithm",
        "MTP",
        "--max-running-requests",
        "4",
    )
    assert rc == 1 and 'speculative-algorithm: "MTP" is not a speculative algorithm name' in err
    rc, _, err = run(capsys, "profiles", "import")
    assert rc == 2 and err.startswith("sgltui: error: no command line given; write it after --")


@pytest.mark.parametrize(
    "argv",
    [
        ["profiles", "--help"],
        ["profiles", "import", "--help"],
        ["profiles", "validate", "--help"],
        ["profiles", "show", "--help"],
        ["profiles", "list", "--help"],
    ],
)
def test_help_for_every_subcommand(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    assert "usage: sgltui profiles" in capsys.readouterr().out


@pytest.mark.slow
def test_real_process_never_prints_a_traceback(tmp_path):
    broken = write(tmp_path, "b.toml", 'extends = "b"\n[server]\nmodel-path = "m"\n')
    for argv in (
        ["profiles", "show", str(broken)],
        ["profiles", "validate", str(broken)],
        ["profiles", "import", "--", "python", "-m", "sglang.launch_server", "--port"],
    ):
        proc = sgltui(*argv)
        assert proc.returncode == 1, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr + proc.stdout
        lines = (proc.stderr + proc.stdout).strip().splitlines()
        assert any(
            "b.toml:1: extends: inheritance cycle b -> b" in l or "--port needs a value" in l
            for l in lines
        )


def test_missing_profiles_dir_is_an_error(capsys, tmp_path):
    rc, out, err = run(capsys, "--profiles", str(tmp_path / "nope"), "profiles", "list")
    assert rc == 1 and out == ""
    assert (
        err
        == f"sgltui: error: --profiles {tmp_path / 'nope'}: no such directory; give a folder that holds profile .toml files\n"
    )
