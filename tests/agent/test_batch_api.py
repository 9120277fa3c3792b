"""The OpenAI Batch API on a slot's front (agent/jobs/batch_api.py), driven by the `openai` package
against a real agent and simulator: upload, create, poll, download, cancel."""

from __future__ import annotations

import json
import time

import pytest

from sgltui import protocol
from tests.jobs.batch_input import write_input

openai = pytest.importorskip("openai")


def _client(agent) -> openai.OpenAI:
    assert agent.front_url
    return openai.OpenAI(base_url=agent.front_url + "/v1", api_key="unused", max_retries=0)


def _poll(client, batch_id: str, until: tuple[str, ...], timeout: float = 60.0, answered=0):
    deadline = time.monotonic() + timeout
    while True:
        b = client.batches.retrieve(batch_id)
        done = b.status in until and b.request_counts.completed >= answered
        if done or time.monotonic() > deadline:
            return b
        time.sleep(0.2)


def test_create_poll_download_every_request_answered_once(agent, tmp_path):
    agent.call("start", profile=agent.write_profile("t-a"), wait=True)
    inp = tmp_path / "in.jsonl"
    ids = write_input(inp, 6, max_tokens=8, bad=(3,))
    client = _client(agent)
    with inp.open("rb") as fh:
        f = client.files.create(file=fh, purpose="batch")
    assert f.bytes == inp.stat().st_size and f.purpose == "batch"
    assert client.files.content(f.id).content == inp.read_bytes()
    batch = client.batches.create(
        input_file_id=f.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"sgltui_concurrency": "2"},
    )
    assert batch.status in ("validating", "in_progress", "completed")
    done = _poll(client, batch.id, ("completed", "failed"))
    assert done.status == "completed", done
    assert done.request_counts.total == 6 and done.request_counts.completed == 5
    assert done.request_counts.failed == 1
    lines = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
    assert sorted(x["custom_id"] for x in lines) == sorted(i for n, i in enumerate(ids) if n != 3)
    assert all(x["response"]["status_code"] == 200 for x in lines)
    errors = client.files.content(done.error_file_id).text.splitlines()
    assert [json.loads(x)["custom_id"] for x in errors] == [ids[3]]
    # the batch is the agent's job: the CLI's jobs list shows it under the batch's id
    assert agent.call("job_status", job=batch.id)["state"] == "done"
    assert [b.id for b in client.batches.list().data] == [batch.id]


def test_cancel_and_bad_requests_are_one_line(agent, tmp_path):
    # real-time tokens with a fast start: the job is still running when it is cancelled
    slow = agent.write_profile("t-slow", time_scale=1.0, sim_slow_start=0.01)
    agent.call("start", profile=slow, wait=True)
    inp = tmp_path / "in.jsonl"
    write_input(inp, 400, max_tokens=64)
    client = _client(agent)
    f = client.files.create(file=inp.open("rb"), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="endpoint must be one of"):
        client.batches.create(
            input_file_id=f.id, endpoint="/v1/embeddings", completion_window="24h"
        )
    with pytest.raises(openai.NotFoundError, match="no file"):
        client.batches.create(
            input_file_id="file-nope", endpoint="/v1/completions", completion_window="24h"
        )
    with pytest.raises(openai.BadRequestError, match="--choose names 'a' twice"):
        client.batches.create(
            input_file_id=f.id,
            endpoint="/v1/completions",
            completion_window="24h",
            metadata={"sgltui_choose": "a,a"},  # --choose, checked as the CLI's
        )
    batch = client.batches.create(
        input_file_id=f.id,
        endpoint="/v1/completions",
        completion_window="24h",
        metadata={"sgltui_concurrency": "4"},
    )
    _poll(client, batch.id, ("in_progress",), answered=1)
    cancelled = client.batches.cancel(batch.id)
    assert cancelled.status in ("cancelling", "cancelled")
    end = _poll(client, batch.id, ("cancelled",), timeout=30)
    assert end.status == "cancelled", end
    assert 0 < end.request_counts.completed < 400
    out = client.files.content(end.output_file_id).text.splitlines()
    assert len(out) == end.request_counts.completed  # what was answered is there, once each
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch-nope")
    # the rest of the API still passes through to the server
    assert client.models.list().data


