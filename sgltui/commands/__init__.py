"""The CLI's commands, one module per area, each with `register(subparsers)` (wired by cli.py),
and what they share: CliError, the Subparsers they register on. (Here, not in cli.py: cli.py
imports the commands, so a command that imported cli.py would close an import cycle.)"""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class CliError(Exception):
    """An expected failure: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class Subparsers(Protocol):
    """What `register()` gets: the object `ArgumentParser.add_subparsers()` returns (argparse
    names its class only privately, so commands type it by the one method they call)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...
