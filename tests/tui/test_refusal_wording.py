"""A refusal's toast gives the remedy in the TUI's words (the key to press), not the CLI command
its plain line ends with (protocol.Error.fix_tui); without them, the CLI's fix is shown."""

from __future__ import annotations

from sgltui.client import errors as ce
from sgltui.tui.config import TuiConfig
from sgltui.tui.screens import Confirm

from .helpers import ScriptedSource, app_with, notes_into, status_with, until

SIZE = (120, 40)
MESSAGE = "restart refused: slot 0 is busy with bench b1 (by cli, 5 s ago)"
CLI = "wait for it or run `sgltui stop`"
TUI = "wait for it or press {key:server.stop} to stop"  # the agent names the key by its id


async def _refusal_toast(fix_tui: str | None, keymap: dict[str, str] | None = None) -> str:
    def refuse(op, args, src):
        if op == "restart":
            raise ce.Busy(MESSAGE, CLI, fix_tui)
        return None

    src = ScriptedSource(status_with(running=0), on_call=refuse)
    app = app_with(src, config=TuiConfig(keymap=keymap or {}))
    said: list[str] = []
    async with app.run_test(size=SIZE, message_hook=notes_into(said)) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.press("y")
        await until(pilot, lambda: any(MESSAGE in s for s in said), show=lambda: said)
    return next(s for s in said if MESSAGE in s)


async def test_a_refusal_shows_the_tui_wording_of_its_fix():
    assert await _refusal_toast(TUI) == f"{MESSAGE}; wait for it or press x to stop"


async def test_the_tui_wording_names_the_key_the_users_keymap_binds():
    said = await _refusal_toast(TUI, keymap={"server.stop": "X"})
    assert said == f"{MESSAGE}; wait for it or press X to stop"


async def test_a_refusal_without_a_tui_wording_shows_the_cli_fix():
    # an agent that predates fix_tui, or a fix that reads right in both
    assert await _refusal_toast(None) == f"{MESSAGE}; {CLI}"
