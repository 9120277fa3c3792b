"""The main app on a fleet (issue 27), from scripted hosts: the Hosts view beside the slots
view, slots as host/slot, the panes and the keys following the picked slot's host.

(The same app over real ssh links to real agents: tests/fleet/test_fleet_tui.py.)"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from sgltui.fleet.config import Fleet, Host, Pool
from sgltui.tui.fleetsource import push_of, status_of
from sgltui.tui.screens import DrainChoice
from sgltui.tui.widgets.hosts import HostsPane
from sgltui.tui.widgets.memory import MemoryPane
from sgltui.tui.widgets.slots import SlotsPane
from tests.support.scripted import make_host_sample, make_host_status

from .fleet_fakes import fleet_source
from .helpers import app_with, notes_into, pick_row, pick_slot, until

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
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
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


def _row(app, sid: str) -> str:
    pane = app.query_one(SlotsPane)
    return next((str(o.prompt) for o in pane.options if o.id == f"slot:{sid}"), "")


async def test_a_host_that_goes_down_keeps_its_slots_dimmed_and_refuses_them_at_once():
    src, calls = fleet_source(two_hosts())
    app = app_with(src)
    said: list[str] = []
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        await until(pilot, lambda: "demo-no-mtp" in _row(app, "h2/a"))
        link = src.by_name["h2"]
        client = link.client
        link.client, link.state.reachable = None, False  # h2's ssh drops
        link.state.error = "host h2: connection lost; retrying"
        link.on_change(link.state)
        await until(pilot, lambda: "unreachable since" in _row(app, "h2/a"))
        row = _row(app, "h2/a")
        assert row.startswith("[dim]") and "demo-no-mtp" in row  # as h2 said last
        assert "unreachable" not in _row(app, "h1/a")
        await pick_slot(pilot, app, "h2/a")
        calls.clear()
        said.clear()
        await pilot.press("2")  # demo-mtp: refused here, nothing sent, nothing asked
        await until(pilot, lambda: said)
        since = time.strftime("%H:%M", time.localtime(link.state.since))
        assert said == [f"host h2: unreachable since {since}, retrying; nothing sent"]
        await pilot.press("x")  # stop: the same
        await until(pilot, lambda: len(said) == 2)
        assert said[1] == said[0] and not [c for c in calls if c[0] == "h2"]
        # h2 answers again: its slots are its own again.
        link.client, link.state.reachable = client, True
        link.on_change(link.state)
        await until(pilot, lambda: "unreachable" not in _row(app, "h2/a"))
        assert "● ready" in _row(app, "h2/a")
        # h1, which runs pool all, goes down: its pool's row counts none of them ready.
        h1 = src.by_name["h1"]
        h1.client, h1.state.reachable = None, False
        h1.on_change(h1.state)
        pane = app.query_one(SlotsPane)

        def pool_row() -> str:
            return next(str(o.prompt) for o in pane.options if o.id == "pool:h1/all")

        await until(pilot, lambda: "gateway's host unreachable since" in pool_row())
        assert "0/2 ready" in pool_row()


def _cross_fleet() -> Fleet:
    hosts = (Host("h1", "u@h1"), Host("h2", "u@h2", address="10.0.0.2"))
    pool = Pool("xp", (("h1", "a"), ("h2", "a")), gateway="h1")
    return Fleet(path=Path("fleet.toml"), hosts=hosts, pools=(pool,))


def test_a_pool_across_hosts_is_one_row_over_its_members_on_their_hosts():
    from sgltui import protocol

    h1 = make_host_status(1, pool=None)
    # What h1's agent says of the gateway it runs (agent/pools/remote.py): the workers by their
    # fleet names, and only those routed now (a roll has taken h1/a out).
    h1["pools"] = [
        {
            "name": "xp",
            "slots": ["h2/a"],
            "gateway": {"pid": 4100, "state": "running"},
            "workers": [{"slot": "h2/a", "url": "http://10.0.0.2:31000"}],
            "across_hosts": True,
        }
    ]
    st = status_of("h1", protocol.decode_reply("status", h1))
    assert st["pools"][0]["name"] == "h1/xp" and st["pools"][0]["slots"] == ["h2/a"]
    assert st["pools"][0]["workers"][0]["slot"] == "h2/a"
    src, _ = fleet_source({"h1": h1, "h2": make_host_status(1, pool=None)})
    src.cross.fleet = _cross_fleet()
    rows = src.cross.rows(st["pools"], {"h1", "h2"})
    assert [(p["name"], p["slots"]) for p in rows] == [("h1/xp", ["h1/a", "h2/a"])]
    assert src.cross.serving(src.cross.fleet.pools[0])
    # Not up yet: a row from fleet.toml (a profile key on it starts it), once h1 has answered.
    rows = src.cross.rows([], {"h1"})
    assert rows == [
        {
            "name": "h1/xp",
            "across_hosts": True,
            "gateway": {"state": "not up"},
            "slots": ["h1/a", "h2/a"],
        }
    ]
    assert src.cross.rows([], {"h2"}) == []


async def test_a_swap_of_a_pool_across_hosts_is_refused_at_once_when_a_member_host_is_down():
    src, calls = fleet_source({"h1": make_host_status(1, pool=None), "h2": None})
    src.cross.fleet = _cross_fleet()
    with pytest.raises(
        Exception, match=r"^host h2: unreachable since \d\d:\d\d, retrying; nothing"
    ):
        await src.call("swap", pool="h1/xp", profile="demo-mtp")
    assert calls == [] and not src.cross.runs
    await src.close()


async def test_quitting_while_this_app_rolls_a_pool_across_hosts_asks_first():
    """The app rolls a fleet.toml pool itself (no agent sees it whole): `q` mid-roll asks, `n`
    keeps it rolling, `y` quits and the roll ends with the app."""
    from sgltui.tui.screens import Confirm

    src, calls = fleet_source({"h1": make_host_status(1, pool=None), "h2": make_host_status(1)})
    src.cross.fleet = _cross_fleet()
    held = asyncio.Event()  # slot_expose never answers: the `up` stays at its first step

    def holding(client):
        answer = client.call

        async def call(op, **args):
            if op == "slot_expose":
                calls.append((client.name, op, dict(args)))
                await held.wait()
            return await answer(op, **args)

        return call

    for host in ("h1", "h2"):
        src.by_name[host].client.call = holding(src.by_name[host].client)
    app = app_with(src)
    said: list[str] = []
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        await until(pilot, lambda: len(app.model.slots) == 2)
        await pick_row(pilot, app, "pool:h1/xp")
        await until(pilot, lambda: app.picked_pool == "h1/xp")
        await pilot.press("2")  # demo-mtp on the row of a pool not up, both slots ready: `up`
        await until(pilot, lambda: "starting demo-mtp on pool h1/xp" in said, show=lambda: said)
        await until(
            pilot, lambda: ("h2", "slot_expose", {"slot": "a", "address": "10.0.0.2"}) in calls
        )
        run = src.cross.runs["xp"]
        # h2/a is in h2's own pool `all` and in xp: one row, above the first pool.
        ids = [o.id for o in app.query_one(SlotsPane).options]
        assert ids == ["slot:h2/a", "pool:h2/all", "slot:h1/a", "pool:h1/xp"], ids
        await until(
            pilot,
            lambda: (
                "starting demo-mtp on 2 slots" in str(app.query_one(SlotsPane).options[-1].prompt)
            ),
            show=lambda: str(app.query_one(SlotsPane).options[-1].prompt),
        )
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        assert "pool xp: the start to demo-mtp is in progress" in app.screen.question
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, Confirm))
        assert app.is_running and run.finished is None
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running)
    assert run.task is not None and run.task.done() and run.finished is not None
    assert app.return_value and app.return_value.startswith("sgltui: closed")
