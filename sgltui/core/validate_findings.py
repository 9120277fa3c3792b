"""What a profile check finds (Issue: severity, problem, where, fix) and the base every check
builds on (Findings): the profile's flags by canonical name, and error()/warn() that point at the
file and line where a value was written. core/validate.py checks each flag; validate_combos.py
checks flags against each other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgltui.core.flags import Catalog, FlagSpec
from sgltui.core.profiles import Profile, format_location

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Issue:
    severity: str
    problem: str
    key: str | None = None
    path: Path | None = None
    line: int | None = None
    fix: str | None = None

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def __str__(self) -> str:
        problem = self.problem if self.is_error else f"warning: {self.problem}"
        return format_location(self.path, self.line, self.key, problem, self.fix)


class Findings:
    """The issues found in one profile so far, and its flags' values by canonical name."""

    def __init__(self, profile: Profile, catalog: Catalog) -> None:
        self.profile = profile
        self.catalog = catalog
        self.sim = profile.launcher == "sim"
        self.issues: list[Issue] = []
        self.specs: dict[str, tuple[str, FlagSpec]] = {}  # canonical name -> (key as written, spec)

    # -- reporting ---------------------------------------------------------------------------
    def add(
        self,
        severity: str,
        key: str,
        problem: str,
        fix: str | None = None,
        origin: str | None = None,
    ) -> None:
        path, line = self.profile.where(origin or f"server.{key}")
        self.issues.append(Issue(severity, problem, key, path, line, fix))

    def error(
        self, key: str, problem: str, fix: str | None = None, origin: str | None = None
    ) -> None:
        self.add(ERROR, key, problem, fix, origin)

    def warn(
        self, key: str, problem: str, fix: str | None = None, origin: str | None = None
    ) -> None:
        self.add(WARNING, key, problem, fix, origin)

    # -- values of the resolved profile, by canonical flag name ------------------------------
    def get(self, name: str) -> Any:
        """The value set for flag `name` (any spelling); None when absent or false."""
        hit = self.specs.get(name)
        if hit is None:
            return None
        value = self.profile.server.get(hit[0])
        return None if value is False else value

    def key(self, name: str) -> str:
        return self.specs[name][0] if name in self.specs else name
