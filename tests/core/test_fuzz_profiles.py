"""Fuzz: 1,200 seeded generated profile files through load, resolve, validate, render and the
`sgltui profiles` commands. Any exception other than ProfileError is a traceback a user would see
(issue 18: a 1,000-level chain gave RecursionError, escapes reached stdout). Seeded, so a failure
names the seed and the file that reproduce it."""

from __future__ import annotations

import io
import json
import random
import string
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from sgltui.cli import main
from sgltui.core.flags import SIM_FLAGS, load_bundled_catalog
from sgltui.core.profile_import import profile_to_toml
from sgltui.core.profiles import ProfileError, read_raw, scan_profiles
from sgltui.core.validate import check_profile, check_profile_set

SEED = 18_006
FILES = 1200
FOLDERS = 6
CATALOG = load_bundled_catalog()
FLAG_NAMES = sorted(CATALOG.flags)
ALIASES = sorted({a for s in CATALOG.flags.values() for a in s.aliases})
HOSTILE = [
    "\x1b[2J",
    "\x1b]0;title\x07",
    "\u202e",
    "\x00",
    "\n",
    "\t",
    "\x7f",
    "\x9b",
    "é",
    "✓",
    "\U0001f600",
    '"',
    "\\",
    "'",
    "$(id)",
    "; rm -rf /",
    "--port",
    " ",
    "=",
    ".",
    "\u2028",
]


def _toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string (escapes included)


def _text(rng: random.Random, long: bool = False) -> str:
    n = rng.choice([0, 1, 3, 8, 20, 70]) if not long else rng.choice([100, 1000, 20_000])
    pool = string.ascii_letters + string.digits + "-_.+ "
    out = "".join(rng.choice(pool) for _ in range(n))
    if rng.random() < 0.3:
        spot = rng.randrange(len(out) + 1)
        out = out[:spot] + rng.choice(HOSTILE) + out[spot:]
    return out


def _number(rng: random.Random) -> str:
    return rng.choice(
        [
            str(rng.randint(-5, 5)),
            str(rng.randint(-(2**70), 2**70)),
            str(rng.choice([0, 1, 8, 1024, 65535, 65536, 100000])),
            repr(rng.uniform(-10, 10)),
            rng.choice(["nan", "inf", "-inf", "+nan", "0.0", "-0.0", "1e308", "1e-308"]),
        ]
    )


