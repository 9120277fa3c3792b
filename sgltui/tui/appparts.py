"""What the app's handlers work out before they act, kept out of the App class (which only
wires keys, screens and the agent): the bench dialog from the model's readings, the question
after a bench that swapped profiles, and what a key on the Jobs tab asks of the agent."""

from __future__ import annotations

from typing import Any

from textual.markup import escape

from sgltui import protocol
from sgltui.tui import views
from sgltui.tui.model import TuiModel
from sgltui.tui.screens import BenchDialog


def bench_dialog(model: TuiModel, current: str | None) -> BenchDialog:
    """The bench dialog for the profile on screen, with what the charts say it runs at."""
    recent = [v for v in model.series_values("gen_throughput")[-60:] if v > 0]
    return BenchDialog(
        [current] if current else [],
        max(recent) if recent else None,
        views.per_request_rate(
            model.series_values("gen_throughput"), model.series_values("running")
        ),
        current,
        views.measured_rates(model.bench.values()),
    )


def swap_back_question(slot_id: str, now: str | None, back: str) -> str:
    return (
        f"The bench is done; slot {escape(slot_id)} now runs "
        f"[b]{escape(str(now))}[/]. Swap back to [b]{escape(back)}[/], the profile it had?"
    )


def job_command(
    view: protocol.JobView, what: str, factor: float
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(op, its arguments, what the model expects at once) for space, + or - on a job."""
    if what == "pause":
        paused = view.state == protocol.JobState.PAUSED
        state = protocol.JobState.RUNNING if paused else protocol.JobState.PAUSED
        return ("job_resume" if paused else "job_pause"), {"job": view.id}, {"state": state}
    cur = max(1, view.concurrency)
    new = max(1, int(round(cur * factor)))
    if new == cur:
        new = cur + 1 if factor > 1 else max(1, cur - 1)
    return "job_set", {"job": view.id, "concurrency": new}, {"concurrency": new}
