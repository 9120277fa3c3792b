"""`sgltui job verify INPUT OUTPUT`: every custom_id of the input answered exactly once?

Reads the output and its errors file (OUTPUT.errors.jsonl) as they are (no repair: verifying
changes nothing) and reports custom_ids missing, written more than once, failed (an errors-file
line, an `error`, or a status other than 200), and unknown (not in the input).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sgltui.jobs import batchfile
from sgltui.jobs.output import errors_path, failed, numbered_lines, parsed_line

SHOW = 5  # custom_ids named per problem


@dataclass
class Verdict:
    total: int = 0
    answered: int = 0
    missing: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)  # "file:line" of lines that do not parse
    n_missing: int = 0
    n_duplicates: int = 0
    n_failed: int = 0
    n_unknown: int = 0

    @property
    def ok(self) -> bool:
        return not (self.n_missing or self.n_duplicates or self.n_failed or self.n_unknown)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "total": self.total,
            "answered": self.answered,
            "missing": self.n_missing,
            "duplicates": self.n_duplicates,
            "failed": self.n_failed,
            "unknown": self.n_unknown,
            "torn_lines": self.torn,
            "examples": {
                "missing": self.missing,
                "duplicates": self.duplicates,
                "failed": self.failed,
                "unknown": self.unknown,
            },
        }


def _note(lst: list[str], cid: str) -> None:
    if len(lst) < SHOW:
        lst.append(cid)


def verify(input_path: Path, output: Path) -> Verdict:
    v = Verdict()
    expected: set[str] = set()
    for cid in batchfile.custom_ids(input_path):
        expected.add(cid)
    v.total = len(expected)
    seen: set[str] = set()
    for path, failed_file in ((output, False), (errors_path(output), True)):
        for lineno, raw in numbered_lines(path):
            if not raw.strip():
                continue
            line = parsed_line(raw)
            if line is None:
                v.torn.append(f"{path}:{lineno}")
                continue
            obj, cid = line
            if cid in seen:
                v.n_duplicates += 1
                _note(v.duplicates, cid)
                continue
            seen.add(cid)
            if cid not in expected:
                v.n_unknown += 1
                _note(v.unknown, cid)
                continue
            if failed(obj, failed_file):
                v.n_failed += 1
                _note(v.failed, cid)
            else:
                v.answered += 1
    for cid in expected:
        if cid not in seen:
            v.n_missing += 1
            _note(v.missing, cid)
    return v


def render(v: Verdict, input_path: Path, output: Path) -> str:
    lines = [
        f"{input_path}: {v.total:,} requests; {output}: {v.answered:,} answered, "
        f"{v.n_failed:,} failed, {v.n_missing:,} missing, {v.n_duplicates:,} duplicate, "
        f"{v.n_unknown:,} not in the input"
    ]
    for what, n, ex in (
        ("missing", v.n_missing, v.missing),
        ("duplicate", v.n_duplicates, v.duplicates),
        ("failed", v.n_failed, v.failed),
        ("not in the input", v.n_unknown, v.unknown),
    ):
        if n:
            more = f" (+{n - len(ex):,} more)" if n > len(ex) else ""
            lines.append(f"  {what}: {', '.join(ex)}{more}")
    if v.torn:
        lines.append(f"  lines that are not JSON (torn): {', '.join(v.torn[:SHOW])}")
    lines.append("OK: every custom_id answered exactly once" if v.ok else "NOT OK")
    return "\n".join(lines)
