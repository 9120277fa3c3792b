"""The main app on a fleet (issue 27), from scripted hosts: the Hosts view beside the slots
view, slots as host/slot, the panes and the keys following the picked slot's host.

(The same app over real ssh links to real agents: tests/fleet/test_fleet_tui.py.)"""

from __future__ import annotations

import asyncio

import pytest
from textual.notifications import Notify

from sgltui.tui.fleetsource import push_of, status_of
from sgltui.tui.screens import DrainChoice
from sgltui.tui.scripted import make_host_sample, make_host_status
from sgltui.tui.widgets.hosts import HostsPane
from sgltui.tui.widgets.memory import MemoryPane

from .fleet_fakes import fleet_source
from .helpers import app_with, pick_slot, until

pytestmark = pytest.mark.usefixtures("utc")
SIZE = (120, 40)


def two_hosts() -> dict:
    return {"h1": make_host_status(2), "h2": make_host_status(1, ["demo-no-mtp"], pool=None)}


def test_fleet_main_screen(snap_compare):
    # h3 has never answered; without a reason to show, no notification covers the screen.
    src, _ = fleet_source({**two_hosts(), "h3": None}, errors=False)
    app = app_with(src)

    async def settle(pilot):
        await until(pilot, lambda: len(app.model.slots) == 3)
        await until(pilot, lambda: "h3" in app.query_one(HostsPane).text)
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()

    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


async def test_a_key_on_host2s_slot_goes_to_host2_and_the_panes_follow_it():
    src, calls = fleet_source(two_hosts())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(app.model.slots) == 3)
        assert app.model.slot_ids == ["h1/a", "h1/b", "h2/a"]
        await until(pilot, lambda: "1/1 slots" in app.query_one(HostsPane).text)
        hosts = app.query_one(HostsPane).text
        assert "h1" in hosts and "2/2 slots" in hosts and "1/1 slots" in hosts
        # Each host's log tail, asked of that host with its own slot names.
        await until(pilot, lambda: ("h2", "logs", {"slot": "a", "lines": 200}) in calls)
        await until(pilot, lambda: len(app.model.memory_view.gpus) == 2)  # h1's two GPUs
        await pick_slot(pilot, app, "h2/a")
        assert src.focus_host == "h2"
        await until(pilot, lambda: app.query_one(MemoryPane).border_title == "memory · h2")
        await until(pilot, lambda: len(app.model.memory_view.gpus) == 1)
        await until(pilot, lambda: app.logbuf.only_slot == "h2/a")
        assert [ln.text for ln in app.logbuf.visible()][-1].endswith("h2 log line")
        calls.clear()
        await pilot.press("1")  # demo-no-mtp runs there: key 2, demo-mtp, swaps it
        await pilot.press("2")
        await until(pilot, lambda: isinstance(app.screen, DrainChoice))
        assert ("h2", "preflight", {"profile": "demo-mtp", "slot": "a"}) in calls
        await pilot.press("d")
        await until(pilot, lambda: any(op == "swap" for _, op, _ in calls))
        swaps = [(h, a) for h, op, a in calls if op == "swap"]
        assert swaps == [("h2", {"profile": "demo-mtp", "slot": "a", "drain": "wait"})]
        note = app.exit_note() or ""
        assert "slot h2/a: demo-no-mtp ready" in note and "`sgltui --host HOST stop" in note


async def test_a_host_that_is_down_says_why_once_and_refuses_at_once():
    src, calls = fleet_source({"h1": make_host_status(1, pool=None), "h2": None})
    app = app_with(src)
    said: list[str] = []

    def hook(msg) -> None:
        if isinstance(msg, Notify):
            said.append(msg.notification.message)

    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await until(pilot, lambda: len(app.model.slots) == 1)
        await pilot.pause(0.3)
        assert said == ["host h2: ssh: connect to host h2 port 22: refused"]
        down = src.by_name["h2"]
        down.pokes = 0
        down.poke = lambda: setattr(down, "pokes", down.pokes + 1)
        await pilot.press("ctrl+p")
        await pilot.press(*"retry unreachable")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(pilot, lambda: down.pokes == 1)
    with pytest.raises(
        Exception, match=r"host h2: unreachable since \d\d:\d\d, retrying; nothing sent"
    ):
        await src.call("stop", slot="h2/a")
    with pytest.raises(Exception, match="no host 'h9' in the fleet"):
        await src.call("stop", slot="h9/a")
    assert await src.call("stop", slot="h1/a")
    assert calls[-1] == ("h1", "stop", {"slot": "a"})
    await src.close()


def test_a_hosts_status_and_pushes_name_its_slots_and_pools_host_slash():
    from sgltui import protocol

    st = status_of("h2", protocol.decode_reply("status", make_host_status(2)))
    assert [s["id"] for s in st["slots"]] == ["h2/a", "h2/b"]
    pool = st["pools"][0]
    assert pool["name"] == "h2/all" and pool["slots"] == ["h2/a", "h2/b"]
    assert [w["slot"] for w in pool["workers"]] == ["h2/a", "h2/b"]
    assert set(st["telemetry"]["engine"]) == {"h2/a", "h2/b"}
    assert [(g["host"], list(g["server_bytes"])) for g in st["telemetry"]["gpus"]] == [
        ("h2", ["h2/a"]),
        ("h2", ["h2/b"]),
    ]
    ev = push_of("h2", {"push": "event", "data": {"type": "pool.roll", "slot": "a", "pool": "all"}})
    assert ev["data"]["slot"] == "h2/a" and ev["data"]["pool"] == "h2/all"


async def test_four_hosts_samples_are_drawn_as_one_a_second():
    src, _ = fleet_source({f"h{i}": make_host_status(1, pool=None) for i in range(1, 5)})
    await src.connect()
    pushes = src.pushes()
    assert (await anext(pushes)) == {"push": "fleet"}
    src.fleet_read()
    for round_ in range(2):
        for i in range(1, 5):
            src._route(f"h{i}", {"push": "sample", "data": make_host_sample(round_, ["a"])})
        got = await asyncio.wait_for(anext(pushes), 2.0)
        # (log tails of the four hosts may come first)
        while got["push"] != "sample":
            got = await asyncio.wait_for(anext(pushes), 2.0)
        assert sorted(got["data"]["engine"]) == ["h1/a", "h2/a", "h3/a", "h4/a"]
        assert {g["host"] for g in got["data"]["gpus"]} == {"h1", "h2", "h3", "h4"}
    assert src._queue.empty()  # two rounds of four samples: two pushes
    await src.close()
