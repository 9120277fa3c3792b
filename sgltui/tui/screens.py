"""Modal screens: how to treat running requests, confirm, bench settings, help."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from sgltui import protocol
from sgltui.core import units
from sgltui.core.advice import Proposal
from sgltui.tui.bindings import KEYS


class _Modal(ModalScreen):
    DEFAULT_CSS = """
    _Modal { align: center middle; }
    _Modal > Vertical { width: 70; max-width: 95%; height: auto; max-height: 90%;
                        border: thick $primary; background: $surface; padding: 1 2; }
    _Modal Horizontal { height: auto; margin-top: 1; }
    _Modal Button { margin-right: 1; min-width: 10; }
    """


class _Choice(_Modal):
    """A choice among buttons: returns the pressed button's id, or None for the one with id
    'cancel' (its keys bind `choose(...)` with the same ids)."""

    def action_choose(self, choice: str | None) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)


class DrainChoice(_Choice):
    """Requests are running: drain them, force (cut them), or cancel. Returns 'wait'|'force'|None."""

    BINDINGS = [
        Binding("d", "choose('wait')", "Drain", id="modal.drain"),
        Binding("f", "choose('force')", "Force", id="modal.force"),
        Binding("c,escape,n", "choose(None)", "Cancel", id="modal.cancel"),
    ]

    def __init__(
        self, what: str, profile: str, running: int, live: Callable[[], int] | None = None
    ) -> None:
        super().__init__()
        self.what, self.profile, self.running = what, profile, running
        self.live = live  # the count now (the app's latest sample): the line follows it

    def _line(self) -> str:
        now = " now" if self.live is not None else ""
        return (
            f"[b]{escape(self.what)}[/]: {self.running} request(s) in flight{now} on "
            f"[b]{escape(self.profile)}[/]."
        )

    def on_mount(self) -> None:
        if self.live is not None:
            self.set_interval(0.5, self._follow, name="in-flight count")

    def _follow(self) -> None:
        """The count as requests finish or arrive (it kept the count of the key press)."""
        if self.live is None:
            return
        running = self.live()
        if running != self.running:
            self.running = running
            self.query_one("#drain-count", Label).update(self._line())

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self._line(), id="drain-count")
            yield Label(
                "[b]d[/] drain: let them finish first (bounded wait)\n[b]f[/] force: cut them now\n"
                "[b]c[/] or esc: cancel"
            )
            with Horizontal():
                yield Button("Drain", id="wait", variant="primary")
                yield Button("Force", id="force", variant="error")
                yield Button("Cancel", id="cancel")


class SlotOrPool(_Choice):
    """A profile key with several slots in a pool: this slot, or the whole pool one slot at a
    time. Returns 'slot'|'pool'|None."""

    BINDINGS = [
        Binding("s", "choose('slot')", "This slot", id="modal.slot"),
        Binding("p", "choose('pool')", "Whole pool", id="modal.pool"),
        Binding("c,escape,n", "choose(None)", "Cancel", id="modal.cancel"),
    ]

    def __init__(self, profile: str, slot: str, pool: str, slots: int) -> None:
        super().__init__()
        self.profile, self.slot, self.pool, self.slots = profile, slot, pool, slots

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                f"[b]{escape(self.profile)}[/]: this slot, or the whole pool (rolling)?\n"
                f"[b]s[/] slot {escape(self.slot)} only\n"
                f"[b]p[/] pool {escape(self.pool)}: its {self.slots} slots one at a time, "
                "the others serving\n[b]c[/] or esc: cancel"
            )
            with Horizontal():
                yield Button(f"Slot {self.slot}", id="slot", variant="primary")
                yield Button(f"Pool {self.pool}", id="pool", variant="warning")
                yield Button("Cancel", id="cancel")


class AcceptChoice(_Choice):
    """The proposal is written: swap to it, keep it warm first, or later. Returns
    'swap'|'warm'|None."""

    BINDINGS = [
        Binding("s", "choose('swap')", "Swap now", id="modal.swap"),
        Binding("k", "choose('warm')", "Keep warm", id="modal.warm"),
        Binding("c,escape,n", "choose(None)", "Later", id="modal.cancel"),
    ]

    def __init__(self, proposal: Proposal, path: str, serving: str) -> None:
        super().__init__()
        self.proposal, self.path, self.serving = proposal, path, serving

    def compose(self) -> ComposeResult:
        p = self.proposal
        delta = ", ".join(f"{k} = {json.dumps(v)}" for k, v in p.delta.items())
        with Vertical():
            yield Static(
                f"Wrote [b]{escape(p.name)}[/] (extends {escape(self.serving)}: "
                f"{escape(delta)})\n{escape(self.path)}\n\n"
                f"[b]s[/] swap to it now\n[b]k[/] keep it warm beside {escape(self.serving)} "
                "first (a standby: the swap then takes seconds)\n[b]c[/] or esc: later "
                "(it is in the Profiles pane)"
            )
            with Horizontal():
                yield Button("Swap now", id="swap", variant="primary")
                yield Button("Keep warm", id="warm")
                yield Button("Later", id="cancel")


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
            yield Static(self.question)  # a Label would cut a long question at the dialog edge
            with Horizontal():
                yield Button("Yes (y)", id="yes", variant="primary")
                yield Button("No (n)", id="no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class BenchDialog(_Modal):
    """Bench settings with an estimate of how long the run takes; returns a spec dict or None.

    Field names are those of sgltui.bench.spec.BenchSpec (the agent validates the rest)."""

    DEFAULT_CSS = """
    BenchDialog Grid { grid-size: 4; grid-columns: auto 1fr auto 1fr; grid-gutter: 0 1;
                       height: auto; }
    BenchDialog Grid Label { padding: 0 0 0 0; }
    BenchDialog Input, BenchDialog Input:focus { height: 1; border: none; padding: 0 1; }
    BenchDialog Input:focus { background: $surface-lighten-1; text-style: bold; }
    BenchDialog Input.-invalid, BenchDialog Input.-invalid:focus { border: none;
                                                                   background: $error 30%; }
    BenchDialog #bench-estimate { margin-top: 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="modal.cancel")]

    def __init__(
        self,
        profiles: list[str],
        tok_s: float | None = None,
        per_request: float | None = None,
        seen_on: str | None = None,
        measured: dict[str, tuple[dict[int, float], float | None]] | None = None,
    ) -> None:
        super().__init__()
        self.profiles = profiles
        self.tok_s = tok_s  # the recent output throughput (used when no per-request rate)
        # The serving profile's decode speed per request (tok/s) over the last minute: a
        # point at concurrency c runs about c times that. The slot's total rate was the demo
        # load's (1-2 requests): it estimated 26 s for a run of 4.3 s.
        self.per_request, self.seen_on = per_request, seen_on
        # profile -> ({concurrency: tok/s}, when): this session's benches, used first
        self.measured = measured or {}

    def compose(self) -> ComposeResult:
        from textual.containers import Grid

        with Vertical():
            yield Label("[b]Benchmark[/]  (enter: run, esc: cancel, tab: next field)")
            yield Label("profiles, comma-separated (each is swapped in, in turn)")
            yield Input(",".join(self.profiles), id="bench-profiles")
            with Grid():
                yield Label("concurrencies")
                yield Input("1,4,16", id="bench-concurrency")
                yield Label("requests/level")
                yield Input("64", id="bench-requests", type="integer")
                yield Label("input tokens")
                yield Input("1024", id="bench-input", type="integer")
                yield Label("output tokens")
                yield Input("256", id="bench-output", type="integer")
                yield Label("repeats")
                yield Input("1", id="bench-repeat", type="integer")
                yield Label("job size")
                yield Input("", id="bench-job", placeholder="completions", type="integer")
            yield Label("workload file (JSONL; empty: random prompts of those lengths)")
            yield Input("", id="bench-workload", placeholder="path/to/prompts.jsonl")
            yield Static("", id="bench-estimate")
            yield Static("", id="bench-error")

    def on_mount(self) -> None:
        self._estimate()

    @on(Input.Changed)
    def _changed(self) -> None:
        self._estimate()

    def _spec_from_fields(self) -> dict[str, Any]:
        """The spec from the fields; ValueError with what to fix."""

        def ints(field: str, what: str, allow_empty: bool = False) -> list[int]:
            raw = self.query_one(f"#bench-{field}", Input).value
            try:
                values = [int(v) for v in raw.replace(" ", "").split(",") if v]
            except ValueError:
                raise ValueError(f"{what} must be whole numbers (e.g. 1,4,16)") from None
            if (not values and not allow_empty) or any(v <= 0 for v in values):
                raise ValueError(f"{what}: give positive whole numbers")
            return values

        profiles = [
            p.strip()
            for p in self.query_one("#bench-profiles", Input).value.split(",")
            if p.strip()
        ]
        if not profiles:
            raise ValueError("give at least one profile")
        spec: dict[str, Any] = {
            "profiles": profiles,
            "concurrency": ints("concurrency", "concurrencies"),
            "requests": ints("requests", "requests")[0],
            "input_len": ints("input", "input tokens")[0],
            "output_len": ints("output", "output tokens")[0],
            "repeat": ints("repeat", "repeats")[0],
        }
        job = ints("job", "job size", allow_empty=True)
        if job:
            spec["job_completions"] = job[0]
        workload = self.query_one("#bench-workload", Input).value.strip()
        if workload:
            spec["workload"] = workload
        return spec

    def _estimate(self) -> None:
        box = self.query_one("#bench-estimate", Static)
        try:
            spec = self._spec_from_fields()
        except ValueError:
            box.update("")
            return
        points = len(spec["profiles"]) * len(spec["concurrency"]) * spec["repeat"]
        tokens = points * spec["requests"] * spec["output_len"]
        known = [p for p in spec["profiles"] if p in self.measured]
        if known or (self.per_request and self.per_request > 0):
            per_point = spec["requests"] * spec["output_len"]
            secs = 0.0
            for p in spec["profiles"]:
                for c in spec["concurrency"]:
                    secs += spec["repeat"] * per_point / self._rate(p, min(c, spec["requests"]))
            basis = []
            if known:
                whens = [w for p in known if (w := self.measured[p][1]) is not None]
                ago = f", {units.duration(time.time() - max(whens))} ago" if whens else ""
                basis.append(f"{', '.join(known)} as measured by its bench{ago}")
            if len(known) < len(spec["profiles"]) and self.per_request:
                basis.append(
                    f"{self.per_request:.0f} tok/s per request ({escape(str(self.seen_on))}, "
                    "last minute) times the concurrency"
                )
            box.update(
                f"{points} point(s), {tokens:,} output tokens: about "
                f"[b]{units.estimate(secs)}[/] ({escape('; '.join(basis))}), plus a server "
                "start per profile"
            )
        elif self.tok_s and self.tok_s > 0:
            box.update(
                f"{points} point(s), {tokens:,} output tokens: about "
                f"[b]{units.estimate(tokens / self.tok_s)}[/] at the {units.tok_s(self.tok_s)} seen "
                f"lately (low concurrencies run slower), plus a server start per profile"
            )
        else:
            box.update(
                f"{points} point(s), {tokens:,} output tokens; no throughput seen yet to "
                "estimate the duration"
            )

    def _rate(self, profile: str, c: int) -> float:
        """Output tok/s of `profile` at concurrency c: its bench at the nearest concurrency
        (scaled by c / that one, at most doubled per step away: batching flattens it), else the
        speed per request seen lately times c."""
        rates = self.measured.get(profile, ({}, None))[0]
        if rates:
            near = min(rates, key=lambda k: abs(k - c))
            return max(
                rates[near] * min(c / near, 2.0) if c > near else rates[near] * c / near, 1e-6
            )
        return max((self.per_request or 1e-6) * c, 1e-6)

    @on(Input.Submitted)
    def _submit(self) -> None:
        try:
            spec = self._spec_from_fields()
        except ValueError as exc:
            self.query_one("#bench-error", Static).update(f"[$error]{escape(str(exc))}[/]")
            return
        self.dismiss(spec)

    def action_cancel(self) -> None:
        self.dismiss(None)


