"""The insight card of each running profile: is MTP / HiCache paying off, and what bounds
max running requests. The figures are computed by sgltui.core.insight; this pane feeds its
ledger from the model (engine readings, capacity cards, bench results) and prints the card.

Below the cards, the best proposal of core/advice.py for the serving profile (a profile nobody
wrote), and the key that accepts it. The proposal needs the profile's file and the flag catalog
(file reads, maybe a probe of SGLang), so it is worked out in a thread, at most every
ADVICE_EVERY_S while the pane is shown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from textual.content import Content
from textual.markup import escape
from textual.widget import Widget

from sgltui import protocol
from sgltui.core import advice, advice_inputs, insight
from sgltui.core.profiles import ProfileError, get_profile
from sgltui.core.validate import catalog_for
from sgltui.protocol import SlotState
from sgltui.tui.model import followed_slot

_SERVING = (SlotState.READY, SlotState.DRAINING)
ADVICE_EVERY_S = 5.0
FOLD_EVERY = 30  # readings kept while the tab is hidden before they are fed in one go


# What a sample's feeding reads of the model, a plain tuple (a NamedTuple's making was two
# calls a sample): its slots by id, the slot selected in the slots view (the slot followed is
# worked out from the two only when the plan is), whether several show, each slot's engine
# reading. The model replaces these, never changes them: references are kept, not copies.
_Reading = tuple[Mapping[str, protocol.SlotView], str | None, bool, Mapping[str, Any]]


class _Plan(NamedTuple):
    """What a reading's slots say, the same for every reading of the same slots: whether no
    measurement spans it (no slot serving), the serving slots counted (id, profile), and the
    profiles whose cards show."""

    interrupt: bool
    counted: tuple[tuple[str, str], ...]
    names: list[str]


class InsightPane(Widget, can_focus=True):
    DEFAULT_CSS = """
    InsightPane { height: 1fr; padding: 0 1; overflow-y: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ledger = insight.Ledger()
        # Readings while the tab is hidden, folded into the ledger when it is read (shown, the
        # accept key, `ledger`) or FOLD_EVERY of them wait: see show.
        self._pending: list[_Reading] = []
        self._seen_engine: dict[str, Any] = {}  # profile -> ts of the last reading counted
        self._seen_bench: set[str] = set()
        self._seen_card: dict[str, Any] = {}  # slot -> the capacity card last fed
        self._cards: list[dict[str, Any]] = []
        self._shown_names: list[str] = []  # the profiles whose cards the pane shows
        # The plan of the last reading's slots (a sample leaves the slots as they were: worked
        # out per change of slots, not per reading), and what it was worked out from.
        self._plan: tuple[Mapping[str, Any], str | None, bool, _Plan] | None = None
        self._stale = False  # fed while hidden: the text is worked out when shown
        # Shown on screen, as Textual's Show and Hide events say (is_on_screen asks the
        # compositor, a walk up the DOM and an exception while hidden, every sample).
        self._visible = False
        self._text = ""
        # The serving profile's proposals (core/advice.py), worked out in a thread.
        self.advice: advice.Advice | None = None
        self.advice_error: str | None = None  # why none could be worked out (its file, ...)
        self.advice_runs = 0  # finished computations (tests wait for one)
        self._advice_inputs: tuple[Any, ...] | None = None
        self._advice_at = 0.0
        self._model: Any = None
        self.accept_key = "P"  # the app sets the key after the user's keymap

    @property
    def proposal(self) -> advice.Proposal | None:
        """The best proposal for the serving profile, if there is one."""
        return self.advice.proposals[0] if self.advice and self.advice.proposals else None

    @property
    def ledger(self) -> insight.Ledger:
        """The figures of every reading fed so far (those waiting folded in first)."""
        self._fold()
        return self._ledger

    def show(self, model: Any) -> None:
        """Feed what is new in `model` (a TuiModel) and repaint when the text changed.

        While the tab is hidden a reading is kept as it came (the model's slots, the slot
        selected and its engine readings: references, no copies) and folded into the ledger
        when something reads it, or FOLD_EVERY readings wait: a sample's slots fed one by one
        each second cost ~3x what the same work costs in one go (a second's cold caches), and
        nobody reads the ledger then. Every reading is still counted, in order."""
        self._model = model
        runs = model.bench
        for run_id, run in runs.items() if runs else ():  # (no runs: no items() each second)
            if run.result and run_id not in self._seen_bench:
                self._seen_bench.add(run_id)
                self._fold()  # (in order with the readings before it)
                self._ledger.observe_bench(run.result)
        reading = (model.state.slots, model.selected, model.several, model.telemetry.engine)
        if not self._visible:
            # The card is worked out when its tab is shown (on_show): fed every sample, drawn
            # from the ledger then (a card per sample that nobody sees cost a tenth of an
            # idle TUI's drawing).
            self._stale = True
            self._pending.append(reading)
            if len(self._pending) >= FOLD_EVERY:
                self._fold()
            return
        self._fold()
        self._feed(reading)
        self._update_text()

    def _fold(self) -> None:
        """Feed the readings kept while hidden, oldest first."""
        if self._pending:
            pending, self._pending = self._pending, []
            self._feed(*pending)

    def _feed(self, *readings: _Reading) -> None:
        """Readings into the ledger, in order; the profiles the card shows follow the newest.
        A run of readings under one plan is counted in one go (`Ledger.observe_engines`: its
        figures converted at once, a reading whose stamp its profile counted last skipped
        there), up to a reading whose plan is new or interrupts (in order with it). Per
        reading, only its plan is checked: its slots' readings are gathered per run, in one
        comprehension (an append per slot and reading was 8 calls a second)."""
        ledger, seen = self._ledger, self._seen_engine
        plan: _Plan | None = None
        start = 0  # the first reading of the run not counted yet
        for i, reading in enumerate(readings):
            kept = self._kept_plan(reading)
            if kept is not None and plan is not None and not plan.interrupt:
                continue  # the run goes on
            if plan is not None and start < i:  # (in order with a new plan, an interruption)
                ledger.observe_engines(_gathered(plan, readings[start:i]), seen)
            start = i
            plan = kept if kept is not None else self._plan_of(reading)
            if plan.interrupt:
                ledger.interrupt()  # launching, swapping: no measurement spans it
        if plan is not None:
            if start < len(readings):
                ledger.observe_engines(_gathered(plan, readings[start:]), seen)
            self._shown_names = plan.names

    def _kept_plan(self, reading: _Reading) -> _Plan | None:
        """The last reading's plan if it is this one's (the same slots, slot selected and
        `several`), else None. Slots that read the same are the same (a STATUS polled again
        makes equal Structs anew, every few seconds; compared in C, no Python call); the
        slot followed is the selected one if it is among them, else the first: the same."""
        last = self._plan
        slots, selected, several, _engines = reading
        if (
            last is not None
            and (last[0] is slots or last[0] == slots)
            and last[1] == selected
            and last[2] == several
        ):
            return last[3]
        return None

    def _plan_of(self, reading: _Reading) -> _Plan:
        """The reading's plan, worked out again only when its slots or the slot followed
        changed; a new capacity card is fed then (a card comes with new slots)."""
        kept = self._kept_plan(reading)
        if kept is not None:
            return kept
        slots, selected, several, _engines = reading
        current = followed_slot(slots, selected)
        serving = slots.get(current) if current is not None else None
        interrupt = serving is None or serving.state not in _SERVING or not serving.profile
        counted, names = [], []
        for slot in slots.values():
            name = slot.profile
            if not name or slot.state not in _SERVING:
                continue
            # the ledger (core/insight.py) reads cards as the bench results hold them: JSON
            # (converted when the status brings a new one, not on every sample)
            card = slot.capacity
            if card is not None and self._seen_card.get(slot.id) is not card:
                self._seen_card[slot.id] = card
                self._ledger.observe_card(name, protocol.to_builtins(card))
            counted.append((slot.id, name))
            # With several slots the card is the selected slot's (the slots view's choice).
            if not several or (serving is not None and slot.id == serving.id):
                names.append(name)
        plan = _Plan(interrupt, tuple(counted), names)
        self._plan = (slots, selected, several, plan)
        return plan

    def _update_text(self) -> None:
        self._fold()
        self._stale = False
        self._ask_advice()
        self._cards = [insight.card(self.ledger, name) for name in self._shown_names]
        markup = self._card_text()
        if markup != self._text:
            # A layout only when the card's height changes (the pane's own size is fixed, its
            # scroll height is not): a layout pass lays out the whole screen, and the figures
            # change with every sample. A hidden tab needs neither: it is laid out when shown.
            relayout = markup.count("\n") != self._text.count("\n")
            self._text = markup
            # (Never a refresh of a hidden tab: refreshing a widget the screen does not show
            # makes Textual lay out the whole screen again on the next frame.)
            if self.is_on_screen:
                self.refresh(layout=relayout)

    def on_hide(self) -> None:
        self._visible = False

    def on_show(self) -> None:
        self._visible = True
        if self._stale:
            self._update_text()
        self.refresh(layout=True)

    # -- the proposal ---------------------------------------------------------------------------
    def _inputs(self, model: Any) -> tuple[Any, Any, dict[int, float], list[str]] | None:
        """What the serving profile's proposals read: (slot, job, accept length by concurrency,
        profile folders); None while no slot serves a measured profile."""
        slot = getattr(model, "current", None)
        if slot is None or slot.state not in _SERVING or not slot.profile or not slot.capacity:
            return None
        accept = self.ledger.figures(slot.profile).accept_by_c()  # (the readings kept folded in)
        job = advice_inputs.job_for(slot.id, list(model.jobs.values()), None)
        dirs = list(getattr(getattr(self.app, "source", None), "profiles_dirs", []) or [])
        return slot, job, accept, dirs

    def _ask_advice(self) -> None:
        """Work the proposals out again (in a thread) when what they read changed, at most every
        ADVICE_EVERY_S."""
        model = self._model
        inputs = self._inputs(model)
        if inputs is None:
            if self.advice is not None:
                self.advice = None
            return
        slot, job, accept, dirs = inputs
        now = time.monotonic()
        key = (slot.profile, slot.capacity, tuple(sorted(accept.items())), job and job.id)
        if key == self._advice_inputs and now - self._advice_at < ADVICE_EVERY_S:
            return  # (a new card, profile or job is worked out at once; readings every few s)
        self._advice_inputs, self._advice_at = key, now
        key_of = getattr(self.app, "key_of", None)
        if key_of is not None:
            self.accept_key = key_of("advice.accept")
        telemetry = model.telemetry
        self.run_worker(
            lambda: self._advise_in_thread(slot, telemetry, job, accept, dirs),
            thread=True,
            group="advice",
            exclusive=True,
            exit_on_error=False,
            description="advice",
        )

    def _advise_in_thread(
        self, slot: Any, telemetry: Any, job: Any, accept: dict[int, float], dirs: list[str]
    ) -> None:
        result, error = _work_out(slot, telemetry, job, accept, dirs)
        self.app.call_from_thread(self._advice_ready, result, error)

    async def advice_now(self, model: Any) -> advice.Advice | None:
        """The proposals for `model` (the app's TuiModel) as of now, worked out (in a thread)
        if the pane has none yet: the accept key works before the Insight tab was opened."""
        inputs = self._inputs(model)
        if self.advice is not None or inputs is None:
            return self.advice
        slot, job, accept, dirs = inputs
        result, error = await asyncio.to_thread(_work_out, slot, model.telemetry, job, accept, dirs)
        self._advice_ready(result, error)
        return result

    def _advice_ready(self, result: advice.Advice | None, error: str | None) -> None:
        self.advice, self.advice_error = result, error
        self.advice_runs += 1
        if self.is_on_screen:
            self._cards = [insight.card(self.ledger, name) for name in self._shown_names]
            markup = self._card_text()
            if markup != self._text:
                relayout = markup.count("\n") != self._text.count("\n")
                self._text = markup
                self.refresh(layout=relayout)

    def _advice_text(self) -> list[str]:
        if self.advice_error:
            return [f"  [dim]{escape(self.advice_error)}[/]"]
        a = self.advice
        if a is None:
            return []
        out: list[str] = []
        best = self.proposal
        if best is not None:
            more = len(a.proposals) - 1
            out.append(
                f"  [b $accent]Proposal[/] [b]{escape(best.name)}[/]  "
                f"[b]{escape(self.accept_key)}[/] accept"
                + (f"  [dim](+{more} more: `sgltui advise`)[/]" if more else "")
            )
            out.append(f"    {escape(best.reason)}")
            out.append(f"    [dim]{escape(best.figure)}; cost: {escape(best.cost['text'])}[/]")
        for note in a.notes[:1]:
            out.append(f"  [b $warning]{escape(note)}[/]")
        return out

    def _card_text(self) -> str:
        if not self._cards:
            return "[dim]no server running: start a profile to see what bounds it[/]"
        out: list[str] = []
        for c in self._cards:
            out.append(f"[b]{escape(c['profile'])}[/]")
            out.append(
                "  bounds max running: "
                + (escape(c["bound"]) if c.get("bound") else "[dim]not known yet[/]")
            )
            for section in c["sections"]:
                title = "MTP / speculative" if section["title"] == "speculative" else "HiCache"
                out.append(f"  [b $accent]{title}[/]")
                out.extend(f"    {escape(line)}" for line in section["lines"])
                out.append(f"    [b]{escape(section['verdict'])}[/]")
        out.extend(self._advice_text())
        return "\n".join(out)

    def render(self) -> Content:
        return Content.from_markup(self._text or self._card_text())


def _gathered(plan: _Plan, readings: Sequence[_Reading]) -> list[tuple[str, Any]]:
    """(profile, engine reading) of each slot the plan counts, reading by reading (a slot
    with no reading left out; an empty one and a repeated stamp are the ledger's to skip)."""
    return [
        (name, engines[sid])
        for _slots, _selected, _several, engines in readings
        for sid, name in plan.counted
        if sid in engines
    ]


def _work_out(
    slot: Any, telemetry: Any, job: Any, accept: dict[int, float], dirs: list[str]
) -> tuple[advice.Advice | None, str | None]:
    """The serving profile's proposals (core/advice.py), or why none could be worked out."""
    try:
        profile = get_profile(slot.profile, dirs)
        catalog = catalog_for(profile)
        s = advice_inputs.situation(profile, slot, telemetry, job, accept)
        result = advice.advise(
            s, advice.profile_check(profile, catalog), lambda n: catalog.lookup(n) is not None
        )
    except (ProfileError, OSError, ValueError) as exc:  # said in the pane, not raised
        return None, f"no proposal: {str(exc).splitlines()[0][:200]}"
    return result, None
