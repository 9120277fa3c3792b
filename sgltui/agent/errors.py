"""The one error an op raises to refuse a command (the socket server sends its one line)."""

from __future__ import annotations


class OpError(Exception):
    """A refused or failed command: one line for the client."""
