"""Profile text from files reaches the TUI escaped (issue 18 #6): a description holding ESC [2J
or an OSC title sequence must not drive the terminal through the profile list or the palette."""

from __future__ import annotations

from sgltui.tui import views
from sgltui.tui.model import TuiModel

HOSTILE = "fast\x1b[2J\x1b]0;owned\x07\u202e" + "x" * 5000


def test_model_profiles_are_printable_and_cut():
    model = TuiModel()
    model.apply_status(
        {"profiles": [{"name": "p", "key": "1", "launcher": "sim", "description": HOSTILE}]}
    )
    (row,) = model.profiles
    assert row.name == "p" and row.key == "1"
    text = row.description
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert text.startswith("fast\\x1b[2J") and len(text) <= 200
    option = views.profile_option(row, [])
    assert "\x1b" not in option and "p" in option


def test_the_agents_verdicts_on_a_profile_are_printable_too():
    """A validation error quotes the file's value: a hostile value reaches the detail line
    escaped."""
    model = TuiModel()
    bad = "p.toml:3: mem-fraction-static: got \x1b]0;owned\x07; write a number"
    model.apply_status({"profiles": [{"name": "p", "valid": False, "problem": bad}]})
    (row,) = model.profiles
    detail = views.profile_detail(row)
    assert "\x1b" not in detail and "\x07" not in detail and "mem-fraction-static" in detail
