"""A job that makes no progress while its server is ready: told, with why, instead of a stale ETA.

A runner may send and get nothing back for a long while without anything failing: requests that
hang in a wedged server, a server that refuses every connection though it says ready, answers
that are all errors being retried. `StallWatch` is fed once a second with what the job's runner
reports; after `stall_s` seconds with no new answer while the job should be sending, it says
"stalled: <why>" (once, until an answer comes), read from the runner's own counters.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_STALL_S = 60.0


@dataclass
class StallWatch:
    stall_s: float = DEFAULT_STALL_S
    _answered: int = -1
    _since: float | None = None  # when the job last answered, or began to be watched
    _conn_errors: int = 0
    _retries: int = 0
    stalled: str | None = None  # "stalled: ..." while stalled

    def reset(self) -> None:
        """Not sending on purpose (paused, held, waiting for its server): nothing to say."""
        self._since = None
        self.stalled = None

    def observe(
        self,
        now: float,
        answered: int,
        progress: dict,
        server: str,
        tokens_at: float | None = None,
    ) -> str | None:
        """Feed one reading of a job that should be sending. Returns the new `stalled` line when
        it changed to one (None otherwise); `stalled` itself goes back to None on progress.
        `tokens_at`: when (same clock as `now`) the server last said it was producing tokens:
        long answers on their way are progress, not a stall (8k tokens at 30 tok/s outlast 60 s)."""
        conn, retries = int(progress.get("conn_errors", 0)), int(progress.get("retries", 0))
        if self._since is None or answered != self._answered:
            self._since, self._answered = now, answered
            self._conn_errors, self._retries = conn, retries
            self.stalled = None
            return None
        if tokens_at is not None and tokens_at > self._since:
            self._since = tokens_at
            self.stalled = None
            return None
        quiet = now - self._since
        if self.stalled is not None or quiet < self.stall_s:
            return None
        self.stalled = f"stalled: no answer for {quiet:.0f}s while {server} is ready; " + _why(
            int(progress.get("in_flight", 0)), conn - self._conn_errors, retries - self._retries
        )
        return self.stalled


def _why(in_flight: int, new_conn_errors: int, new_retries: int) -> str:
    if new_conn_errors:
        return (
            f"{new_conn_errors} connection errors since (the server refuses or drops "
            "connections); check `sgltui logs`, or `sgltui restart`"
        )
    if new_retries:
        return (
            f"{new_retries} requests were answered with errors and retried; "
            "see the server's log (`sgltui logs`)"
        )
    if in_flight:
        return (
            f"{in_flight} requests in flight get no answer (a wedged server?); "
            "check `sgltui logs`, or `sgltui restart`"
        )
    return "nothing is in flight: the runner sends nothing; `sgltui job resume` starts a new one"
