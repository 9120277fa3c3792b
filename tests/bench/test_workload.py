"""Workloads are deterministic per seed and file errors say what to fix."""

from __future__ import annotations

import pytest

from sgltui.bench.workload import WorkloadError, make_workload


def test_random_is_deterministic_and_unique_per_request():
    a = make_workload("random", 50, 10, seed=1)
    b = make_workload("random", 50, 10, seed=1)
    assert [a.item(i) for i in range(5)] == [b.item(i) for i in range(5)]
    assert a.digest == b.digest != make_workload("random", 50, 10, seed=2).digest
    assert (
        len({a.item(i).prompt.split(" ", 1)[0] for i in range(100)}) == 100
    )  # no shared first token
    assert len(a.item(3).prompt.split()) == 50


def test_shared_prefix_groups_share_a_prefix():
    w = make_workload("shared-prefix", 40, 10)
    p0, p8, p1 = w.item(0).prompt.split(), w.item(8).prompt.split(), w.item(1).prompt.split()
    assert p0[:30] == p8[:30] and p0[:30] != p1[:30]


def test_file_workload(tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text(
        '{"prompt": "hello", "output_len": 7}\n\n{"messages": [{"role": "user", "content": "x"}]}\n'
    )
    w = make_workload(str(f), 1, 99)
    assert w.item(0).prompt == "hello" and w.item(0).output_len == 7
    assert w.item(1).output_len == 99 and w.item(2) == w.item(0)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\nnot json\n')
    with pytest.raises(WorkloadError, match=r"bad.jsonl:2: not JSON"):
        make_workload(str(bad), 1, 1)
    with pytest.raises(WorkloadError, match="unknown workload"):
        make_workload("sharegpt", 1, 1)
