"""The CLI's commands, one module per area, each with `register(subparsers)` (wired by cli.py)."""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class Subparsers(Protocol):
    """What `register()` gets: the object `ArgumentParser.add_subparsers()` returns (argparse
    names its class only privately, so commands type it by the one method they call)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...
