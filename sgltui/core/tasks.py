"""Background tasks that never die unseen.

A task nobody awaits keeps its exception to itself until the garbage collector prints "Task
exception was never retrieved" (if ever): a `--choose` trial once stayed 'swapping' for ever
that way (issue 35). `watched` retrieves the failure as soon as the task ends, logs it with its
traceback and hands it to `on_error`, which turns it into what the user sees (a failed trial,
a refused command, an event).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger("sgltui.tasks")

T = TypeVar("T")


def watched(
    task: asyncio.Task[T],
    what: str,
    on_error: Callable[[BaseException], None] | None = None,
    expected: tuple[type[BaseException], ...] = (),
) -> asyncio.Task[T]:
    """`task`, whose failure (not its cancellation) is logged and passed to `on_error`; an
    `expected` failure (a refusal the caller reports itself) is logged as one line."""

    def done(t: asyncio.Task[T]) -> None:
        if t.cancelled():
            return
        exc = t.exception()
        if exc is None:
            return
        if isinstance(exc, expected):
            log.info("%s: %s", what, one_line(exc))
        else:
            log.error("%s failed: %s", what, one_line(exc), exc_info=exc)
        if on_error is not None:
            try:
                on_error(exc)
            except Exception:  # the report of a failure must not fail unseen either
                log.exception("%s: reporting its failure failed", what)

    task.add_done_callback(done)
    return task


def spawn(
    coro: Coroutine[Any, Any, T],
    what: str,
    on_error: Callable[[BaseException], None] | None = None,
) -> asyncio.Task[T]:
    """A watched task running `coro` on the running loop."""
    return watched(asyncio.get_running_loop().create_task(coro, name=what), what, on_error)


def one_line(exc: BaseException) -> str:
    """The exception as a line: its message, or its type when it has none."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
