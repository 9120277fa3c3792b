"""The errors a client of the agent raises: one class per protocol.ErrorCode.

`AgentError` is the base (catch it to print the one line); a caller that does something
different for one kind catches its class (`Pinned`: ask, then send again with confirm; `Busy`:
wait and ask again), and nothing reads an error's words to decide. `str(exc)` is the line a
person reads: the message and, after "; ", the fix (`tui_line()`: the TUI's wording of it).
"""

from __future__ import annotations

from typing import ClassVar

from sgltui import protocol


class AgentError(Exception):
    """One line from the agent or about the connection to it."""

    code: ClassVar[protocol.ErrorCode] = "internal"

    def __init__(self, message: str, fix: str | None = None, fix_tui: str | None = None) -> None:
        super().__init__(f"{message}; {fix}" if fix else message)
        self.message = message
        self.fix = fix
        self.fix_tui = fix_tui  # the remedy in the TUI's words (a key), where it differs

    def tui_line(self) -> str:
        """The line the TUI shows: the message and the remedy in its words, else the CLI's."""
        fix = self.fix_tui or self.fix
        return f"{self.message}; {fix}" if fix else self.message


class Busy(AgentError):
    """Another command holds the slot or pool now."""

    code = "busy"


class Pinned(AgentError):
    """A batch job is pinned to the slot: the command needs confirm (`--yes`)."""

    code = "pinned"


class Already(AgentError):
    """It is so already (the slot runs that profile; it is stopped)."""

    code = "already"


class Refused(AgentError):
    """A check refused the command; the fix says what to do."""

    code = "refused"


class NotFound(AgentError):
    """No such profile, slot, pool, job, run or log."""

    code = "not_found"


class Invalid(AgentError):
    """The request itself is wrong (unknown op, bad arguments)."""

    code = "invalid"


class Unavailable(AgentError):
    """The agent (or what the op needs) cannot be reached."""

    code = "unavailable"


class ConnectionLost(Unavailable):
    """The connection dropped with the request unanswered (a read-only op may be asked again)."""


class Internal(AgentError):
    """A bug in the agent; its log has the traceback."""

    code = "internal"


class VersionMismatch(AgentError):
    """The agent runs another version; the message says which and how to restart it."""

    code = "version"


BY_CODE: dict[str, type[AgentError]] = {
    cls.code: cls
    for cls in (Busy, Pinned, Already, Refused, NotFound, Invalid, Unavailable, Internal)
}
BY_CODE["version"] = VersionMismatch


def from_reply(op: str, error: protocol.Error | str | None) -> AgentError:
    """The exception for an error reply to `op`. A bare line comes before a hello agreed: the
    refusal of a hello (an agent of another version: the line says which and what to do), or
    from an agent older than typed errors."""
    if isinstance(error, protocol.Error):
        return BY_CODE.get(error.code, AgentError)(error.message, error.fix, error.fix_tui)
    line = error or "the agent refused the command"
    return VersionMismatch(line) if op == "hello" else Refused(line)
