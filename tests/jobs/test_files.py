"""Batch files: the input check, the output's torn-line repair, resume and verify."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from sgltui.jobs import batchfile
from sgltui.jobs.output import OutputWriter, errors_path, repair, scan
from sgltui.jobs.verify import verify
from tests.jobs.batch_input import read_output, write_input


@pytest.mark.parametrize(
    "line, expect",
    [
        ("{not json", "not valid JSON"),
        ('{"method": "POST", "url": "/v1/completions", "body": {}}', "custom_id missing"),
        ('{"custom_id": "x", "url": "/v1/embeddings", "body": {}}', "url '/v1/embeddings'"),
        ('{"custom_id": "x", "url": "/v1/completions"}', "body missing"),
        ('{"custom_id": "x", "method": "GET", "url": "/v1/completions", "body": {}}', "POST"),
        ('{"custom_id": "req-000001", "url": "/v1/completions", "body": {}}', "duplicate"),
        # Issue 29 F10: both were reported as missing.
        (
            '{"custom_id": 123, "url": "/v1/completions", "body": {}}',
            "custom_id must be a string, not a number (123)",
        ),
        ('{"custom_id": "", "url": "/v1/completions", "body": {}}', "custom_id is empty"),
        (
            '{"custom_id": "x", "url": "/v1/completions", "body": "notadict"}',
            "body must be an object (the request's JSON), not a string",
        ),
        ('{"custom_id": "x", "url": "/v1/completions", "body": null}', "body must be an object"),
    ],
)
def test_check_names_the_bad_line(tmp_path, line, expect):
    p = tmp_path / "in.jsonl"
    write_input(p, 5)
    lines = p.read_text().splitlines()
    lines.insert(3, line)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(batchfile.InputError) as err:
        batchfile.check(p)
    assert f"{p}:4:" in str(err.value) and expect in str(err.value)
    assert "\n" not in str(err.value)


def test_items_skip_done_and_never_stream(tmp_path):
    p = tmp_path / "in.jsonl"
    write_input(p, 6)
    lines = [json.loads(x) for x in p.read_text().splitlines()]
    lines[0]["body"]["stream"] = True
    p.write_text("".join(json.dumps(x) + "\n" for x in lines) + "\n\n")  # trailing blank lines
    assert batchfile.check(p).total == 6
    got = list(batchfile.items(p, skip={"req-000002"}))
    assert [i.custom_id for i in got] == [
        "req-000000",
        "req-000001",
        "req-000003",
        "req-000004",
        "req-000005",
    ]
    assert b"stream" not in got[0].body


def test_repair_cuts_only_a_torn_last_line(tmp_path):
    p = tmp_path / "out.jsonl"
    p.write_bytes(b'{"custom_id": "a"}\n{"custom_id": "b"}\n{"custom_id": "c", "resp')
    assert repair(p) == len(b'{"custom_id": "c", "resp')
    assert p.read_bytes() == b'{"custom_id": "a"}\n{"custom_id": "b"}\n'
    assert repair(p) == 0
    p.write_bytes(b'{"custom_id": "torn-only')
    assert repair(p) == len(b'{"custom_id": "torn-only') and p.read_bytes() == b""


def test_writer_batches_whole_lines_mode_0600(tmp_path):
    out = tmp_path / "out.jsonl"
    w = OutputWriter(out)
    w.add(b'{"custom_id":"a","response":{"status_code":200,"body":{}},"error":null}\n')
    w.add(b'{"custom_id":"b","response":null,"error":{"code":"x"}}\n', failed=True)
    assert not out.exists()  # nothing reaches the disk before a flush
    w.close()
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert oct(errors_path(out).stat().st_mode & 0o777) == "0o600"
    s = scan(out)
    assert s.done == {"a", "b"} and s.ok == 1 and s.failed == 1


def test_verify_finds_missing_duplicate_failed_unknown(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 5)

    def ok(cid):
        return json.dumps(
            {"custom_id": cid, "response": {"status_code": 200, "body": {}}, "error": None}
        )

    out.write_text(
        "\n".join([ok("req-000000"), ok("req-000001"), ok("req-000001"), ok("zzz")]) + "\n"
    )
    errors_path(out).write_text(
        json.dumps({"custom_id": "req-000002", "response": None, "error": {"code": "x"}}) + "\n"
    )
    v = verify(inp, out)
    assert not v.ok
    assert (v.answered, v.n_missing, v.n_duplicates, v.n_failed, v.n_unknown) == (2, 2, 1, 1, 1)
    assert v.duplicates == ["req-000001"] and v.unknown == ["zzz"]
    assert sorted(v.missing) == ["req-000003", "req-000004"]


def test_runner_resumes_after_a_torn_line_each_answered_once(tmp_path, sim_server):
    """An output cut in the middle of a line by a crash: the torn request is sent again and
    written once; the whole lines before it are not sent again."""
    sim = sim_server("--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-time-scale", "0")
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_input(inp, 200)
    done_before = ids[:50]
    with open(out, "w") as fh:
        for cid in done_before:
            fh.write(
                json.dumps(
                    {
                        "id": "x",
                        "custom_id": cid,
                        "response": {
                            "status_code": 200,
                            "request_id": "r",
                            "body": {"usage": {"completion_tokens": 1}},
                        },
                        "error": None,
                    }
                )
                + "\n"
            )
        fh.write('{"id": "x", "custom_id": "' + ids[50] + '", "respo')  # torn by the crash
    spec = json.dumps({"input": str(inp), "output": str(out), "concurrency": 8})
    proc = subprocess.Popen(
        [sys.executable, "-m", "sgltui.jobs.worker", "--spec-json", spec],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdin.write(json.dumps({"op": "target", "url": sim.url}) + "\n")
    proc.stdin.flush()  # stdin stays open: its end would mean "the agent is gone"
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if '"t":"done"' in line:
            break
    proc.stdin.close()
    proc.wait(timeout=30)
    msgs = [json.loads(x) for x in lines]
    checked = next(m for m in msgs if m["t"] == "checked")
    assert checked["resumed"] == 50 and checked["repaired_bytes"] > 0
    done = msgs[-1]
    assert done["t"] == "done" and done["state"] == "done" and done["done"] == 150, (
        proc.stderr.read()
    )
    counts = Counter(line["custom_id"] for line in read_output(out))
    assert set(counts) == set(ids) and set(counts.values()) == {1}
    assert verify(inp, out).ok


def test_scan_fast_path_agrees_with_a_full_parse(tmp_path):
    """The resume scan reads the runner's own success lines without parsing their bodies; it
    must find what parsing every line finds (custom_ids, token counts), escapes included."""
    from sgltui.jobs.runner import Runner

    out = tmp_path / "out.jsonl"
    r = Runner(tmp_path / "in.jsonl", out, 1, lambda m: None)
    r._writer = OutputWriter(out)  # noqa: SLF001 - the writer without a server
    weird = ["plain", 'with "quotes", and ,"response": inside', "uni\u00e9 \\ back", "x" * 300]
    for n, cid in enumerate(weird):
        item = type("I", (), {"custom_id": cid})()
        body = {
            "id": f"c{n}",
            "choices": [{"text": '"completion_tokens": 999'}],
            "usage": {"prompt_tokens": 3, "completion_tokens": n + 1},
        }
        r._write_ok(item, json.dumps(body).encode(), body)  # noqa: SLF001
    r._writer.close()  # noqa: SLF001
    s = scan(out)
    lines = read_output(out)
    assert s.done == {x["custom_id"] for x in lines} == set(weird)
    assert s.out_tokens == sum(x["response"]["body"]["usage"]["completion_tokens"] for x in lines)
