"""agent/profile_rows.py: a profile is validated once per change of its files, not per listing."""

from __future__ import annotations

import os

from sgltui.agent.profile_rows import ProfileRows
from sgltui.core.profiles import scan_profiles


def _write(path, mfs):
    path.write_text(
        'name = "p"\nlauncher = "sim"\n[server]\nmodel-path = "Qwen/Qwen3-32B"\n'
        f"mem-fraction-static = {mfs}\n"
    )


def _rows(rows: ProfileRows, folder):
    found = scan_profiles([folder])
    profiles = {n: found.resolve(n) for n in found.names()}
    return rows.rows(profiles, {}, {})


def test_validated_once_until_the_file_changes(tmp_path):
    path = tmp_path / "p.toml"
    _write(path, 0.8)
    rows = ProfileRows()
    first = _rows(rows, tmp_path)
    assert [r["valid"] for r in first if r["name"] == "p"] == [True]
    for _ in range(5):
        _rows(rows, tmp_path)
    assert rows.validations == len(first)
    _write(path, '"lots"')
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    again = [r for r in _rows(rows, tmp_path) if r["name"] == "p"]
    assert again[0]["valid"] is False and "mem-fraction-static" in again[0]["problem"]
    assert rows.validations == len(first) + 1
