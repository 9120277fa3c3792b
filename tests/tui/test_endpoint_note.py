"""The agent endpoint in the TUI: its queue and leases on the Profiles pane's border (only while
there are some), and its events in the Activity tab."""

from __future__ import annotations

from sgltui import protocol
from sgltui.tui import model as M
from sgltui.tui.activity_items import activity_item
from sgltui.tui.model import TuiModel
from sgltui.tui.views import endpoint_note
from tests.support.scripted import make_status


def test_the_queue_and_leases_show_and_nothing_shows_when_there_are_none():
    m = TuiModel()
    m.apply_status(make_status())
    assert endpoint_note(m.endpoint) == ""
    status = make_status()
    status["endpoint"] = {
        "url": "http://127.0.0.1:30070",
        "state": "listening",
        "queue": {"mtp": 3},
        "leases": [{"profile": "base", "holder": "job nightly (j1)", "kind": "job", "slot": "0"}],
    }
    assert M.SERVERS in m.apply_status(status)
    assert endpoint_note(m.endpoint) == (
        "endpoint · mtp: 3 waiting · base leased by job nightly (j1)"
    )
    status["endpoint"] = {"url": "http://127.0.0.1:30070", "state": "listening"}
    m.apply_status(status)
    assert endpoint_note(m.endpoint) == ""


def test_what_the_endpoint_did_is_an_activity_line():
    ev = {
        "type": "endpoint",
        "action": "wake",
        "ts": 1.0,
        "client": "endpoint",
        "text": "mtp woken on slot 0 by a request for mtp from 127.0.0.1",
    }
    item = activity_item(protocol.decode_event(ev), "tui", lambda: 0.0)
    assert item is not None and item.text == ev["text"] and item.level == "info"
    refused = {**ev, "action": "refused", "text": "mtp waits: base is leased by job j"}
    assert activity_item(protocol.decode_event(refused), "tui", lambda: 0.0).level == "warning"
