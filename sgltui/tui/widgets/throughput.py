"""Throughput over the last minutes: one sparkline per series with its latest value."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline

from sgltui.tui import fmt

# (series name in TuiModel, label, formatter of the latest value)
ROWS = (
    ("gen_throughput", "gen tok/s", lambda v: fmt.num(v)),
    ("running", "running", lambda v: fmt.num(v)),
    ("queued", "queued", lambda v: fmt.num(v)),
    ("token_usage", "KV usage", lambda v: f"{v * 100:.0f}%"),
    ("accept_length", "accept len", lambda v: f"{v:.2f}"),
)


class ThroughputPane(Vertical, can_focus=True):
    DEFAULT_CSS = """
    ThroughputPane { height: auto; }
    ThroughputPane > Horizontal { height: 1; }
    ThroughputPane .series-label { width: 11; }
    ThroughputPane .series-value { width: 8; text-align: right; }
    ThroughputPane Sparkline { width: 1fr; height: 1; }
    ThroughputPane Sparkline > .sparkline--max-color { color: $accent; }
    ThroughputPane Sparkline > .sparkline--min-color { color: $primary; }
    ThroughputPane #row-gen_throughput { height: 2; }
    ThroughputPane #row-gen_throughput Sparkline { height: 2; }
    """

    def __init__(self, window_points: int = 300, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window_points = window_points
        self._values: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        for name, label, _ in ROWS:
            with Horizontal(id=f"row-{name}"):
                yield Label(label, classes="series-label")
                yield Sparkline([], id=f"spark-{name}")
                yield Label("-", id=f"value-{name}", classes="series-value")

    def show(self, series: dict[str, list[float]], has_spec: bool) -> None:
        for name, _, form in ROWS:
            values = series.get(name) or []
            if name == "accept_length":
                # Accept length exists only with speculative decoding: hide the row otherwise.
                row = self.query_one(f"#row-{name}")
                if row.display != has_spec:
                    row.display = has_spec
            window = values[-self.window_points:]
            spark = self.query_one(f"#spark-{name}", Sparkline)
            if spark.data != window:
                spark.data = window
            # Fixed-width value cells: no layout pass needed on update, no repaint if unchanged.
            text = form(values[-1]) if values else "-"
            if self._values.get(name) != text:
                self._values[name] = text
                self.query_one(f"#value-{name}", Label).update(text, layout=False)
