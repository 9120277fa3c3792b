"""The one error an op raises to refuse a command (the socket server sends it as protocol.Error).

`code` (protocol.ErrorCode) is what a client acts on: the CLI prints the line, the TUI asks for a
confirmation on `pinned`, the job's trial waits on `busy`. Nothing reads the message to decide.
"""

from __future__ import annotations

from sgltui import protocol


class OpError(Exception):
    """A refused or failed command: one line for the client (`message`; `fix`), and its code.

    `message` says what is wrong, `fix` what to do in the CLI's words, `tui` in the TUI's
    (the key that does it) where they differ (protocol.Error)."""

    def __init__(
        self,
        message: str,
        code: protocol.ErrorCode = "refused",
        fix: str | None = None,
        tui: str | None = None,
    ) -> None:
        self.error = protocol.Error(code=code, message=message, fix=fix, fix_tui=tui)
        super().__init__(self.error.line())

    @property
    def code(self) -> protocol.ErrorCode:
        return self.error.code

    @classmethod
    def of(cls, errors: list[BaseException], message: str) -> OpError:
        """Several failures (a pool's members) as one: their common code, else `refused`."""
        codes = {e.code if isinstance(e, OpError) else "internal" for e in errors}
        return cls(message, codes.pop() if len(codes) == 1 else "refused")