async def test_metadata_reaches_the_job_options(tmp_path, monkeypatch):
    """--choose, the objective, the concurrency and a pool, through `metadata` (no agent: the
    submitted job_run's arguments are what is checked)."""
    from aiohttp import FormData, web
    from aiohttp.test_utils import TestClient, TestServer

    from sgltui.agent.jobs import batch_api
    from sgltui.agent.jobs.batch_api import BatchApi, BatchStore

    seen = []

    class Jobs:  # the agent's job_run, as the API sends it
        async def job_run(self, args, client):
            seen.append(("job_run", args))
            return protocol.JobView(  # the job_run reply the agent gives, a new job's
                id="job-1",
                state=protocol.JobState("checking"),
                slot="0",
                input=args.input,
                output=args.output,
                errors_output=args.output + ".errors",
                concurrency=1,
                concurrency_mode="fixed",
                created=1.0,
            )

    app = web.Application()
    app.add_routes(BatchApi(BatchStore(tmp_path / "b"), Jobs(), slot="0").routes())
    async with TestClient(TestServer(app)) as c:
        form = FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", b'{"custom_id": "a"}\n', filename="in.jsonl")
        f = await (await c.post("/v1/files", data=form)).json()
        meta = {"sgltui_choose": "mtp,no-mtp", "sgltui_objective": "energy"}
        meta |= {"sgltui_concurrency": "8", "sgltui_pool": "p"}
        body = {"input_file_id": f["id"], "endpoint": "/v1/completions", "metadata": meta}
        r = await c.post("/v1/batches", json=body)
        assert r.status == 200 and (await r.json())["status"] == "validating"
        op, args = seen[0]
        assert op == "job_run" and args.choose == "mtp,no-mtp" and args.objective == "energy"
        assert args.concurrency == 8 and args.pool == "p" and args.slot is None
        assert args.input.endswith(f["id"] + ".jsonl")
        body["metadata"] = {"sgltui_chose": "a,b"}
        r = await c.post("/v1/batches", json=body)
        assert r.status == 400 and "unknown metadata 'sgltui_chose'" in await r.text()
        monkeypatch.setattr(batch_api, "MAX_UPLOAD_BYTES", 1000)
        form = FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", b"x" * 5000, filename="big.jsonl")
        r = await c.post("/v1/files", data=form)
        assert r.status == 413 and "split it" in await r.text()
        assert len(list((tmp_path / "b" / "files").glob("*.jsonl"))) == 1  # none left behind


def test_the_agent_endpoint_answers_the_batch_routes_too(agent_handle, monkeypatch, tmp_path):
    """The agent's one endpoint (agent/endpoint/endpoint.py) serves the same Batch API as each front:
    the routes win over its routing by `model`, and the batch is the agent's job."""
    from tests.ports import server_port

    port = server_port()
    monkeypatch.setenv("SGLTUI_ENDPOINT_PORT", str(port))
    agent = agent_handle
    agent.start()
    agent.call("start", profile=agent.write_profile("t-ep"), wait=True)
    inp = tmp_path / "in.jsonl"
    ids = write_input(inp, 3, max_tokens=4)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    f = client.files.create(file=inp.open("rb"), purpose="batch")
    batch = client.batches.create(
        input_file_id=f.id, endpoint="/v1/completions", completion_window="24h"
    )
    done = _poll(client, batch.id, ("completed", "failed"))
    assert done.status == "completed" and done.request_counts.completed == 3, done
    lines = client.files.content(done.output_file_id).text.splitlines()
    assert sorted(json.loads(x)["custom_id"] for x in lines) == sorted(ids)
    assert agent.call("job_status", job=batch.id)["state"] == "done"
