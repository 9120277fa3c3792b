"""Jobs: the agent's batch jobs (sgltui/agent/jobs/jobs_host.py): progress, ETA, rate over time,
per-profile segments and failures; space pauses or resumes, + and - change the concurrency.

The pane renders the model's jobs (pushed job events folded in, read in full by the app while
the tab is on screen); its keys are messages to the app. The ETA is the agent's, computed with
the bench's estimator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.message import Message
from textual.widgets import Static

from sgltui.core import choice, units
from sgltui.core.charts import filled_cells, sparkline
from sgltui.protocol import JobState, JobView, to_builtins
from sgltui.tui import fmt

BAR = 30
EMPTY = "[dim]No batch jobs. Start one with `sgltui job run INPUT.jsonl`.[/]"


def _bar(frac: float, width: int = BAR) -> str:
    filled = filled_cells(frac, width)
    return "█" * filled + "░" * (width - filled)


def render_job(v: JobView) -> str:
    total = v.total or 0
    done = v.answered + v.failed
    frac = done / total if total else 0.0
    state = str(v.state)
    if v.hold:
        state = f"held for a {v.hold}"
    elif v.stalled:
        state = v.stalled
    elif v.state == JobState.WAITING and v.waiting_for:
        state = v.waiting_for
    lines = [
        f"[b]{escape(str(v.name))}[/] [dim]{escape(v.id)} · {escape(str(v.where()))}[/]  "
        f"{escape(state)}" + ("  [b]pinned[/]" if v.pinned else ""),
        f"{_bar(frac)} {done:,}/{total:,} {frac:.1%}",
        f"{fmt.num(v.completions_s, 1)} compl/s  {units.tok_s(v.tok_s)}  "
        f"ETA {units.estimate(v.eta_s)}  "
        f"in flight {v.in_flight}  concurrency {v.concurrency} ({v.concurrency_mode})",
    ]
    if v.failed or v.retries or v.error:
        lines.append(
            f"[b]failed {v.failed:,}[/] [dim]→ {escape(v.errors_output)}[/]  "
            f"retries {v.retries:,}" + (f"  [b]{escape(v.error)}[/]" if v.error else "")
        )
    hist = [p[1] for p in v.rate_history or []]
    if len(hist) > 1:
        lines.append(
            f"tok/s [dim]{escape(sparkline(hist, 48, lo=0.0))}[/] {units.sig3(max(hist))} max"
        )
    if v.joules:
        lines.append(f"energy {units.energy(v.joules, v.answered, v.out_tokens, narrow=True)}")
    for s in v.segments:
        secs = max(0.0, s.last - s.started)
        rate = s.out_tokens / secs if secs > 0 else None
        lines.append(
            f"  {escape(str(s.profile)):<20} {s.completions:>9,} compl  "
            f"{s.out_tokens:>11,} tok  {units.duration(secs):>7}  {units.tok_s(rate)}"
            + (
                f"  {units.energy(s.joules, s.completions, s.out_tokens, narrow=True)}"
                if s.joules
                else ""
            )
        )
    if v.decision is not None:
        # the trial live: each candidate's rate with its interval, requests used and projected
        # finish, the one being measured marked; then the decision and, if any, the watch
        d = to_builtins(v.decision)
        lines.append(f"[b]{escape(choice.summary(d))}[/]")
        table = choice.table(d)
        lines.append(f"[dim]  {escape(table[0])}[/]")
        for row, c in zip(table[1:], d["candidates"], strict=True):
            mark = "▶ " if c["name"] == d.get("current") else "  "
            style = (
                "b" if c["name"] == d.get("winner") else ("dim" if c["state"] == "skipped" else "")
            )
            lines.append(f"{mark}[{style}]{escape(row)}[/]" if style else f"{mark}{escape(row)}")
    lines.append(f"[dim]{escape(v.output)}[/]")
    return "\n".join(lines)


class JobsPane(VerticalScroll, can_focus=True):
    """Renders the model's jobs; its keys ask the app (JobsPane.Command) to act on the job shown."""

    DEFAULT_CSS = """
    JobsPane { padding: 0 1; }
    JobsPane #jobs-body { height: auto; }
    """
    BINDINGS = [
        Binding("space", "toggle_pause", "Pause/resume job"),
        Binding("plus,equals_sign", "concurrency(2.0)", "More concurrency"),
        Binding("minus", "concurrency(0.5)", "Less concurrency"),
    ]

    class Command(Message):
        """A key on the job shown: `pause` toggles, `concurrency` scales by `factor`."""

        def __init__(self, job_id: str, what: str, factor: float = 1.0) -> None:
            super().__init__()
            self.job_id, self.what, self.factor = job_id, what, factor

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job: JobView | None = None
        self._text = ""

    def compose(self) -> ComposeResult:
        yield Static(EMPTY, id="jobs-body")

    def show(self, jobs: Mapping[str, JobView], shown: JobView | None, error: str | None) -> None:
        """`shown` in full, the last few others on one line each; `error` when the agent
        could not be asked (a replay, an older agent)."""
        self.job = shown
        if error and not jobs:
            text = f"[dim]jobs unavailable: {escape(error)}[/]"
        elif shown is None:
            text = EMPTY
        else:
            others = [v for v in jobs.values() if v.id != shown.id]
            text = render_job(shown)
            if others:
                text += "\n\n" + "\n".join(
                    f"[dim]{escape(v.id)} {escape(str(v.name))}: {v.state}, "
                    f"{v.answered:,}/{v.total or 0:,}[/]"
                    for v in others[-5:]
                )
        if text != self._text:
            self._text = text
            self.query_one("#jobs-body", Static).update(text)

    def action_toggle_pause(self) -> None:
        if self.job is not None:
            self.post_message(self.Command(self.job.id, "pause"))

    def action_concurrency(self, factor: float) -> None:
        if self.job is not None:
            self.post_message(self.Command(self.job.id, "concurrency", factor))