def _value(rng: random.Random, depth: int = 0) -> str:
    kind = rng.random()
    if kind < 0.3:
        return _number(rng)
    if kind < 0.5:
        return rng.choice(["true", "false"])
    if kind < 0.75:
        return _toml_str(
            rng.choice(
                [
                    _text(rng),
                    _number(rng),
                    "32Ki",
                    "32k",
                    "32 KB",
                    "NEXTN",
                    "MTP",
                    "fcfs",
                    '{"a": 1}',
                    "[1, 2]",
                    "{bad json",
                ]
            )
        )
    if kind < 0.85 and depth < 3:
        return "[" + ", ".join(_value(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    if kind < 0.93 and depth < 3:
        items = ", ".join(f"k{i} = {_value(rng, depth + 1)}" for i in range(rng.randint(0, 2)))
        return "{" + items + "}"
    return rng.choice(["1979-05-27T07:32:00Z", "07:32:00", "1979-05-27"])


def _flag(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.55:
        name = rng.choice(FLAG_NAMES)
    elif pick < 0.65:
        name = rng.choice(ALIASES)
    elif pick < 0.75:
        name = rng.choice(sorted(SIM_FLAGS))
    elif pick < 0.8:
        name = "--" + rng.choice(FLAG_NAMES)
    elif pick < 0.85:
        name = rng.choice(FLAG_NAMES).replace("-", "_")
    elif pick < 0.9:
        name = "no-" + rng.choice(FLAG_NAMES)
    else:
        name = _text(rng) or "x"
    return _toml_str(name)


def _profile(rng: random.Random, names: list[str]) -> str:
    lines: list[str] = []
    if rng.random() < 0.9:
        name = rng.choice(names) if rng.random() < 0.1 else f"p{rng.randrange(FILES)}"
        if rng.random() < 0.08:
            name = _text(rng, long=rng.random() < 0.3)
        lines.append(f"name = {_toml_str(name)}")
    if rng.random() < 0.6:
        lines.append(f"description = {_toml_str(_text(rng, long=rng.random() < 0.1))}")
    if rng.random() < 0.3:
        lines.append(f"key = {_toml_str(rng.choice(['1', '2', 'a', '', _text(rng)]))}")
    if rng.random() < 0.6:
        parent = rng.choice(
            [f"p{rng.randrange(FILES)}", rng.choice(names), "p0.toml", "../x.toml", _text(rng)]
        )
        lines.append(f"extends = {_toml_str(parent)}")
    if rng.random() < 0.5:
        lines.append(f"launcher = {_toml_str(rng.choice(['sglang', 'sim', 'sim', 'vllm', '']))}")
    if rng.random() < 0.15:
        lines.append(
            f"python = {_toml_str(rng.choice(['/usr/bin/python3', '~/venv/bin/python', _text(rng)]))}"
        )
    if rng.random() < 0.03:
        lines.append(f"{_flag(rng)} = {_value(rng)}")  # an unknown top-level key
    if rng.random() < 0.05:
        lines.append(f"server = {_value(rng)}")
    else:
        lines.append("[server]")
        if rng.random() < 0.7:
            lines.append(f"model-path = {_toml_str(rng.choice(['org/m', '', _text(rng)]))}")
        for _ in range(rng.randint(0, 8)):
            lines.append(f"{_flag(rng)} = {_value(rng)}")
    if rng.random() < 0.3:
        lines.append("[env]")
        for _ in range(rng.randint(0, 3)):
            env = rng.choice(["HF_HOME", "A", "1BAD", "A=B", "", _text(rng)])
            lines.append(
                f"{_toml_str(env)} = {_value(rng) if rng.random() < 0.2 else _toml_str(_text(rng))}"
            )
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.05:  # broken syntax: cut anywhere, or stray bytes
        text = text[: rng.randrange(len(text) + 1)] + rng.choice(["", "=", "[", '"', "\x00"])
    return text


def _write_files(root: Path, rng: random.Random) -> list[Path]:
    names = [f"p{i}" for i in range(FILES)]
    folders = [root / f"f{i}" for i in range(FOLDERS)]
    paths = []
    for i in range(FILES):
        folder = folders[i % FOLDERS] / ("sub" if rng.random() < 0.2 else "")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"p{i}.toml"
        data = _profile(rng, names).encode("utf-8", "surrogatepass")
        if rng.random() < 0.01:
            data = data + b"\xff\xfe"  # not UTF-8
        path.write_bytes(data)
        paths.append(path)
    return paths


def _attempt(failures: list[str], what: str, fn, *args):
    """Run fn; ProfileError is the expected refusal, anything else is recorded as a failure."""
    try:
        return fn(*args)
    except ProfileError as exc:
        assert "\x1b" not in str(exc) and len(str(exc)) < 5000, (what, str(exc)[:200])
        return None
    except Exception:  # noqa: BLE001 - the point of the fuzz: every other exception is a bug
        failures.append(f"{what}:\n{traceback.format_exc()}")
        return None


def _cli(failures: list[str], *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit:
            pass
        except Exception:  # noqa: BLE001 - see _attempt
            failures.append(f"sgltui {' '.join(argv)}:\n{traceback.format_exc()}")
    text = out.getvalue() + err.getvalue()
    for bad in ("Traceback", "\x1b", "\x07", "\x9b", "\u202e"):
        if bad in text:
            failures.append(f"sgltui {' '.join(argv)} printed {bad!r}")
    return text


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fuzzed_profiles_never_raise_a_traceback(tmp_path, monkeypatch):
    rng = random.Random(SEED)
    paths = _write_files(tmp_path, rng)
    assert len(paths) >= 1000
    failures: list[str] = []

    for path in paths:
        _attempt(failures, f"read_raw {path.name}", read_raw, path)

    folders = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    found = _attempt(failures, "scan_profiles", scan_profiles, folders)
    assert found is not None, failures
    resolved = []
    for name in found.names():
        profile = _attempt(failures, f"resolve {name}", found.resolve, name)
        if profile is None:
            continue
        resolved.append(profile)
        where = f"profile {name} ({profile.source})"
        _attempt(failures, f"validate {where}", check_profile, profile, CATALOG)
        _attempt(failures, f"argv {where}", profile.argv)
        _attempt(failures, f"command_line {where}", profile.command_line)
        _attempt(failures, f"command_hash {where}", profile.command_hash)
        _attempt(failures, f"to_toml {where}", profile_to_toml, profile, True)
    _attempt(failures, "check_profile_set", check_profile_set, resolved)
    assert len(resolved) >= 100, "the generator should make many loadable profiles too"

    monkeypatch.chdir(tmp_path)
    dirs = [a for folder in folders for a in ("--profiles", str(folder))]
    _cli(failures, *dirs, "profiles", "list")
    _cli(failures, *dirs, "profiles", "list", "--json")
    _cli(failures, *dirs, "profiles", "validate", "--bundled")
    # Each command scans all 1,200 files again: a sample of files keeps the test short.
    for path in paths[:: len(paths) // 8]:
        _cli(failures, *dirs, "profiles", "show", str(path))
        _cli(failures, *dirs, "profiles", "validate", "--bundled", str(path))
    for profile in resolved[:5]:
        _cli(failures, *dirs, "profiles", "show", profile.name, "--command")

    assert not failures, f"seed {SEED}: {len(failures)} failures; first:\n" + "\n".join(
        failures[:3]
    )
