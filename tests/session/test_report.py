"""`sgltui report` on a recorded session with two swaps, a failure, a crash and a bench run."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from sgltui.bench import compare
from sgltui.core.files import write_json_atomic
from sgltui.session.reader import load_session
from sgltui.session.report import build_report, render
from sgltui.session.writer import Recorder
from tests.fixtures.cli import sgltui

from . import builder


@pytest.fixture
def session_dir(isolated_env):
    return builder.build(isolated_env)


@pytest.fixture
def report(session_dir):
    return build_report(load_session(session_dir))


def test_launches_and_start_times(report):
    launches = report["launches"]
    assert [x["profile"] for x in launches] == [
        "demo-no-mtp",
        "demo-mtp",
        "demo-mtp-hicache",
        "demo-mtp",
    ]
    assert [x["outcome"] for x in launches] == ["ready", "ready", "failed", "crashed"]
    assert launches[0]["start_s"] == pytest.approx(20.0) and launches[1][
        "start_s"
    ] == pytest.approx(18.0)
    assert launches[0]["max_running_requests"] == 48
    # No capacity event for L2: the engine's figure from the timeline stands in.
    assert launches[1]["max_running_requests"] == 48 and launches[2]["max_running_requests"] is None


def test_two_swaps_with_time_split(report):
    ok, rolled = report["swaps"]
    assert (ok["from"], ok["to"], ok["ok"]) == ("demo-no-mtp", "demo-mtp", True)
    assert ok["timings_s"] == builder.SWAP1_TIMINGS
    assert (
        rolled["ok"] is False
        and rolled["rolled_back"] is True
        and rolled["timings_s"]["total"] == 30.0
    )


def test_crashes_with_causes_and_log_lines(report):
    failed, crashed = report["crashes"]
    assert (
        failed["kind"] == "oom"
        and failed["profile"] == "demo-mtp-hicache"
        and "lower" in failed["fix"]
    )
    assert crashed["kind"] == "cuda" and crashed["exit_code"] == 1
    # No lines in the cause: the tail of that launch's server log stands in.
    assert any("illegal memory access" in line for line in crashed["lines"])


def test_time_in_profile_and_throughput(report):
    t = {x["profile"]: x for x in report["time_in_profile"]}
    assert t["demo-no-mtp"]["serving_s"] == pytest.approx(59.0)
    assert t["demo-mtp"]["serving_s"] == pytest.approx(56.0 + 60.0)
    assert t["demo-mtp-hicache"]["serving_s"] == 0.0 and t["demo-mtp-hicache"][
        "starting_s"
    ] == pytest.approx(7.0)
    tp = {x["profile"]: x for x in report["throughput"]}
    assert tp["demo-no-mtp"]["samples"] == 59 and tp["demo-no-mtp"][
        "gen_tok_s_mean"
    ] == pytest.approx(1002.0, abs=0.2)
    assert tp["demo-mtp"]["samples"] == 116 and 400 <= tp["demo-mtp"]["gen_tok_s_mean"] <= 402
    assert tp["demo-mtp"]["running_reqs_max"] == 4 and "demo-mtp-hicache" not in tp


def test_bench_comparison_and_recommendation(report):
    (run,) = report["bench"]
    assert run["run_id"] == "b1" and len(run["rows"]) == 4
    best = max(run["rows"], key=lambda r: r["output_tok_s"])
    assert (best["profile"], best["concurrency"]) == ("demo-no-mtp", 32)
    assert "demo-no-mtp" in run["recommendation"] and "32" in run["recommendation"]


def test_bench_runs_are_ranked_by_the_bench_comparison_only(session_dir):
    """Without a job the recommendation says the bench's own best (comparison.best); a run cut
    short before its comparison is not ranked by a second rule: the report says how to rank it."""
    full = builder._bench_file()
    no_job = dict(full, run_id="b2", comparison=compare.build(full["results"]))
    # The bench ranks on steady-state throughput when every point has it: here it reverses
    # the order of output_throughput, so a report ranking rows itself would name the other one.
    steady = [
        dict(x, metrics=dict(x["metrics"], steady_state_output_throughput=
                             5000.0 if x["profile"] == "demo-mtp" else 100.0))
        for x in full["results"]
    ]  # fmt: skip
    ranked = dict(full, run_id="b3", results=steady, comparison=compare.build(steady))
    cut = {k: v for k, v in full.items() if k != "comparison"} | {"run_id": "b4"}
    for data in (no_job, ranked, cut):
        write_json_atomic(session_dir / "bench" / f"{data['run_id']}.json", data)
    runs = {r["run_id"]: r for r in build_report(load_session(session_dir))["bench"]}
    assert runs["b2"]["recommendation"].startswith(
        "Highest measured throughput: demo-no-mtp at concurrency 32 "
    ), runs["b2"]["recommendation"]
    assert "x demo-mtp (" in runs["b2"]["recommendation"]
    assert runs["b3"]["recommendation"].startswith("Highest measured throughput: demo-mtp ")
    assert len(runs["b4"]["rows"]) == 12  # one row per result, unranked
    assert runs["b4"]["recommendation"].startswith("none: the run stopped before")
    assert "sgltui bench compare " in runs["b4"]["recommendation"]


def test_markdown_has_every_section_and_unicode_charts(report):
    md = render(report, "md")
    for heading in (
        "## Launches",
        "## Swaps",
        "## Crashes and failures",
        "## Time in each profile",
        "## Throughput per profile",
        "## Bench runs",
        "**Recommendation:**",
    ):
        assert heading in md
    assert "░" in md and "█" in md and "▞" in md  # stacked swap bars
    assert any(ch in md for ch in "▁▂▃▄▅▆▇")  # sparklines
    # GPU memory in binary units, labelled so (70e9 bytes is 65.2 GiB, not "70.0 GB").
    assert "| 65.2 GiB |" in md and " GB" not in md
    assert (
        "| demo-no-mtp -> demo-mtp | ok | 2.00 s | 1.00 s | 3.00 s | 14.0 s | 4.00 s | 24.0 s |"
        in md
    )


def test_json_and_csv_agree(report):
    data = json.loads(render(report, "json"))
    assert data["swaps"][0]["timings_s"]["load"] == 14.0
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    load = [r for r in rows if r["section"] == "swap" and r["field"] == "load_s"]
    assert [float(r["value"]) for r in load] == [14.0, 7.0]
    assert any(r["section"] == "bench" and r["field"] == "recommendation" for r in rows)


def test_api_key_appears_in_no_file_and_no_report(session_dir, report):
    for root, _dirs, files in os.walk(session_dir):
        for f in files:
            data = open(os.path.join(root, f), "rb").read()
            assert builder.API_KEY.encode() not in data, f
    for fmt in ("md", "json", "csv"):
        assert builder.API_KEY not in render(report, fmt)
    assert (
        "api_key='" in (session_dir / "servers" / "L1.log").read_text()
    )  # the line survives, the value not


def test_swap_timings_derived_from_steps_when_missing(tmp_path):
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s")
    t = 1_000.0
    for dt, step in (
        (0, "draining"),
        (1.5, "stopping"),
        (2.0, "releasing memory"),
        (4.0, "launching"),
    ):
        rec.event("swap.step", ts=t + dt, slot="0", step=step, **{"from": "a", "to": "b"})
    rec.event("slot.phase", ts=t + 9.0, slot="0", phase="warming up")
    rec.event("slot.state", ts=t + 10.0, slot="0", state="ready")
    rec.event(
        "swap.done", ts=t + 10.0, slot="0", ok=True, rolled_back=False, **{"from": "a", "to": "b"}
    )
    (swap,) = build_report(load_session(tmp_path / "s"))["swaps"]
    assert swap["timings_s"] == {
        "drain": 1.5,
        "stop": 0.5,
        "memory_release": 2.0,
        "load": 5.0,
        "ready": 1.0,
        "total": 10.0,
    }


def test_torn_and_bad_lines_are_noted(session_dir):
    with open(session_dir / "events.jsonl", "ab") as fh:
        fh.write(b'{"v": 1, "ts": 1800000300.0, "type": "slot.st')
    r = build_report(load_session(session_dir))
    assert any("unfinished last line" in n for n in r["notes"])
    assert "## Notes" in render(r, "md")


@pytest.mark.slow
def test_cli_list_report_and_errors(session_dir, tmp_path):
    out = sgltui("sessions", "list")
    assert out.returncode == 0 and session_dir.name in out.stdout and "ended" in out.stdout
    listed = json.loads(sgltui("sessions", "list", "--json").stdout)
    assert listed[0]["name"] == session_dir.name and listed[0]["bench_runs"] == 1

    out = sgltui("report", "--format", "json")  # default: the latest session
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["session"]["name"] == session_dir.name

    target = tmp_path / "r.csv"
    out = sgltui("report", session_dir.name[:8], "-o", str(target), "--save")
    assert out.returncode == 0, out.stderr
    assert target.read_text().startswith("section,item,field,value")
    assert (target.stat().st_mode & 0o777) == 0o600 and (session_dir / "report.csv").exists()

    bad = sgltui("report", "no-such-session")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1 and "sgltui sessions list" in bad.stderr


def test_cli_report_without_sessions_says_what_to_do(isolated_env):
    out = sgltui("report")
    assert out.returncode != 0 and "no sessions" in out.stderr and "Traceback" not in out.stderr


def test_cli_replay_bad_input_is_one_line(session_dir):
    for args, needle in (
        (["replay", "nope"], "sgltui sessions list"),
        (["replay", session_dir.name, "--speed", "0"], "--speed must be > 0"),
    ):
        out = sgltui(*args)
        assert out.returncode != 0 and needle in out.stderr
        assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1
    bare = sgltui("sessions")
    assert bare.returncode == 0 and session_dir.name in bare.stdout
