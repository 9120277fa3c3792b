"""The choice dialogs answer a mouse click as they answer their keys: the pressed button's id,
None for Cancel (the handler is shared by DrainChoice and SlotOrPool, on their base class)."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.screen import ModalScreen

from sgltui.tui.screens import DrainChoice, SlotOrPool


class Host(App[None]):
    def __init__(self, dialog: ModalScreen) -> None:
        super().__init__()
        self.dialog = dialog
        self.answers: list[str | None] = []

    def on_mount(self) -> None:
        self.push_screen(self.dialog, self.answers.append)


@pytest.mark.parametrize(
    ("dialog", "button", "answer"),
    [
        (lambda: DrainChoice("Swap to b", "a", 3), "#force", "force"),
        (lambda: DrainChoice("Swap to b", "a", 3), "#wait", "wait"),
        (lambda: DrainChoice("Stop a", "a", 3), "#cancel", None),
        (lambda: SlotOrPool("b", "0", "all", 2), "#pool", "pool"),
        (lambda: SlotOrPool("b", "0", "all", 2), "#cancel", None),
    ],
)
async def test_a_click_answers_with_the_button_s_id(dialog, button, answer) -> None:
    app = Host(dialog())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert await pilot.click(button)
        await pilot.pause()
        assert app.answers == [answer]
        assert app.screen is not app.dialog
