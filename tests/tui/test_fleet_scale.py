"""The fleet view at 64 hosts of 8 slots (issue 49), from scripted hosts: one line per host,
the failing first, filtered by words; a host's slots (and its pushes) only while it is opened;
a dead host among the 64 shows as such and holds up none of the others.

(The same app over real pipes to stand-in hosts, and its costs: bench/bench_fleet_scale.py.)"""

from __future__ import annotations

import pytest

from sgltui import protocol
from sgltui.tui.widgets.hostlist import HostListPane
from tests.support.scripted import make_host_status

from .fleet_fakes import fleet_source
from .helpers import app_with, notes_into, until

pytestmark = pytest.mark.usefixtures("utc")
SIZE = (120, 40)
HOSTS = 64


def sixty_four(dead: str = "h40", failing: str = "h7", busy: str = "h23") -> dict:
    statuses: dict = {}
    for i in range(1, HOSTS + 1):
        name = f"h{i}"
        if name == dead:
            statuses[name] = None
            continue
        st = make_host_status(8)
        if name == failing:
            st["slots"][7].update(state="failed", ready_at=None, uptime_s=None, capacity=None)
        for e in st["telemetry"]["engine"].values():  # every host ~1.5k tok/s, one 16k
            e["gen_throughput"] = 2000.0 if name == busy else 200.0 - i
        statuses[name] = st
    return statuses


def hosts_of(pane: HostListPane) -> list[str]:
    return [h for h, _ in pane.rows]


async def test_64_hosts_are_one_line_each_the_failing_then_the_busiest_first_and_no_slots_until_opened():
    src, calls = fleet_source(sixty_four())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(HostListPane)
        await until(pilot, lambda: len(pane.rows) == HOSTS)
        assert src.summarised and app.focused is pane
        # Down first, then the host with a failed slot, then the busiest.
        assert hosts_of(pane)[:3] == ["h40", "h7", "h23"]
        assert "unreachable" in pane.rows[0][1] and "1 failed" in pane.rows[1][1]
        assert "8/8 slots" in pane.rows[2][1] and "7/8 slots" in pane.rows[1][1]
        assert pane.border_title.startswith("hosts 64 · 1 down · 1 failing")
        # Summarised: no host's slots listed, nothing subscribed, no host's STATUS asked by the
        # app (the links' own polls feed the lines).
        await pilot.pause(0.5)
        assert app.model.slots == []
        assert not [c for c in calls if c[1] in ("subscribe", "status", "logs")]


@pytest.mark.slow
async def test_filtering_64_hosts_by_words_and_clearing_it():
    src, _ = fleet_source(sixty_four())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(HostListPane)
        await until(pilot, lambda: len(pane.rows) == HOSTS)
        await pilot.press("slash", "h", "1")
        assert set(hosts_of(pane)) == {"h1", *(f"h1{i}" for i in range(10))}
        assert "hosts 11/64" in pane.border_title
        await pilot.press("backspace", "backspace", "f", "a", "i", "l", "enter")
        assert hosts_of(pane) == ["h7"]  # a slot state matches too
        await pilot.press("escape")  # typing was over: Escape clears the filter
        assert len(pane.rows) == HOSTS
        await pilot.press("slash", "d", "o", "w", "n", "escape")
        assert hosts_of(pane) == ["h40"]
        await pilot.press("slash", "z", "z", "z")
        assert pane.rows == [] and "hosts 0/64" in pane.border_title


async def test_a_host_of_64_opened_shows_its_slots_and_follows_its_pushes_only_while_open():
    src, calls = fleet_source(sixty_four())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(HostListPane)
        await until(pilot, lambda: len(pane.rows) == HOSTS)
        await pilot.press("down", "down", "enter")  # h23, the busiest
        await until(pilot, lambda: len(app.model.slots) == 8)
        assert {s.id for s in app.model.slots} == {f"h23/{c}" for c in "abcdefgh"}
        assert src.opened == {"h23"} and "▾" in pane.rows[2][1]
        link = src.by_name["h23"]
        await until(pilot, lambda: ("h23", "subscribe", {"logs": "tick"}) in calls)
        # Only that host was asked anything; its detail is a connection of its own.
        assert {h for h, op, _ in calls if op in ("subscribe", "status", "logs")} == {"h23"}
        assert len(link.details) == 1 and not link.details[0].closed
        assert link.interval_s == 5.0  # polled seldom all the same: its pushes keep it live
        await pilot.press("enter")  # closed again: its slots go, its detail connection ends
        await until(pilot, lambda: app.model.slots == [])
        await until(pilot, lambda: link.details[0].closed)
        assert src.opened == set()


async def test_a_dead_host_among_64_shows_as_such_and_the_others_answer():
    src, calls = fleet_source(sixty_four(dead="h64"))
    app = app_with(src)
    said: list[str] = []
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        pane = app.query_one(HostListPane)
        await until(pilot, lambda: len(pane.rows) == HOSTS)
        assert hosts_of(pane)[0] == "h64" and "○ unreachable since" in pane.rows[0][1]
        assert sum("●" in m for _, m in pane.rows) == HOSTS - 1
        assert said == ["host h64: ssh: connect to host h64 port 22: refused"]  # why, once
        await pilot.press("enter")  # opening a dead host: nothing to show, no call, no hang
        await pilot.pause(0.3)
        assert app.model.slots == [] and not [c for c in calls if c[0] == "h64"]
        await pilot.press("down", "enter")  # the next one opens at once all the same
        await until(pilot, lambda: len(app.model.slots) == 8)


async def test_a_hosts_new_figures_repaint_its_line_only_and_the_same_figures_nothing():
    statuses = sixty_four()
    src, _ = fleet_source(statuses)
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(HostListPane)
        await until(pilot, lambda: len(pane.rows) == HOSTS)
        assert hosts_of(pane).index("h6") == 8 and "1.55k tok/s" in pane.rows[8][1]
        await pilot.pause(0.3)
        link = src.by_name["h6"]

        async def poll(tok: float) -> None:  # the link's next answer: a new STATUS
            for e in statuses["h6"]["telemetry"]["engine"].values():
                e["gen_throughput"] = tok
            link.state.status = protocol.decode_reply("status", statuses["h6"])
            src._changed(link.state)
            await pilot.pause(0.3)

        before = pane.repainted
        await poll(194.0)  # the same line: nothing drawn
        assert pane.repainted == before
        await poll(195.0)  # 1.56k now, same place in the order: that row only
        await until(pilot, lambda: "1.56k tok/s" in pane.rows[8][1])
        await pilot.pause(0.2)
        assert pane.repainted == before + 1
        assert link.interval_s == 5.0  # a summarised fleet's hosts are polled every 5 s, not 2


async def test_several_hosts_down_among_64_are_one_notification_not_one_each():
    statuses = sixty_four()
    for name in ("h3", "h9", "h12"):
        statuses[name] = None
    src, _ = fleet_source(statuses)
    app = app_with(src)
    said: list[str] = []
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        pane = app.query_one(HostListPane)
        await until(pilot, lambda: len(pane.rows) == HOSTS)
        await pilot.pause(0.3)
        assert said == ["4 hosts unreachable: h3, h9, h12, h40; `sgltui fleet status` says why"]
        assert pane.border_title.startswith("hosts 64 · 4 down")
