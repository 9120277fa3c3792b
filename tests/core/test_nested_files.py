"""Deeply nested TOML and JSON (issue 35 F3): every file sgltui reads says one line naming the
file, never a RecursionError traceback, a dead agent or a crash loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgltui.core import placement
from sgltui.fleet import config as fleet_config
from sgltui.session.jsonl import read_json
from sgltui.tui import config as tui_config

DEEP_TOML = "x = " + "[" * 500 + "]" * 500 + "\n"
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _one_line(exc: BaseException, path: Path) -> None:
    text = str(exc)
    assert str(path) in text and "\n" not in text and "nested too deeply" in text, text


def test_host_toml(tmp_path):
    path = tmp_path / "host.toml"
    path.write_text(DEEP_TOML)
    with pytest.raises(placement.PlacementError) as err:
        placement.load(path)
    _one_line(err.value, path)


def test_fleet_toml(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text(DEEP_TOML)
    with pytest.raises(fleet_config.FleetConfigError) as err:
        fleet_config.load(path)
    _one_line(err.value, path)


def test_tui_toml(tmp_path):
    path = tmp_path / "tui.toml"
    path.write_text(DEEP_TOML)
    with pytest.raises(tui_config.ConfigError) as err:
        tui_config.load_config(path)
    _one_line(err.value, path)


def test_session_json(tmp_path):
    path = tmp_path / "meta.json"
    path.write_text(DEEP_JSON)
    obj, why = read_json(path)
    assert obj is None and why and "nested too deeply" in why
