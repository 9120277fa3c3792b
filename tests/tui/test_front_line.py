"""The slot pane names the slot's front endpoint and what it does during a swap."""

from textual.content import Content

from sgltui.tui import typed, views
from tests.support.scripted import make_slot


def plain(markup: str) -> str:
    return Content.from_markup(markup).plain


def test_slot_shows_its_front_and_a_hold():
    front = {"url": "http://127.0.0.1:30080", "state": "routing", "held_now": 0}
    text = plain(views.slot_details(typed.slot(make_slot(front=front))))
    assert "clients → http://127.0.0.1:30080" in text and "holding" not in text
    held = dict(front, state="holding", held_now=3)
    assert "holding 3" in plain(
        views.slot_details(typed.slot(make_slot(state="draining", front=held)))
    )


def test_front_error_and_sigkill_stop_are_said():
    err = {"url": None, "state": "error", "error": "front port 127.0.0.1:30080 unavailable"}
    assert "front: front port" in plain(views.slot_details(typed.slot(make_slot(front=err))))
    cause = {"kind": "signal", "summary": "SIGKILL after 20s: 2 requests were cut", "fix": "x"}
    text = plain(views.slot_details(typed.slot(make_slot(state="stopped", cause=cause))))
    assert "SIGKILL after 20s" in text
