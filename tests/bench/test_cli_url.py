"""`sgltui bench --url` end to end (a real server process, the CLI as a real process), then
`sgltui bench compare` on the stored run, and one-line errors for bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.fixtures.cli import sgltui

pytestmark = pytest.mark.slow  # simulators and CLI processes: seconds each


def test_bench_url_sweep_compare_and_exports(mock_sse, tmp_path, isolated_env):
    url = mock_sse(tick=0.002)
    md, cs = tmp_path / "cmp.md", tmp_path / "cmp.csv"
    r = sgltui(
        "bench",
        "--url",
        url,
        "--concurrency",
        "2,8",
        "--requests",
        "24",
        "--repeat",
        "2",
        "--input-len",
        "16",
        "--output-len",
        "12",
        "--job-completions",
        "902087",
        "--job-output-len",
        "12",
        "--export-md",
        str(md),
        "--export-csv",
        str(cs),
    )
    assert r.returncode == 0, r.stderr
    assert "Time to finish 902,087 completions of ~12 output tokens" in r.stdout
    assert "Use server at concurrency" in r.stdout
    result_path = Path(r.stdout.strip().splitlines()[-1].split("result: ", 1)[1])
    data = json.loads(result_path.read_text())
    assert data["state"] == "done" and len(data["results"]) == 4
    assert {(e["concurrency"], e["repeat"]) for e in data["results"]} == {
        (2, 0),
        (2, 1),
        (8, 0),
        (8, 1),
    }
    for e in data["results"]:
        assert e["metrics"]["completed"] == 24 and e["server_version"] == "mock"
        records = result_path.parent / e["requests_path"]
        assert len(records.read_text().splitlines()) == 24
    rows = list(csv.DictReader(cs.open()))
    assert [r["concurrency"] for r in rows] == ["2", "8"] and all(r["repeats"] == "2" for r in rows)
    assert "| profile | conc |" in md.read_text()
    again = sgltui("bench", "compare", str(result_path))
    assert again.returncode == 0
    # the comparison table is rebuilt from the stored results, identically
    table = lambda out: [l for l in out.splitlines() if l.startswith("server ")]  # noqa: E731
    assert table(again.stdout) == table(r.stdout) and len(table(r.stdout)) == 2


def test_bad_inputs_are_one_line_errors(tmp_path):
    cases = [
        (
            ["bench", "--concurrency", "1,x", "--requests", "5", "--url", "http://127.0.0.1:9"],
            "--concurrency",
        ),
        (
            ["bench", "--url", "http://127.0.0.1:9", "--concurrency", "1"],
            "--requests N or --duration S",
        ),
        (
            [
                "bench",
                "--url",
                "http://127.0.0.1:9",
                "--requests",
                "5",
                "--workload",
                str(tmp_path / "no.jsonl"),
            ],
            "no such file",
        ),
        (
            ["bench", "--url", "http://127.0.0.1:9", "--requests", "5", "--profile", "demo-mtp"],
            "drop --profile",
        ),
        (["bench", "compare", str(tmp_path / "missing.json")], "no such run file"),
        (["bench", "--requests", "0", "--url", "http://127.0.0.1:9"], "at least 1"),
    ]
    for argv, needle in cases:
        r = sgltui(*argv)
        assert r.returncode != 0, argv
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and needle in err[0] and err[0].startswith("sgltui: error:"), (
            argv,
            r.stderr,
        )
