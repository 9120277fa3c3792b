"""Hostile servers against attach, adopt and discovery (issue 51, items 2-6): each case failed
before its fix (a dripping /server_info held every attach, detach and `agent stop`; wrong types
failed `sgltui status` for every client; a RecursionError and a ValueError came back as internal
errors; another process's command line wrote escape sequences to the terminal; a keyed server
that listened was "not listening yet"). The hostile servers are processes of their own
(tests/fixtures/hostile_http.py); the agent is the real one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import pytest

from sgltui.agent.slot import discovery, info_fetch
from sgltui.client import AgentError
from sgltui.core import info_bounds
from tests.fixtures.cli import agent_sgltui, sgltui
from tests.fixtures.hostile_http import WRONG_TYPES, hostile
from tests.fixtures.sim import start_sim, stop_sim


@pytest.mark.slow
async def test_a_server_info_has_an_overall_deadline_and_a_byte_cap():
    """httpx's timeout is per read: one byte a second never ended; a huge body was read whole."""
    with hostile("drip") as srv:
        t0 = time.monotonic()
        with pytest.raises(info_fetch.FetchError, match="did not come whole within 1s"):
            await info_fetch.fetch(srv.url, None, deadline_s=1.0)
        with pytest.raises(info_fetch.FetchError, match="did not come whole"):
            await asyncio.to_thread(info_fetch.fetch_blocking, srv.url, None, 1.0)
        assert time.monotonic() - t0 < 6
    with hostile("huge") as srv:
        with pytest.raises(info_fetch.FetchError, match="larger than 4 MB"):
            await info_fetch.fetch(srv.url, None)
        with pytest.raises(info_fetch.FetchError, match="larger than 4 MB"):
            await asyncio.to_thread(info_fetch.fetch_blocking, srv.url, None)


def test_what_a_server_says_is_coerced_to_what_sgltui_reads():
    info = info_bounds.decode(json.dumps({**WRONG_TYPES, "page_size": 16.0}).encode())
    for key in ("version", "model_path", "served_model_name", "launch_command"):
        assert key not in info, key  # the wrong type is left out: unknown
    assert "tp_size" not in info and "context_length" not in info
    assert "max_running_requests" not in info and info["max_total_num_tokens"] is None
    assert info["mem_fraction_static"] is None and info["page_size"] == 16
    with pytest.raises(info_bounds.InfoError, match="nested more than"):
        info_bounds.decode(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(info_bounds.InfoError, match="nested more than"):
        info_bounds.decode(b'{"a": ' + b"[" * 500 + b"]" * 500 + b"}")


async def test_a_dripping_server_info_holds_no_other_command_and_goes_with_its_client(agent):
    with hostile("drip") as srv:
        async with agent.client("dripper") as c:
            pending = asyncio.ensure_future(c.call("attach", url=srv.url))
            assert await asyncio.to_thread(srv.saw, "request"), srv.lines
            asked = time.monotonic()
            # while it drips: the other commands of the agent's lock are answered at once
            t0 = time.monotonic()
            with pytest.raises(AgentError, match="does not watch an attached server"):
                await asyncio.wait_for(asyncio.to_thread(agent.call, "detach"), 5)
            assert time.monotonic() - t0 < 3
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, AgentError):
                await pending
        # the client left: the agent gives its question up (the server sees it go)
        assert await asyncio.to_thread(srv.saw, "gone", 5), srv.lines
        assert time.monotonic() - asked < info_fetch.DEADLINE_S  # given up, not timed out
    slots = (await asyncio.to_thread(agent.status))["slots"]
    assert [s["external"] for s in slots] == [None]


def test_wrong_types_are_attached_coerced_and_status_still_reads(agent):
    with hostile("wrongtypes") as srv:
        agent.call("attach", url=srv.url, slot="odd")
        r = agent_sgltui(agent, "status", "--json")
        assert r.returncode == 0, r.stderr  # was: "reply is malformed ... external.version"
        odd = next(s for s in json.loads(r.stdout)["slots"] if s["id"] == "odd")
        assert odd["external"]["version"] is None and odd["external"]["model"] is None
        agent.call("detach", slot="odd")


def test_deep_nesting_huge_bodies_and_bad_ports_are_one_line(agent):
    for mode, said in (("deep", "nested more than 32 deep"), ("huge", "larger than 4 MB")):
        with hostile(mode) as srv, pytest.raises(AgentError) as exc:
            agent.call("attach", url=srv.url)
        line = str(exc.value)
        assert said in line and "\n" not in line and "internal error" not in line, line
    r = agent_sgltui(agent, "attach", "http://127.0.0.1:99999")  # what the user sees
    err = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(err) == 1, r.stderr
    assert "port is not a number 1-65535" in err[0] and "internal error" not in err[0]
    assert "Traceback" not in agent.agent_log()


@pytest.mark.slow
def test_status_escapes_what_other_processes_say(sim_server):
    """A --served-model-name with escapes cleared the screen of whoever ran `status`."""
    evil = "evil\x1b[2J\x1b]0;owned\x07"
    sim = sim_server("--served-model-name", evil)
    r = sgltui("status")
    assert f"pid {sim.pid}" in r.stdout, r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "evil\\x1b[2J\\x1b]0;owned\\x07" in r.stdout


@pytest.mark.slow
def test_a_keyed_server_is_seen_listening_as_soon_as_it_listens(monkeypatch):
    """Discovery asks without a key: a 401 is a server that listens. One seen loading was
    "not listening yet" until its next look, 15 s later (made 600 s here: only a look when its
    port opens can see it)."""
    monkeypatch.setattr(discovery, "RETRY_S", 600.0)
    sim = start_sim("--api-key", "k-51", "--sim-slow-start", "20", wait_ready=False)
    try:
        first = None
        deadline = time.monotonic() + 20
        while first is None and time.monotonic() < deadline:
            first = next((f for f in discovery.scan() if f.pid == sim.pid), None)
        assert first is not None and first.note == discovery.NOT_LISTENING, first
        sim.wait_for_line("Uvicorn running", timeout=60)
        seen = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (seen and seen[-1].note == discovery.NEEDS_KEY):
            seen.append(next(f for f in discovery.scan() if f.pid == sim.pid))
            time.sleep(0.2)
        assert seen[-1].note == discovery.NEEDS_KEY and seen[-1].url == sim.url, seen[-3:]
    finally:
        stop_sim(sim)


def test_a_port_nothing_answers_is_said_by_the_errors_kind_not_its_words():
    """attach's hint ("is a server listening there?") follows FetchError.unanswered, set where
    nothing answered, not a match on the error's text."""
    from sgltui.agent.errors import OpError
    from sgltui.agent.slot import attach, info_fetch
    from tests.ports import server_port

    url = f"http://127.0.0.1:{server_port()}"  # free: nothing listens there
    with pytest.raises(info_fetch.FetchError) as raw:
        info_fetch.fetch_blocking(url, None)
    assert raw.value.unanswered and raw.value.status is None
    with pytest.raises(OpError) as exc:
        attach.fetch_info_blocking(url, None)
    assert "is a server listening there?" in str(exc.value), exc.value
