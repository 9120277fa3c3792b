"""The command palette's entries (ctrl+p): every key's action by name, a swap to each profile,
a fleet's retry, and quit. The app is reached through PaletteHost."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from textual.app import SystemCommand

from sgltui.tui.bindings import KEYS
from sgltui.tui.fleetsource import FleetSource
from sgltui.tui.model import TuiModel
from sgltui.tui.source import TuiSource


class PaletteHost(Protocol):
    model: TuiModel
    source: TuiSource
    fleet: FleetSource | None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None: ...

    def key_of(self, binding_id: str) -> str: ...

    def call_later(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> bool: ...

    async def run_action(self, action: str) -> bool: ...

    def swap_to(self, name: str) -> object: ...

    def action_quit_app(self) -> None: ...

    def local_session(self) -> str | None: ...

    def write_report(self) -> object: ...

    def job_action(self, action: str) -> None: ...


# The palette matches titles only: the words people look for that a key's name lacks.
ALSO = {
    "server.keep_warm": "standby",
    "focus.jobs": "batch job",
}
# The Jobs pane's keys (its own bindings, not the app's), for the shown job.
JOB_COMMANDS = (
    ("pause or resume (space)", "Pause the batch job, or resume it", "toggle_pause"),
    ("more concurrency (+)", "Double the batch job's concurrency", "concurrency(2.0)"),
    ("less concurrency (-)", "Halve the batch job's concurrency", "concurrency(0.5)"),
)


def commands(host: PaletteHost) -> Iterator[SystemCommand]:
    for k in KEYS:
        if k.id == "app.quit" or host.check_action(k.action.split("(")[0], ()) is False:
            continue
        also = f" · {ALSO[k.id]}" if k.id in ALSO else ""
        yield SystemCommand(
            f"{k.description}{also} ({host.key_of(k.id)})",
            k.tooltip,
            lambda a=k.action: host.call_later(host.run_action, a),
        )
    if host.model.shown_job is not None and not host.source.read_only:
        for title, help_text, action in JOB_COMMANDS:
            yield SystemCommand(
                f"Batch job: {title}", help_text, lambda a=action: host.job_action(a)
            )
    if host.local_session():
        yield SystemCommand(
            "Session report: write report.md",
            "This session's report into its folder, as `sgltui report --save`: what ran, "
            "swaps, bench runs, jobs",
            host.write_report,
        )
    if not host.source.read_only:
        sid = host.model.current_id or "-"
        for p in host.model.profiles:
            key = f" ({p.key})" if p.key else ""
            yield SystemCommand(
                f"Swap to {p.name}{key}",
                p.description or f"start or swap slot {sid}",
                lambda n=p.name: host.swap_to(n),
            )
    if host.fleet is not None:
        yield SystemCommand(
            "Retry unreachable hosts now",
            "Each host that is down tries its ssh again now, not at the end of its backoff",
            host.fleet.retry_now,
        )
    yield SystemCommand(
        "Quit sgltui (servers keep running)",
        "Close the TUI; the agent and servers stay up",
        host.action_quit_app,
    )
