"""The app reads the agent's replies as typed Structs (protocol.decode_reply): a reply of
another shape is one line in a notification, and the app goes on; the scripted source
answers every op it scripts with a reply that decodes."""

from __future__ import annotations

import pytest

from sgltui import protocol
from tests.support.scripted import make_slot

from .helpers import ScriptedSource, app_with, ops, status_with, until

SIZE = (120, 40)


def watched(app) -> list[tuple[str, dict]]:
    seen: list[tuple[str, dict]] = []
    app.notify = lambda message, **kw: seen.append((str(message), kw))  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize(
    "op,args",
    [
        ("start", {"profile": "demo-mtp", "slot": "0"}),
        ("stop", {"slot": "0"}),
        ("restart", {"slot": "0"}),
        ("swap", {"profile": "demo-no-mtp", "slot": "0"}),
        ("logs", {"slot": "0", "lines": 200}),
        ("profiles", {}),
        ("preflight", {"profile": "demo-mtp", "slot": "0"}),
        ("timeline", {"series": ["engine.0.*"]}),
        ("bench_list", {}),
        ("bench_start", {"spec": {}}),
        ("bench_stop", {"run_id": "r1"}),
        ("demo_load", {"on": True}),
        ("job_list", {}),
        ("status", {}),
        ("ping", {}),
    ],
)
async def test_the_scripted_source_answers_with_replies_that_decode(op, args):
    reply = protocol.decode_reply(op, await ScriptedSource(status_with()).call(op, **args))
    assert reply is not None


def malformed(op, args, src):
    return {
        "profiles": [{"nom": 1}],
        "logs": {"lines": "not a list"},
        "bench_list": {"runs": 1},
        "timeline": {"series": 3},
        "preflight": {"ok": "maybe"},
    }.get(op)


async def test_wrong_shaped_replies_are_one_line_notifications_and_the_app_goes_on():
    src = ScriptedSource(status_with(), on_call=malformed)
    app = app_with(src)
    seen = watched(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected and len(seen) >= 4, show=lambda: seen)
        said = [m for m, _ in seen]
        for op in ("profiles", "logs", "bench_list", "timeline"):
            assert any(f"reply to {op} is malformed" in m for m in said), (op, said)
        assert all("\n" not in m for m in said)
        # The STATUS's own profiles stay: the pane lists them.
        await until(pilot, lambda: len(app.query_one("#profile-list").options) == 4)
        await pilot.press("1")  # swap to demo-no-mtp: its preflight reply is malformed
        await until(pilot, lambda: any("reply to preflight" in m for m, _ in seen))
        assert ops(src, "swap") == [] and app.is_running


async def test_a_malformed_command_reply_is_a_notification_and_a_status_refresh():
    stopped = status_with(state="stopped")

    def agent(op, args, src):
        if op != "start":
            return None
        src.status["slots"][0]["state"] = "launching"  # it did start: the status says so
        return {"slot": 5}

    src = ScriptedSource(stopped, on_call=agent)
    app = app_with(src)
    seen = watched(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        await until(pilot, lambda: len(app.query_one("#profile-list").options) == 4)
        await pilot.press("s")
        await until(
            pilot,
            lambda: any("reply to start is malformed" in m for m, _ in seen),
            show=lambda: (seen, src.calls[-3:], app.focused),
        )
        assert ops(src, "start")[0]["profile"]
        await until(pilot, lambda: app.model.slot("0").state == "launching")
        assert not any(m.startswith("starting") for m, _ in seen)


async def test_command_replies_are_read_by_attribute():
    """restart says when the profile file was edited since the launch (Accepted's
    profile_changed); demo_load says what the agent did, not what was asked."""

    def agent(op, args, src):
        if op == "restart":
            return {"slot": make_slot(), "accepted": True, "profile_changed": True}
        if op == "demo_load":
            return {"on": False}
        return None

    app = app_with(ScriptedSource(status_with(), on_call=agent))
    seen = watched(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        await pilot.press("r")
        await pilot.press("y")
        await until(pilot, lambda: any("restarting" in m for m, _ in seen), show=lambda: seen)
        assert any("profile was edited since the launch" in m for m, _ in seen), seen
        await pilot.press("D")
        await until(pilot, lambda: any(m.startswith("demo load") for m, _ in seen))
        assert ("demo load off", {"timeout": 3, "markup": False}) in seen
