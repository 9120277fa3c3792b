"""Every document a tracked file names exists in the repo: a comment or doc that sends the reader
to a file nobody can open states nothing. Names of files sgltui *writes* (a report, an export) are
outputs, not citations, and are listed in OUTPUTS."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# `.md` names that are files sgltui or its examples write, not documents to read.
OUTPUTS = {"report.md", "cmp.md"}
# A document's name: letters, digits, `_-./` and `.md`, not part of a longer word or URL path.
DOC_RE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.md)\b")
# A document cited without its extension (the old contracts page; spelt in two parts so this
# file does not cite it).
BARE_NAME = "CONTR" + "ACTS"
BARE_RE = re.compile(rf"\b{BARE_NAME}\b")
# A file beside the repo (the team's shared folder): nobody with only the repo can open it.
OUTSIDE = "../" + "shared/"


def tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def missing_citations(path: Path, text: str, existing: set[str], names: set[str]) -> list[str]:
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for match in DOC_RE.finditer(line):
            cited = match.group(1)
            name = cited.rsplit("/", 1)[-1]
            if name in OUTPUTS:
                continue
            rel_here = (path.parent / cited).resolve()
            if cited in existing or name in names or rel_here.exists():
                continue
            found.append(f"{shown(path)}:{lineno}: {cited}")
        if BARE_RE.search(line):
            found.append(f"{shown(path)}:{lineno}: {BARE_NAME}")
        if OUTSIDE in line:
            found.append(f"{shown(path)}:{lineno}: {OUTSIDE}")
    return found


def test_no_file_cites_a_missing_document():
    files = tracked_files()
    existing = {str(p.relative_to(ROOT)) for p in files}
    names = {p.name for p in files if p.suffix == ".md"}
    bad: list[str] = []
    for path in files:
        if path.suffix in {".svg", ".png", ".json", ".jsonl"} or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        bad += missing_citations(path, text, existing, names)
    assert not bad, "documents cited but not in the repo (state the fact instead):\n" + "\n".join(
        bad
    )


def test_the_check_can_fail(tmp_path):
    src = tmp_path / "x.py"
    text = (
        f"# see the design{'.md'} budgets\n# as {BARE_NAME} says\n# report.md is ours\n"
        f"# built by {OUTSIDE}tools/x.sh\n"
    )
    bad = missing_citations(src.resolve(), text, set(), {"README.md"})
    assert [b.split(": ")[-1] for b in bad] == ["design" + ".md", BARE_NAME, OUTSIDE]
