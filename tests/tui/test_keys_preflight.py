"""Hot-swap keys that cannot surprise (issue 12): a clashing key does nothing, a key that would
replace the simulator with real SGLang asks first naming both, and the agent's preflight checks
run before the swap dialog acts."""

from __future__ import annotations

from sgltui.tui import typed
from sgltui.tui.screens import Confirm, DrainChoice
from sgltui.tui.views import profile_option

from .helpers import ScriptedSource, app_with, ops, status_with, until

SIZE = (120, 40)


async def started(app, pilot):
    await until(pilot, lambda: app.model.connected and app.first_status.is_set())
    await pilot.pause(0.15)


def _with_profiles(extra: list[dict], running: int = 0) -> dict:
    st = status_with(running=running)
    st["profiles"] = st["profiles"] + extra
    return st


async def test_clashing_key_does_nothing_and_says_why():
    st = _with_profiles(
        [
            {"name": "real-a", "key": "7", "launcher": "sglang", "key_clash": ["real-b"]},
            {"name": "real-b", "key": "7", "launcher": "sglang", "key_clash": ["real-a"]},
        ]
    )
    src = ScriptedSource(st)
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("7")
        await pilot.pause(0.3)
        assert ops(src, "swap") == [] and ops(src, "start") == [] and ops(src, "preflight") == []
        assert not isinstance(app.screen, Confirm)


async def test_key_to_real_sglang_from_the_simulator_asks_first_naming_both():
    st = _with_profiles([{"name": "real-mtp", "key": "7", "launcher": "sglang"}])
    src = ScriptedSource(st)
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("7")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        question = app.screen.question
        assert "demo-mtp" in question and "simulator" in question
        assert "real-mtp" in question and "real SGLang" in question
        await pilot.press("n")
        await pilot.pause(0.2)
        assert ops(src, "swap") == [] and ops(src, "preflight") == []
        await pilot.press("7")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.press("y")
        await until(pilot, lambda: ops(src, "swap"))
        assert ops(src, "preflight")[0]["profile"] == "real-mtp"
        assert ops(src, "swap")[0]["profile"] == "real-mtp"


async def test_refused_preflight_shows_its_line_and_opens_no_dialog():
    line = "preflight port: port 30001 is already in use; stop what holds it (or skip this check: --force port)"

    def on_call(op, args, src):
        if op == "preflight":
            return {"profile": args["profile"], "ok": False, "error": line, "checks": []}
        return None

    src = ScriptedSource(status_with(running=3))
    src.on_call = on_call
    app = app_with(src)
    seen: list[str] = []
    app.notify = lambda message, **kw: seen.append(str(message))  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: seen)
        assert seen[-1] == line
        assert not isinstance(app.screen, DrainChoice) and ops(src, "swap") == []


def test_profiles_pane_marks_a_clashing_key():
    row = profile_option(typed.profile({"name": "a", "key": "7", "key_clash": ["b"]}), [])
    assert "key 7 also on b" in row


async def test_refused_preflight_offers_to_skip_the_check_in_a_dialog_not_a_cli_flag():
    """Issue 37: the TUI said 'or skip this check: --force interpreter', a CLI flag. The failed
    check and its fix show in a dialog whose Yes skips that check (force=[check])."""
    check = {
        "name": "interpreter",
        "ok": False,
        "message": "/usr/bin/python3 cannot import sglang.launch_server",
        "fix": "set python in the profile",
    }

    def on_call(op, args, src):
        if op == "preflight":
            line = f"preflight interpreter: {check['message']} (or skip this check: --force interpreter)"
            return {"profile": args["profile"], "ok": False, "error": line, "checks": [check]}
        return None

    src = ScriptedSource(status_with(running=0))
    src.on_call = on_call
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        text = str(app.screen.question)
        assert "cannot import sglang.launch_server; set python in the profile" in text
        assert "skipping the interpreter check" in text and "--force" not in text
        await pilot.press("y")
        await until(pilot, lambda: ops(src, "swap"))
        assert ops(src, "swap")[0]["force"] == ["interpreter"]