def key_label(key: str) -> str:
    """How a Textual key name reads to a person ("slash" -> "/")."""
    names = {"slash": "/", "question_mark": "?", "enter": "enter", "escape": "esc"}
    return ", ".join(names.get(k.strip(), k.strip()) for k in key.split(","))


class HelpScreen(_Modal):
    DEFAULT_CSS = "HelpScreen > Vertical { width: 100; }"
    BINDINGS = [Binding("escape,q,h,f1,question_mark", "close", "Close", id="modal.close")]

    def __init__(self, keymap: dict[str, str], profiles: list[protocol.ProfileRow]) -> None:
        super().__init__()
        self.keymap = keymap
        self.profiles = profiles

    def compose(self) -> ComposeResult:
        from sgltui.tui.widgets.profiles import ordered

        # Three columns with the id before the text: a long tooltip may wrap at the end of
        # its own column, never through the binding id (the help screen is 100 wide at most).
        def row(key: str, text: str, binding_id: str = "") -> str:
            ident = f"[dim]{binding_id:<18}[/] " if binding_id else ""
            return f"  [b $accent]{escape(key):<10}[/] {ident}{escape(text)}"

        rows = ["[b]Keys[/]  (remap by id in ~/.config/sgltui/config.toml, table \\[keymap])", ""]
        for p in ordered(self.profiles):
            if p.key:
                rows.append(row(str(p.key), f"swap to {p.name}"))
        rows.append(row("enter", "swap to / start the highlighted profile"))
        for k in KEYS:
            rows.append(row(key_label(self.keymap.get(k.id, k.key)), k.tooltip, k.id))
        rows += [
            "",
            row("ctrl+p", "command palette: every action by name"),
            row("tab", "move between panes; arrows scroll, pgup/pgdn page"),
            "",
            "Quitting leaves servers and the demo load running: `sgltui stop` stops the servers.",
        ]
        with Vertical():
            with VerticalScroll():
                yield Static("\n".join(rows))

    def action_close(self) -> None:
        self.dismiss(None)
