"""The swap as one flow (issue 36 item 7): a profile key's dialogs are awaited in one worker,
the pinned job's question included; and the panes are one table (panes.py) that compose, the
focus keys and the draw all read."""

from __future__ import annotations

from textual.widgets import TabbedContent

from sgltui.client.errors import Pinned
from sgltui.tui import bindings, panes
from sgltui.tui import model as M
from sgltui.tui.screens import Confirm, DrainChoice

from .helpers import ScriptedSource, app_with, notes_into, ops, status_with, until

SIZE = (120, 40)


async def started(app, pilot):
    await until(pilot, lambda: app.model.connected and app.first_status.is_set())
    await pilot.pause(0.15)


async def test_a_swap_onto_a_pinned_job_asks_then_sends_it_confirmed():
    """Drain dialog, the agent's 'pinned' refusal, the question, the op again with confirm:
    one conversation, each answer awaited in turn."""

    def on_call(op, args, src):
        if op == "swap" and not args.get("confirm"):
            raise Pinned("job j1 is pinned to slot 0")
        return None

    src = ScriptedSource(status_with(running=3))
    src.on_call = on_call
    said: list[str] = []
    app = app_with(src)
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, DrainChoice))
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        question = str(app.screen.question)
        assert "job j1 is pinned to slot 0" in question and "Swap anyway?" in question
        await pilot.press("y")
        await until(pilot, lambda: len(ops(src, "swap")) == 2)
        first, second = ops(src, "swap")
        assert first == {"profile": "demo-no-mtp", "drain": "wait", "slot": "0"}
        assert second == {**first, "confirm": True}
        await until(pilot, lambda: "swapping to demo-no-mtp (wait)" in said, show=lambda: said)


async def test_a_pinned_job_answered_no_sends_nothing_more():
    def on_call(op, args, src):
        if op == "swap" and not args.get("confirm"):
            raise Pinned("job j1 is pinned to slot 0")
        return None

    src = ScriptedSource(status_with(running=0))
    src.on_call = on_call
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.press("n")
        await pilot.pause(0.3)
        assert ops(src, "swap") == [{"profile": "demo-no-mtp", "drain": "wait", "slot": "0"}]


async def test_a_pin_the_preflight_names_is_asked_once_and_the_swap_goes_out_confirmed():
    """Issue 48: the preflight says a job pins the slot; the drain and the pin are asked after
    that one round trip, and one swap goes out, confirmed (never refused first)."""

    def on_call(op, args, src):
        if op == "preflight":
            pin = {"by": "job", "what": "batch job j1 (job-1) is pinned to slot 0"}
            return {"profile": args["profile"], "ok": True, "checks": [], "pinned": pin}
        if op == "swap" and not args.get("confirm"):
            raise Pinned("job j1 is pinned to slot 0")  # what an agent would say: never reached
        return None

    src = ScriptedSource(status_with(running=3))
    src.on_call = on_call
    said: list[str] = []
    app = app_with(src)
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, DrainChoice))
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        question = str(app.screen.question)
        assert question.startswith("swap refused: batch job j1 (job-1) is pinned to slot 0.")
        assert "Swap anyway?" in question and not ops(src, "swap")
        await pilot.press("y")
        await until(pilot, lambda: "swapping to demo-no-mtp (wait)" in said, show=lambda: said)
        sent = {"profile": "demo-no-mtp", "drain": "wait", "slot": "0", "confirm": True}
        assert ops(src, "swap") == [sent]


def test_each_pane_is_one_row_of_the_table():
    """Its focus key comes from its row (same id, key and action), its areas are the model's."""
    focus_keys = {k.id: k for k in bindings.KEYS if k.id.startswith("focus.")}
    keyed = [p for p in panes.PANES if p.key]
    assert list(focus_keys) == [f"focus.{p.name}" for p in keyed]
    for p in keyed:
        key = focus_keys[f"focus.{p.name}"]
        assert (key.key, key.action, key.description) == (
            p.key,
            f"focus_pane('{p.name}')",
            p.label,
        )
    for p in panes.PANES:
        assert p.areas and p.areas <= M.AREAS, p.name


async def test_the_app_composes_and_focuses_every_pane_of_the_table():
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        for p in panes.PANES:
            found = app.query(f"#{p.name}")
            assert len(found) == (0 if p.fleet_only else 1), p.name
            if p.title and not p.fleet_only:
                assert found.first().border_title == p.title
        for p in panes.PANES:
            if p.place[0] != panes.TAB:
                continue
            await pilot.press(p.key)
            await pilot.pause(0.1)
            assert app.query_one(TabbedContent).active == f"tab-{p.name}"
            widget = app.query_one(f"#{p.name}")
            target = widget.query_one(p.focus_on) if p.focus_on else widget
            assert app.focused is target, p.name


async def test_a_swap_of_the_benched_slot_names_the_bench_and_sends_it_confirmed():
    """Issue 51 item 7: the dialog counted the bench's requests ("1 request in flight") and the
    swap went through silently. It asks about the bench (its run and point), not the drain,
    and sends the swap confirmed; the Activity line of its end says the swap cut it."""
    st = status_with(running=2)
    st["bench"] = {
        "run_id": "r-51", "state": "running", "started": 1.0,
        "spec": {"profiles": ["demo-mtp"], "slot": "0"},
        "progress": {"point": 3, "points": 6, "phase": "measure"},
    }  # fmt: skip
    src = ScriptedSource(st)
    said: list[str] = []
    app = app_with(src)
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, (Confirm, DrainChoice)))
        assert isinstance(app.screen, Confirm)
        question = str(app.screen.question)
        assert "Bench run r-51 is using slot 0, point 3/6" in question.replace("[b]", "").replace(
            "[/]", ""
        )
        assert "marked as cut by this swap" in question
        await pilot.press("y")
        await until(pilot, lambda: len(ops(src, "swap")) == 1)
        assert ops(src, "swap") == [
            {"profile": "demo-no-mtp", "drain": "wait", "slot": "0", "confirm": True}
        ]
        await until(pilot, lambda: any("bench r-51 stopped" in s for s in said), show=lambda: said)

    from sgltui import protocol
    from sgltui.tui.activity_items import activity_item

    cut = {"by": "swap", "slot": "0", "to": "demo-no-mtp", "client": "tui:1@h", "at": 2.0}
    done = {"v": 1, "ts": 2.0, "type": "bench.done", "run_id": "r-51", "state": "stopped",
            "cut": cut}  # fmt: skip
    item = activity_item(protocol.decode_event(done), None, lambda: 2.0)
    assert item is not None and "CUT by a swap of slot 0 to demo-no-mtp" in item.text
    assert item.level == "error"
