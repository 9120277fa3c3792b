"""A batch job's record (agent/jobs/records.py JobRecord) on disk: the files an agent wrote
before the record was a Struct load (two saved from real runs: a --choose job that finished in
its trial, a pinned job cancelled after a swap), an older file without a target or a mode loads
with their defaults, a file that is not a record is left alone, and what a new agent writes
holds every key and value the earlier one wrote, and loads back the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sgltui import protocol
from sgltui.agent.jobs.records import JobRecord, JobStore, SegmentRecord
from sgltui.agent.jobs.view import job_view

RECORDS = Path(__file__).parent / "records"
FILES = sorted(RECORDS.glob("*.json"))


def _store(tmp_path: Path, *files: Path) -> JobStore:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for f in files:  # under its id, as the agent names it
        shutil.copy(f, jobs / f"{json.loads(f.read_text())['id']}.json")
    return JobStore(jobs)


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_a_record_written_by_the_earlier_agent_loads_field_by_field(tmp_path, path):
    raw = json.loads(path.read_text())
    [rec] = _store(tmp_path, path).load()
    assert isinstance(rec, JobRecord)
    for key in ("id", "name", "input", "output", "slot", "pool", "concurrency", "state"):
        assert getattr(rec, key) == raw[key], key
    assert rec.concurrency_mode == raw["concurrency_mode"] and rec.pinned == raw["pinned"]
    assert rec.target == protocol.JobTarget(**raw["target"])
    assert (rec.total, rec.stamp, rec.joules) == (raw["total"], raw["stamp"], raw["joules"])
    assert rec.run_done == raw["run_done"] and rec.run_out_tokens == raw["run_out_tokens"]
    assert rec.choose == raw.get("choose")
    assert [list(p) for p in rec.rate_history] == raw.get("rate_history", [])
    assert len(rec.segments) == len(raw["segments"])
    for seg, want in zip(rec.segments, raw["segments"], strict=True):
        assert isinstance(seg, SegmentRecord)
        for key, value in want.items():
            assert getattr(seg, key) == value, key
    # the view every client reads is made from it as from the dict it was
    view = job_view(rec, None, None, full=True)
    assert view.answered == raw["base_ok"] + raw["run_done"]
    assert view.state == raw["state"] and view.total == raw["total"]
    assert sum(s.completions for s in view.segments) == view.answered
    assert (view.decision is not None) == bool(raw.get("choose"))


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_a_new_agent_writes_every_key_the_earlier_one_wrote_and_reads_it_back(tmp_path, path):
    raw = json.loads(path.read_text())
    store = _store(tmp_path, path)
    [rec] = store.load()
    store.save(rec, force=True)
    written = json.loads(store.path(rec.id).read_text())
    for key, value in raw.items():
        if key == "segments":
            for seg, want in zip(written[key], value, strict=True):
                assert {k: seg[k] for k in want} == want
        else:
            assert written[key] == value, key
    [again] = JobStore(store.dir).load()
    assert again == rec


def test_an_older_record_gets_its_target_and_a_file_that_is_no_record_is_left_alone(tmp_path):
    raw = json.loads((RECORDS / "pinned_two_segments.json").read_text())
    for key in ("target", "concurrency_mode", "user_paused", "joules"):
        del raw[key]
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "a-old.json").write_text(json.dumps(raw))
    pool_job = {**raw, "id": "b-pool", "pool": "p", "target": {"kind": "?", "name": ""}}
    (jobs / "b-pool.json").write_text(json.dumps(pool_job))
    (jobs / "c-list.json").write_text("[1, 2]")
    (jobs / "d-noid.json").write_text(json.dumps({"state": "done"}))
    (jobs / "e-bad.json").write_text(json.dumps({**raw, "id": "e", "concurrency": "many"}))
    (jobs / "f-cut.json").write_text('{"id": "f", "sta')
    old, pool = JobStore(jobs).load()
    assert old.target == protocol.JobTarget(kind="slot", name=raw["slot"])
    assert old.concurrency_mode == "fixed" and not old.user_paused and old.joules is None
    assert pool.target == protocol.JobTarget(kind="pool", name="p")
