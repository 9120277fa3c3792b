"""Jobs: the agent's batch jobs (sgltui/agent/jobs_host.py): progress, ETA, rate over time,
per-profile segments and failures; space pauses or resumes, + and - change the concurrency.

The pane asks the agent for the jobs once a second, and only while it is on screen (a hidden
tab costs nothing); the ETA is the agent's, computed with the bench's estimator.
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.widget import Widget
from textual.widgets import Static

from sgltui.agent.client import AgentError, decode_reply
from sgltui.core import choice, units
from sgltui.core.charts import filled_cells, sparkline
from sgltui.protocol import JobState, JobView, to_builtins
from sgltui.tui import fmt

POLL_S = 1.0
ENDED = (JobState.DONE, JobState.CANCELLED, JobState.FAILED)
BAR = 30


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
        f"[b]{escape(str(v.name))}[/] [dim]{escape(v.id)}[/]  {escape(state)}"
        + ("  [b]pinned[/]" if v.pinned else ""),
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
        lines.append(f"energy {_energy(v.joules, v.answered, v.out_tokens)}")
    for s in v.segments:
        secs = max(0.0, s.last - s.started)
        rate = s.out_tokens / secs if secs > 0 else None
        lines.append(
            f"  {escape(str(s.profile)):<20} {s.completions:>9,} compl  "
            f"{s.out_tokens:>11,} tok  {units.duration(secs):>7}  {units.tok_s(rate)}"
            + (f"  {_energy(s.joules, s.completions, s.out_tokens)}" if s.joules else "")
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


def _energy(joules: float, completions: int, out_tokens: int) -> str:
    text = f"{units.sig3(joules / 1000)} kJ"
    if completions:
        text += f"  {units.sig3(joules / completions)} J/compl"
    if joules > 0 and out_tokens:
        text += f"  {units.sig3(out_tokens / joules)} tok/J"
    return text


class JobsPane(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    JobsPane { padding: 0 1; }
    JobsPane #jobs-body { height: auto; }
    """
    BINDINGS = [
        Binding("space", "toggle_pause", "Pause/resume job"),
        Binding("plus,equals_sign", "concurrency(2.0)", "More concurrency"),
        Binding("minus", "concurrency(0.5)", "Less concurrency"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job: JobView | None = None

    def compose(self) -> ComposeResult:
        yield Static(
            "[dim]No batch jobs. Start one with `sgltui job run INPUT.jsonl`.[/]", id="jobs-body"
        )

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self._poll)

    def _shown(self) -> bool:
        node: Any = self
        while isinstance(node, Widget):
            if not node.display:
                return False
            node = node.parent
        return True

    def _poll(self) -> None:
        if self._shown():
            self.refresh_jobs()

    @work(exclusive=True, group="jobs", exit_on_error=False, description="batch jobs")
    async def refresh_jobs(self) -> None:
        source = getattr(self.app, "source", None)
        if source is None:
            return
        try:
            views: list[JobView] = decode_reply("job_list", await source.call("job_list"))
            active = [v for v in views if v.state not in ENDED]
            pick = (active or views)[-1] if views else None
            if pick is not None:
                pick = decode_reply("job_status", await source.call("job_status", job=pick.id))
        except (AgentError, ConnectionError, OSError) as exc:  # a replay, an older agent
            self.query_one("#jobs-body", Static).update(
                f"[dim]jobs unavailable: {escape(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}[/]"
            )
            return
        self.job = pick
        body = self.query_one("#jobs-body", Static)
        if pick is None:
            return
        others = [v for v in views if v.id != pick.id]
        text = render_job(pick)
        if others:
            text += "\n\n" + "\n".join(
                f"[dim]{escape(v.id)} {escape(str(v.name))}: {v.state}, "
                f"{v.answered:,}/{v.total or 0:,}[/]"
                for v in others[-5:]
            )
        body.update(text)

    @work(group="jobs-cmd", exit_on_error=False)
    async def _call(self, op: str, **args: Any) -> None:
        try:
            await self.app.source.call(op, **args)  # type: ignore[attr-defined]
        except (AgentError, ConnectionError, OSError) as exc:  # the agent's one-line refusal
            self.notify(str(exc).splitlines()[0], title=op, severity="warning", markup=False)
        self.refresh_jobs()

    # The actions change the pane's copy at once, so that keys pressed faster than the pane
    # re-reads the agent build on each other (+ + doubles twice).

    def action_toggle_pause(self) -> None:
        if self.job is None:
            return
        op = "job_resume" if self.job.state == JobState.PAUSED else "job_pause"
        self.job.state = JobState.PAUSED if op == "job_pause" else JobState.RUNNING
        self._call(op, job=self.job.id)

    def action_concurrency(self, factor: float) -> None:
        if self.job is None:
            return
        cur = max(1, self.job.concurrency)
        new = max(1, int(round(cur * factor)))
        if new == cur:
            new = cur + 1 if factor > 1 else max(1, cur - 1)
        self.job.concurrency = new
        self._call("job_set", job=self.job.id, concurrency=new)
