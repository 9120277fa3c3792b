"""`sgltui job ACTION` and `sgltui bench ACTION` are subcommands: each prints its own help and its
own errors, and every command line of the flat form still parses to the same options."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sgltui.cli import build_parser


def help_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "has", "lacks"),
    [
        (("job", "run"), "--choose", ("--unpin", "target2", "verify")),
        (("job", "verify"), "INPUT", ("--choose", "--concurrency")),
        (("job", "set"), "--unpin", ("--choose", "--no-wait")),
        (("bench", "stop"), "RUN_ID", ("--concurrency", "--export-md")),
        (("bench", "compare"), "--export-md", ("--concurrency", "--profile")),
        (("bench", "run"), "--concurrency", ("RUN_ID", "compare")),
    ],
)
def test_an_action_prints_only_its_own_help(capsys, argv, has, lacks):
    text = help_of(capsys, *argv)
    assert text.startswith(f"usage: sgltui {' '.join(argv)} "), text
    assert has in text
    for word in lacks:
        assert word not in text, (word, text)


def test_an_action_has_its_own_errors():
    r = subprocess.run(
        [sys.executable, "-m", "sgltui", "job", "set", "--pin", "--unpin"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "sgltui job set: error: argument --unpin: not allowed with argument --pin" in r.stderr


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["bench", "--pool", "all", "--requests", "4"], {"pool": "all", "requests": 4}),
        (["bench", "--requests", "4", "run"], {"requests": 4, "concurrency": "1,4,16,64"}),
        (["bench", "run", "--requests", "4", "--profile", "a"], {"requests": 4, "profile": ["a"]}),
        (
            ["bench", "compare", "r.json", "--export-md", "m"],
            {"target": "r.json", "export_md": "m"},
        ),
        (["bench", "stop", "r1"], {"target": "r1"}),
        (["job", "run", "in.jsonl", "--concurrency", "4", "--name", "s"], {"target": "in.jsonl"}),
        (["job", "set", "--concurrency", "6"], {"target": None, "concurrency": "6"}),
        (["job", "status", "j1", "--json"], {"target": "j1", "json": True}),
        (["job", "verify", "a", "b"], {"target": "a", "target2": "b"}),
        (["job", "cancel"], {"action": "cancel", "target": None}),
    ],
)
def test_the_flat_command_lines_still_parse(argv, want):
    args = vars(build_parser().parse_args(argv))
    assert {k: args[k] for k in want} == want
