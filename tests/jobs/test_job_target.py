"""Issue 36 item 5: a job's target, a slot or a pool, is first-class: its record keeps it (and an
older record without it still loads with the right one), its view and job.start carry it, and
the report names it. The end-to-end run through a real pool is test_pool.py's
test_a_job_through_the_pool_targets_the_pool_in_status_record_pane_and_report."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from sgltui import protocol
from sgltui.agent.jobs.records import JobStore, load_record, new_record
from sgltui.agent.jobs.target import target_of
from sgltui.agent.jobs.view import job_view
from sgltui.protocol import JobTarget, JobView
from sgltui.session.reader import load_session
from sgltui.session.report import build_report, render
from sgltui.session.writer import Recorder
from sgltui.tui.widgets.jobs import render_job


def _old_record(**extra) -> dict:
    """A record as an agent before targets wrote it: a pool job filed under its first slot."""
    return {
        "v": 1, "id": "20260101-000000-00", "name": "big", "input": "/in.jsonl",
        "output": "/out.jsonl", "slot": "a", "pool": None, "concurrency": 4,
        "concurrency_mode": "fixed", "created": 1.0, "state": "done", "segments": [], **extra,
    }  # fmt: skip


def test_an_older_record_loads_with_its_pool_or_slot_as_target(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    old = _old_record(pool="all")
    store.path(old["id"]).write_text(json.dumps(old))
    (rec,) = store.load()
    view = job_view(rec, None, None)
    assert view.target == JobTarget(kind="pool", name="all") and str(view.target) == "pool all"
    plain = load_record(_old_record())
    assert plain is not None and target_of(plain) == JobTarget(kind="slot", name="a")


def test_a_new_record_keeps_its_target_and_the_view_and_pane_show_it() -> None:
    args = protocol.JobRunArgs(input="/in.jsonl", pool="all", slot="a")
    rec = new_record("j1", args, Path("/in.jsonl"), Path("/out.jsonl"), "a", 8, "auto", None)
    assert rec.target == JobTarget(kind="pool", name="all")
    view = job_view(msgspec.structs.replace(rec, state="running"), None, None)
    assert view.where() == JobTarget(kind="pool", name="all")
    assert "pool all" in render_job(view)
    # decoded from JSON as the CLI and the TUI get it
    back = msgspec.json.decode(msgspec.json.encode(view), type=JobView)
    assert back.target == view.target
    plain = new_record("j2", protocol.JobRunArgs(input="/in.jsonl", slot="b"), Path("/in"),
                       Path("/out"), "b", 8, "auto", None)  # fmt: skip
    assert plain.target == JobTarget(kind="slot", name="b")
    # an older agent's view (no target): its pool, else its slot
    old = msgspec.structs.replace(view, target=None)
    assert str(old.where()) == "pool all"
    assert str(msgspec.structs.replace(old, pool=None).where()) == "slot a"


def test_the_report_names_the_target_and_reads_older_sessions(tmp_path: Path) -> None:
    """A session with a pool job (job.start carries its target) and a job recorded before
    job.start carried one (its slot stamp says it): `sgltui report` names both."""
    start = msgspec.to_builtins(
        protocol.JobStart(job="j1", slot="a", name="big", target=JobTarget(kind="pool", name="all"))
    )
    assert start["target"] == {"kind": "pool", "name": "all"}
    rec = Recorder.create(tmp_path)
    rec.event("agent.start", ts=1.0, pid=1, version="0.1.0")
    rec.event("job.start", ts=2.0, **{k: v for k, v in start.items() if k not in ("type", "ts")})
    rec.event("job.start", ts=3.0, job="j2", slot="b", name="small")  # an older agent's
    rec.event("agent.stop", ts=4.0)
    rec.close()
    report = build_report(load_session(rec.path))
    assert [(j["job"], j["target"]) for j in report["jobs"]] == [
        ("j1", "pool all"),
        ("j2", "slot b"),
    ]
    md = render(report, "md")
    assert "(j1, pool all): running" in md and "(j2, slot b): running" in md, md
