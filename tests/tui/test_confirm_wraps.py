"""A long Confirm question wraps inside the dialog instead of being cut at its edge (the bench's
"swap back to ..." question lost its end, and with it the profile name)."""

from __future__ import annotations

from textual.app import App
from textual.containers import Vertical
from textual.widgets import Static

from sgltui.tui.screens import Confirm

QUESTION = (
    "The bench is done; slot 0 now runs demo-no-mtp. Swap back to demo-mtp, the profile it "
    "had before the bench started?"
)


class Host(App[None]):
    def on_mount(self) -> None:
        self.push_screen(Confirm(QUESTION))


async def test_a_long_question_is_shown_whole() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        dialog = app.screen.query_one(Vertical)
        question = next(w for w in app.screen.query(Static) if QUESTION in str(w.render()))
        # narrower than the text, so it must take more than one line, all inside the dialog
        assert question.size.width < len(QUESTION)
        lines_needed = -(-len(QUESTION) // question.size.width)
        assert question.size.height >= lines_needed
        assert dialog.content_region.contains_region(question.region)
