"""`sgltui tui` / `sgltui demo`: bad input is one line that says what to do, before any UI opens."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from sgltui.cli import CliError
from sgltui.commands import tui as command


def test_without_a_terminal_it_says_what_to_use_instead():
    out = subprocess.run(
        [sys.executable, "-m", "sgltui", "tui"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a terminal" in lines[0] and "sgltui status" in lines[0]


def test_subcommands_are_registered():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    command.register(sub)
    args = parser.parse_args(["demo", "--no-load", "--theme", "sgltui-paper"])
    assert args.handler is command.open_demo and args.no_load and args.theme == "sgltui-paper"
    assert parser.parse_args(["tui"]).handler is command.open_tui


@pytest.fixture
def tty(monkeypatch):
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)


def test_unknown_theme_is_one_line_with_a_suggestion(tty):
    with pytest.raises(CliError) as info:
        command.open_tui(argparse.Namespace(theme="sgltui-nite", state_dir=None, profiles=[]))
    assert "unknown theme 'sgltui-nite'; did you mean 'sgltui-night'?" == str(info.value)


def test_bad_config_stops_before_the_ui(tty, isolated_env, tmp_path):
    cfg = tmp_path / "config" / "sgltui"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text('[keymap]\n"server.stp" = "k"\n')
    with pytest.raises(CliError) as info:
        command.open_tui(argparse.Namespace(theme=None, state_dir=None, profiles=[]))
    assert "did you mean keymap.server.stop?" in str(info.value) and "\n" not in str(info.value)
