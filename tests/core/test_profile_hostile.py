"""Hostile profile files (issue 18, defect 6): huge names, deep `extends`, terminal escapes,
duplicate names. Each case failed before the fix (3.5 GB printed, RecursionError, raw ESC on
stdout, a silently dropped file)."""

from __future__ import annotations

import json

import pytest

from sgltui.cli import main
from sgltui.core.profiles import (
    MAX_EXTENDS_DEPTH,
    MAX_NAME_LENGTH,
    ProfileError,
    read_raw,
    scan_profiles,
)
from sgltui.core.safe_text import printable
from tests.core.helpers import write


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_huge_name_is_refused_and_list_stays_small(capsys, tmp_path):
    write(tmp_path, "big.toml", f'name = "{"x" * 5_000_000}"\n[server]\nmodel-path = "m"\n')
    with pytest.raises(ProfileError) as exc:
        read_raw(tmp_path / "big.toml")
    message = str(exc.value)
    assert f"longer than {MAX_NAME_LENGTH} characters" in message and len(message) < 300
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "list")
    assert rc == 0
    assert len(out) + len(err) < 10_000, "the name is neither listed nor echoed in full"
    assert "big.toml:1: name:" in err


@pytest.mark.parametrize("name", ["a b", "-x", "a/b", "x\x1b[2J", "", "é" * 3, "a;rm"])
def test_names_with_odd_characters_are_refused(tmp_path, name):
    path = tmp_path / "p.toml"
    path.write_text(f"name = {json.dumps(name)}\n", encoding="utf-8")
    with pytest.raises(ProfileError) as exc:
        read_raw(path)
    assert "name:" in str(exc.value) and "\x1b" not in str(exc.value)


def test_a_file_stem_that_is_not_a_valid_name_needs_a_name_line(tmp_path):
    path = write(tmp_path, "has space.toml", '[server]\nmodel-path = "m"\n')
    with pytest.raises(ProfileError, match="set name ="):
        read_raw(path)
    ok = write(tmp_path, "has space2.toml", 'name = "fine"\n[server]\nmodel-path = "m"\n')
    assert read_raw(ok).name == "fine"


def test_long_descriptions_are_cut_when_listed(capsys, tmp_path):
    write(tmp_path, "d.toml", f'name = "d"\ndescription = "{"y" * 100_000}"\n')
    rc, out, _ = run(capsys, "--profiles", str(tmp_path), "profiles", "list")
    assert rc == 0
    row = next(line for line in out.splitlines() if " d " in line)
    assert len(row) < 200 and row.endswith("…")


def _chain(directory, depth: int) -> None:
    write(directory, "p0.toml", 'name = "p0"\n[server]\nmodel-path = "m"\n')
    for i in range(1, depth + 1):
        write(directory, f"p{i}.toml", f'name = "p{i}"\nextends = "p{i - 1}"\n')


def test_a_1000_level_extends_chain_is_a_clean_error(capsys, tmp_path):
    _chain(tmp_path, 1000)
    found = scan_profiles([tmp_path])
    with pytest.raises(ProfileError) as exc:
        found.resolve("p1000")
    assert f"more than {MAX_EXTENDS_DEPTH} levels" in str(exc.value)
    assert found.resolve(f"p{MAX_EXTENDS_DEPTH}").parents[-1] == "p0"
    rc, out, err = run(capsys, "--profiles", str(tmp_path), "profiles", "list")
    assert rc == 0 and "Traceback" not in err
    assert " p1 " in out, "the profiles that resolve are still listed"


def test_cycles_are_still_reported_iteratively(tmp_path):
    write(tmp_path, "a.toml", 'name = "a"\nextends = "b"\n')
    write(tmp_path, "b.toml", 'name = "b"\nextends = "c"\n')
    write(tmp_path, "c.toml", 'name = "c"\nextends = "a"\n')
    with pytest.raises(ProfileError, match="inheritance cycle a -> b -> c -> a"):
        scan_profiles([tmp_path]).resolve("a")


ESC = "\x1b]0;owned\x07\x1b[2J"


def test_terminal_escapes_never_reach_stdout(capsys, tmp_path):
    (tmp_path / "e.toml").write_text(
        f'name = "e"\ndescription = {json.dumps("hi" + ESC)}\n'
        f'[server]\n{json.dumps("bad" + ESC)} = 1\nmodel-path = "m"\n',
        encoding="utf-8",
    )
    (tmp_path / "x\x1b[31m.toml").write_text("name = \n", encoding="utf-8")
    for argv in (
        ["profiles", "list"],
        ["profiles", "list", "--json"],
        ["profiles", "show", "e"],
        ["profiles", "validate", "e"],
        ["profiles", "validate"],
    ):
        _rc, out, err = run(capsys, "--profiles", str(tmp_path), *argv)
        assert "\x1b" not in out + err and "\x07" not in out + err, argv
    _rc, out, _ = run(capsys, "--profiles", str(tmp_path), "profiles", "list")
    assert "hi\\x1b]0;owned\\x07" in out, "shown escaped, so the user sees what is there"


def test_printable_escapes_controls_and_cuts():
    assert printable("a\x1b[0mb\nc\u202ed") == "a\\x1b[0mb\\nc\\u202ed"
    assert printable("x" * 50, limit=10) == "x" * 9 + "…"
    assert printable("plain text é ✓") == "plain text é ✓"


def test_two_files_with_one_name_in_one_folder_are_reported(capsys, tmp_path):
    write(tmp_path, "one.toml", 'name = "same"\n[server]\nmodel-path = "a"\n')
    write(tmp_path, "sub/two.toml", 'name = "same"\n[server]\nmodel-path = "b"\n')
    found = scan_profiles([tmp_path])
    assert found.resolve("same").server["model-path"] == "a", "the first file keeps the name"
    (error,) = [e for p, e in found.errors.items() if p.endswith("two.toml")]
    assert "also given by" in str(error) and "one.toml" in str(error)
    rc, out, _ = run(capsys, "--profiles", str(tmp_path), "profiles", "validate")
    assert rc == 1 and "two.toml:1: name: profile name 'same' is also given by" in out


def test_a_later_folder_still_overrides_an_earlier_one(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    write(first, "x.toml", 'name = "x"\n[server]\nmodel-path = "a"\n')
    write(second, "x.toml", 'name = "x"\n[server]\nmodel-path = "b"\n')
    found = scan_profiles([first, second])
    assert found.resolve("x").server["model-path"] == "b"
    assert not found.errors


def test_dates_inside_tables_and_arrays_render(tmp_path):
    """Found by the fuzz test: a TOML date inside an array raised TypeError from json.dumps."""
    path = write(
        tmp_path,
        "d.toml",
        'name = "d"\n[server]\nmodel-path = "m"\njson-model-override-args = {at = 1979-05-27}\n'
        "x = [07:32:00]\n",
    )
    from sgltui.core.profiles import get_profile

    argv = get_profile(str(path)).flag_argv()
    assert argv[-3:] == ['{"at":"1979-05-27"}', "--x", "07:32:00"]
