"""Modal screens: how to treat running requests, confirm, bench settings, help."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from sgltui.tui.bindings import KEYS


class _Modal(ModalScreen):
    DEFAULT_CSS = """
    _Modal { align: center middle; }
    _Modal > Vertical { width: 70; max-width: 95%; height: auto; max-height: 90%;
                        border: thick $primary; background: $surface; padding: 1 2; }
    _Modal Horizontal { height: auto; margin-top: 1; }
    _Modal Button { margin-right: 1; min-width: 10; }
    """


class DrainChoice(_Modal):
    """Requests are running: drain them, force (cut them), or cancel. Returns 'wait'|'force'|None."""

    BINDINGS = [
        Binding("d", "choose('wait')", "Drain", id="modal.drain"),
        Binding("f", "choose('force')", "Force", id="modal.force"),
        Binding("c,escape,n", "choose(None)", "Cancel", id="modal.cancel"),
    ]

    def __init__(self, what: str, profile: str, running: int) -> None:
        super().__init__()
        self.what, self.profile, self.running = what, profile, running

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(
                f"[b]{escape(self.what)}[/]: {self.running} request(s) in flight on "
                f"[b]{escape(self.profile)}[/]."
            )
            yield Label(
                "[b]d[/] drain: let them finish first (bounded wait)\n[b]f[/] force: cut them now\n"
                "[b]c[/] or esc: cancel"
            )
            with Horizontal():
                yield Button("Drain", id="wait", variant="primary")
                yield Button("Force", id="force", variant="error")
                yield Button("Cancel", id="cancel")

    def action_choose(self, choice: str | None) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)


class Confirm(_Modal):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="modal.yes"),
        Binding("n,escape", "answer(False)", "No", id="modal.no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question)
            with Horizontal():
                yield Button("Yes (y)", id="yes", variant="primary")
                yield Button("No (n)", id="no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class BenchDialog(_Modal):
    """Bench settings; returns a spec dict or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="modal.cancel")]

    def __init__(self, profiles: list[str]) -> None:
        super().__init__()
        self.profiles = profiles

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("[b]Benchmark[/] (enter: run, esc: cancel)")
            yield Label("profiles (comma-separated; each is swapped in, in turn)")
            yield Input(",".join(self.profiles), id="bench-profiles")
            yield Label("concurrency levels")
            yield Input("1,4,16", id="bench-concurrency")
            yield Label("requests per level")
            yield Input("64", id="bench-requests", type="integer")
            yield Label("output tokens per request")
            yield Input("256", id="bench-output", type="integer")
            yield Static("", id="bench-error")

    @on(Input.Submitted)
    def _submit(self) -> None:
        profiles = [
            p.strip()
            for p in self.query_one("#bench-profiles", Input).value.split(",")
            if p.strip()
        ]
        try:
            conc = [
                int(c)
                for c in self.query_one("#bench-concurrency", Input).value.split(",")
                if c.strip()
            ]
            n = int(self.query_one("#bench-requests", Input).value)
            out = int(self.query_one("#bench-output", Input).value)
        except ValueError:
            self.query_one("#bench-error", Static).update(
                "[$error]concurrency and requests must be whole numbers[/]"
            )
            return
        if not profiles or not conc or n <= 0 or out <= 0 or min(conc) <= 0:
            self.query_one("#bench-error", Static).update(
                "[$error]give at least one profile, concurrency and request count[/]"
            )
            return
        # Field names of sgltui.bench.spec.BenchSpec; the agent validates the rest.
        self.dismiss({"profiles": profiles, "concurrency": conc, "requests": n, "output_len": out})

    def action_cancel(self) -> None:
        self.dismiss(None)


def key_label(key: str) -> str:
    """How a Textual key name reads to a person ("slash" -> "/")."""
    names = {"slash": "/", "question_mark": "?", "enter": "enter", "escape": "esc"}
    return ", ".join(names.get(k.strip(), k.strip()) for k in key.split(","))


class HelpScreen(_Modal):
    DEFAULT_CSS = "HelpScreen > Vertical { width: 100; }"
    BINDINGS = [Binding("escape,q,h,f1,question_mark", "close", "Close", id="modal.close")]

    def __init__(self, keymap: dict[str, str], profiles: list[dict[str, Any]]) -> None:
        super().__init__()
        self.keymap = keymap
        self.profiles = profiles

    def compose(self) -> ComposeResult:
        rows = ["[b]Keys[/]  (remap by id in ~/.config/sgltui/config.toml, table \\[keymap])", ""]
        for p in self.profiles:
            if p.get("key"):
                rows.append(
                    f"  [b $accent]{escape(str(p['key'])):<10}[/] swap to {escape(str(p['name']))}"
                )
        rows.append(f"  [b $accent]{'enter':<10}[/] swap to / start the highlighted profile")
        for k in KEYS:
            key = key_label(self.keymap.get(k.id, k.key))
            rows.append(
                f"  [b $accent]{escape(key):<10}[/] {escape(k.tooltip):<70.70} [dim]{k.id}[/]"
            )
        rows += [
            "",
            f"  [b $accent]{'ctrl+p':<10}[/] command palette: every action by name",
            f"  [b $accent]{'tab':<10}[/] move between panes; arrows scroll, pgup/pgdn page",
            "",
            "Quitting leaves servers running; `sgltui stop` stops them.",
        ]
        with Vertical():
            with VerticalScroll():
                yield Static("\n".join(rows))

    def action_close(self) -> None:
        self.dismiss(None)
