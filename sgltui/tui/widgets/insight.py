"""The insight card of each running profile: is MTP / HiCache paying off, and what bounds
max running requests. The figures are computed by sgltui.core.insight; this pane feeds its
ledger from the model (engine readings, capacity cards, bench results) and prints the card."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.markup import escape
from textual.widget import Widget

from sgltui import protocol
from sgltui.core import insight
from sgltui.protocol import SlotState

_SERVING = (SlotState.READY, SlotState.DRAINING)


class InsightPane(Widget, can_focus=True):
    DEFAULT_CSS = """
    InsightPane { height: 1fr; padding: 0 1; overflow-y: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ledger = insight.Ledger()
        self._seen_engine: dict[str, Any] = {}  # profile -> ts of the last reading counted
        self._seen_bench: set[str] = set()
        self._seen_card: dict[str, Any] = {}  # slot -> the capacity card last fed
        self._cards: list[dict[str, Any]] = []
        self._shown_names: list[str] = []  # the profiles whose cards the pane shows
        self._stale = False  # fed while hidden: the text is worked out when shown
        self._text = ""

    def show(self, model: Any) -> None:
        """Feed what is new in `model` (a TuiModel) and repaint when the text changed."""
        for run_id, run in getattr(model, "bench", {}).items():
            if run.result and run_id not in self._seen_bench:
                self._seen_bench.add(run_id)
                self.ledger.observe_bench(run.result)
        names = []
        serving = model.current
        if serving is None or serving.state not in _SERVING or not serving.profile:
            self.ledger.interrupt()  # launching, swapping: no measurement spans it
        for slot in model.slots:
            name = slot.profile
            if not name or slot.state not in _SERVING:
                continue
            # the ledger (core/insight.py) reads cards as the bench results hold them: JSON
            # (converted when the status brings a new one, not on every sample)
            card = slot.capacity
            if card is not None and self._seen_card.get(slot.id) is not card:
                self._seen_card[slot.id] = card
                self.ledger.observe_card(name, protocol.to_builtins(card))
            engine = model.engine(slot.id)
            stamp = (engine or {}).get("ts")
            if engine and self._seen_engine.get(name) != stamp:
                self._seen_engine[name] = stamp  # a status refresh repeats the reading
                self.ledger.observe_engine(name, engine)
            # With several slots the card is the selected slot's (the slots view's choice).
            if not model.several or (serving is not None and slot.id == serving.id):
                names.append(name)
        self._shown_names = names
        if not self.is_on_screen:
            # The card is worked out when its tab is shown (on_show): fed every sample, drawn
            # from the ledger then (a card per sample that nobody sees cost a tenth of an
            # idle TUI's drawing).
            self._stale = True
            return
        self._update_text()

    def _update_text(self) -> None:
        self._stale = False
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

    def on_show(self) -> None:
        if self._stale:
            self._update_text()
        self.refresh(layout=True)

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
        return "\n".join(out)

    def render(self) -> Content:
        return Content.from_markup(self._text or self._card_text())
