"""What the app's parts (catch-up, panes, the swap flow) ask of it to show a toast: App.notify's
signature, once, for their host Protocols to extend."""

from __future__ import annotations

from typing import Protocol

from textual.notifications import SeverityLevel


class Notifies(Protocol):
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...
