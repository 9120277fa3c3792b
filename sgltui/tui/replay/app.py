"""ReplayApp: the main sgltui app on a ReplaySource, with the time-cursor bar and its keys.

The main app already knows read-only sources (commands disabled, REPLAY in the top bar); this
adds what only a replay has: the bar above the footer, the cursor keys, and the rebuild of the
panes after a seek backwards (the source calls `reset_view`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Footer, Input

from sgltui.session.replay import SeekError, parse_seek
from sgltui.tui import app as _main_app
from sgltui.tui.app import SgltuiApp
from sgltui.tui.model import TuiModel
from sgltui.tui.replay.bar import TimeCursorBar
from sgltui.tui.replay.source import ReplaySource

STEP_S = 1.0  # one step of the cursor keys; shift steps ten times as far


# keys, action, label, shown in the footer, binding id (replay.<name>)
_REPLAY_KEYS = (
    ("space", "replay_toggle", "Play/pause", True, "play"),
    ("right,full_stop", "replay_step(1)", "Step", False, "forward"),
    ("left,comma", "replay_step(-1)", "Back", False, "back"),
    ("shift+right,greater_than_sign", "replay_step(10)", "Step x10", False, "forward10"),
    ("shift+left,less_than_sign", "replay_step(-10)", "Back x10", False, "back10"),
    ("right_square_bracket", "replay_event(1)", "Next event", True, "next"),
    ("left_square_bracket", "replay_event(-1)", "Prev event", False, "prev"),
    ("plus,equals_sign", "replay_speed(1)", "Faster", False, "faster"),
    ("minus", "replay_speed(-1)", "Slower", False, "slower"),
    ("home", "replay_seek('start')", "Start", False, "start"),
    ("end", "replay_seek('end')", "End", False, "end"),
    ("g", "replay_goto", "Go to", True, "goto"),
)


class ReplayApp(SgltuiApp):
    # Textual resolves a relative CSS_PATH against the subclass's module: point at the main one.
    CSS_PATH = str(Path(_main_app.__file__).with_name("app.tcss"))
    CSS = """
    #replay-goto-row { height: auto; }
    #replay-goto { width: 1fr; }
    """
    BINDINGS = SgltuiApp.BINDINGS + [
        # Priority bindings: the cursor keys must beat the focused list's home/end and arrows.
        Binding(keys, action, label, show=show, priority=True, id=f"replay.{name}")
        for keys, action, label, show, name in _REPLAY_KEYS
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The cursor keys are priority bindings (they must beat the focused list's home/end),
        # so they step aside while the user types into an input (go-to box, log filter).
        if action.startswith("replay_") and isinstance(self.focused, Input):
            return False
        return super().check_action(action, parameters)

    def __init__(self, source: ReplaySource, **kwargs: Any) -> None:
        super().__init__(source, **kwargs)
        self.replay_source = source
        source.on_reset = self.reset_view

    def compose(self):
        for widget in super().compose():
            if isinstance(widget, Footer):
                with Horizontal(id="replay-goto-row"):
                    yield Input(
                        placeholder="go to: +30  -2m  1:30  50%  @15:04:05  start  end   (esc cancels)",
                        id="replay-goto",
                    )
                yield TimeCursorBar(self.replay_source, id="replay-bar")
            yield widget

    def on_mount(self) -> None:
        # (SgltuiApp.on_mount runs too: Textual calls the handler of every class in the MRO.)
        self.query_one("#replay-goto-row").display = False

    # -- rebuilding after a jump ---------------------------------------------------------------
    async def reset_view(self, t: float) -> None:
        """Start the panes over at time t: STATUS then, the recent history, the log tail."""
        old = self.model
        self.model = TuiModel(
            history_points=old.history_points, own_client=old.own_client, clock=old.clock
        )
        self.model.bench = {}
        replay = self.replay_source.replay
        await self._on_connected(replay.status_at(t))
        for push in replay.window(t):
            self.mark(*self.model.apply_push(push))
        self.mark(*self.model.apply_status(replay.status_at(t)))

    # -- actions ------------------------------------------------------------------------------
    def action_replay_toggle(self) -> None:
        self.replay_source.toggle()

    def action_replay_step(self, steps: int) -> None:
        self.replay_source.pause()
        self.replay_source.step(steps * STEP_S * max(1.0, self.replay_source.speed / 10.0))

    def action_replay_event(self, direction: int) -> None:
        self.replay_source.pause()
        moved = (
            self.replay_source.next_event() if direction > 0 else self.replay_source.prev_event()
        )
        if not moved:
            self.notify("no more events that way", timeout=2)

    def action_replay_speed(self, direction: int) -> None:
        (self.replay_source.faster if direction > 0 else self.replay_source.slower)()

    def action_replay_seek(self, where: str) -> None:
        s = self.replay_source
        s.seek(s.start if where == "start" else s.end)

    def action_replay_goto(self) -> None:
        row = self.query_one("#replay-goto-row")
        row.display = True
        box = self.query_one("#replay-goto", Input)
        box.value = ""
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "replay-goto":
            return
        event.stop()
        s = self.replay_source
        try:
            target = parse_seek(event.value, s.t, s.start, s.end)
        except SeekError as exc:
            self.notify(str(exc), severity="warning", markup=False)
            return
        self._close_goto()
        s.pause()
        s.seek(target)

    def on_key(self, event) -> None:
        # Runs before SgltuiApp.on_key (MRO order); prevent_default keeps the base one out.
        if event.key == "escape" and self.query_one("#replay-goto-row").display:
            event.stop()
            event.prevent_default()
            self._close_goto()

    def _close_goto(self) -> None:
        self.query_one("#replay-goto-row").display = False
        self.query_one("#profile-list").focus()

    def action_quit_app(self) -> None:
        self.replay_source.pause()  # no playback task may outlive the app's event loop
        self.exit(None)


def make_replay_app(
    session: Path | ReplaySource,
    *,
    at: float | None = None,
    speed: float = 10.0,
    load_user_themes: bool = True,
    **kwargs: Any,
) -> ReplayApp:
    """Build the replay app the way `sgltui replay` and the tests do."""
    from sgltui.tui.themes import load_themes

    source = (
        session
        if isinstance(session, ReplaySource)
        else ReplaySource.open(Path(session), at=at, speed=speed)
    )
    themes, errors = load_themes() if load_user_themes else ({}, [])
    app = ReplayApp(source, themes=themes.values(), **kwargs)
    app.theme_errors = errors
    return app
