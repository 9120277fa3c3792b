"""Readers skip a torn last line and undecodable lines, say so, and read rotated parts in order."""

from __future__ import annotations

import json

import pytest

from sgltui.core.files import write_json_atomic
from sgltui.session.jsonl import (
    iter_text_lines,
    read_json,
    read_jsonl,
    rotated_parts,
)


def _write(path, lines):
    path.write_bytes("".join(lines).encode())


def test_torn_last_line_is_skipped_and_reported(tmp_path):
    p = tmp_path / "events.jsonl"
    _write(p, [json.dumps({"n": 1}) + "\n", json.dumps({"n": 2}) + "\n", '{"n": 3, "half'])
    records, stats = read_jsonl(p)
    assert [r["n"] for r in records] == [1, 2]
    assert stats.torn_tail and stats.skipped == 1
    assert "unfinished last line" in stats.note()


def test_complete_json_without_newline_counts_as_torn(tmp_path):
    # The writer emits line+newline in one write: no newline means it was cut, even if it parses.
    p = tmp_path / "events.jsonl"
    _write(p, [json.dumps({"n": 1}) + "\n", json.dumps({"n": 2})])
    records, stats = read_jsonl(p)
    assert [r["n"] for r in records] == [1] and stats.torn_tail


def test_bad_lines_in_the_middle_are_skipped(tmp_path):
    p = tmp_path / "events.jsonl"
    _write(
        p,
        [
            '{"n": 1}\n',
            '{"n": 2, "to\n',
            "[1, 2]\n",
            "\n",
            b"\xff\xfe".decode("latin-1") + "\n",
            '{"n": 3}\n',
        ],
    )
    records, stats = read_jsonl(p)
    assert [r["n"] for r in records] == [1, 3]
    assert stats.bad_lines == 3 and not stats.torn_tail
    assert stats.note() == "skipped 3 undecodable line(s)"


def test_clean_file_has_no_note(tmp_path):
    p = tmp_path / "t.jsonl"
    _write(p, ['{"a": 1}\n'])
    _, stats = read_jsonl(p)
    assert stats.note() is None and stats.skipped == 0


def test_rotated_parts_are_read_oldest_first(tmp_path):
    p = tmp_path / "timeline.jsonl"
    (tmp_path / "timeline.jsonl.2").write_text('{"n": 1}\n')
    (tmp_path / "timeline.jsonl.1").write_text(
        '{"n": 2}\n{"n": 3}'
    )  # no newline in an old part: still whole
    p.write_text('{"n": 4}\n')
    (tmp_path / "timeline.jsonl.bak").write_text('{"n": 99}\n')  # not a part
    assert [x.name for x in rotated_parts(p)] == [
        "timeline.jsonl.2",
        "timeline.jsonl.1",
        "timeline.jsonl",
    ]
    records, stats = read_jsonl(p)
    assert [r["n"] for r in records] == [1, 2, 3, 4] and stats.parts == 3


def test_missing_file_reads_as_empty(tmp_path):
    records, stats = read_jsonl(tmp_path / "none.jsonl")
    assert records == [] and stats.parts == 0


def test_text_lines_across_parts_with_bad_bytes(tmp_path):
    p = tmp_path / "a.log"
    (tmp_path / "a.log.1").write_bytes(b"first\n\xff second\n")
    p.write_bytes(b"third\n")
    lines = list(iter_text_lines(p))
    assert lines[0] == "first" and lines[-1] == "third" and "second" in lines[1]


def test_write_json_atomic_is_0600_and_atomic(tmp_path):
    p = tmp_path / "r.json"
    write_json_atomic(p, {"x": 1})
    assert (p.stat().st_mode & 0o777) == 0o600
    assert read_json(p) == ({"x": 1}, None)
    assert [x.name for x in tmp_path.iterdir()] == ["r.json"]
    p.write_text("{bad")
    obj, err = read_json(p)
    assert obj is None and "not valid JSON" in err


def test_jsonl_index_sorts_by_time_reads_lazily_and_skips_bad_lines(tmp_path):
    from sgltui.session.jsonl import JsonlIndex, ReadStats

    p = tmp_path / "timeline.jsonl"
    (tmp_path / "timeline.jsonl.1").write_text('{"ts": 1.0, "n": 1}\n{"ts": 3.0, "n": 3}\n')
    p.write_text(
        '{"ts": 2.0, "n": 2}\n{"no_ts": true}\nnot json\n{"ts": 4.0, "n": 4}\n{"ts": 5.0, "n"'
    )
    stats = ReadStats()
    idx = JsonlIndex(p, stats)
    assert list(idx.ts) == [1.0, 2.0, 3.0, 4.0] and len(idx) == 4
    assert [s["n"] for s in idx] == [1, 2, 3, 4]
    assert idx[-1]["n"] == 4 and [s["n"] for s in idx.slice(1, 3)] == [2, 3]
    assert stats.bad_lines == 2 and stats.torn_tail and stats.parts == 2
    with pytest.raises(IndexError):
        idx[4]
    idx.close()


def test_text_line_index_times_lines_and_never_goes_back(tmp_path):
    from sgltui.session.jsonl import TextLineIndex

    p = tmp_path / "a.log"
    p.write_text("no stamp\n@5 five\ncontinued\n@3 from another clock\n@9 nine\n")
    stamp = lambda line: float(line[1:].split()[0]) if line.startswith("@") else None  # noqa: E731
    idx = TextLineIndex(p, stamp, start=4.0)
    assert list(idx.ts) == [4.0, 5.0, 5.0, 5.0, 9.0]
    assert idx.lines(1, 3) == ["@5 five", "continued"] and len(idx) == 5
    idx.close()
