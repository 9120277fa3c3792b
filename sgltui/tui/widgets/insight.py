"""The insight card of each running profile: is MTP / HiCache paying off, and what bounds
max running requests. The figures are computed by sgltui.core.insight; this pane feeds its
ledger from the model (engine readings, capacity cards, bench results) and prints the card."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.markup import escape
from textual.widget import Widget

from sgltui.core import insight


class InsightPane(Widget, can_focus=True):
    DEFAULT_CSS = """
    InsightPane { height: 1fr; padding: 0 1; overflow-y: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ledger = insight.Ledger()
        self._seen_engine: dict[str, Any] = {}  # profile -> ts of the last reading counted
        self._seen_bench: set[str] = set()
        self._timeline_ts = float("-inf")  # slot 0's timeline is counted up to here
        self._cards: list[dict[str, Any]] = []
        self._text = ""

    def show(self, model: Any) -> None:
        """Feed what is new in `model` (a TuiModel) and repaint when the text changed."""
        for run_id, run in getattr(model, "bench", {}).items():
            if run.result and run_id not in self._seen_bench:
                self._seen_bench.add(run_id)
                self.ledger.observe_bench(run.result)
        cards = []
        for slot in model.slots:
            name = slot.get("profile")
            if not name or slot.get("state") not in ("ready", "draining"):
                continue
            slot_id = str(slot.get("id"))
            self.ledger.observe_card(name, slot.get("capacity"))
            engine = model.engine(slot_id)
            if slot_id == "0":
                # Slot 0's readings are all on the model's timeline: count every point once
                # (several samples can arrive between two repaints).
                self.ledger.observe_engine(name, engine, point=False)
                self._feed_timeline(model, name)
            else:
                stamp = (engine or {}).get("ts")
                if engine and self._seen_engine.get(name) != stamp:
                    self._seen_engine[name] = stamp  # a status refresh repeats the reading
                    self.ledger.observe_engine(name, engine)
            cards.append(insight.card(self.ledger, name))
        self._cards = cards
        markup = self._card_text()
        if markup != self._text:
            self._text = markup
            self.refresh(layout=True)

    def _feed_timeline(self, model: Any, name: str) -> None:
        series = getattr(model, "series", {})
        running = {ts: v for ts, v in series.get("running", ())}
        for ts, throughput in series.get("gen_throughput", ()):
            if ts > self._timeline_ts and ts in running:
                self.ledger.observe_point(name, running[ts], throughput)
        points = series.get("gen_throughput") or ()
        if points:
            self._timeline_ts = max(self._timeline_ts, points[-1][0])

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
