"""The OpenAI Batch API (files and batches) over the agent's batch jobs.

SGLang has no batch routes; clients that already speak OpenAI's batch shapes (the `openai`
package, LiteLLM) submit a job here without the CLI:

    POST /v1/files                  upload an input file (multipart: file, purpose=batch)
    GET  /v1/files/{id}             its object
    GET  /v1/files/{id}/content     its bytes (an input, or a batch's output / errors file)
    POST /v1/batches                {input_file_id, endpoint, completion_window, metadata}
    GET  /v1/batches                the batches, newest first
    GET  /v1/batches/{id}           its status and request counts
    POST /v1/batches/{id}/cancel

A batch is one `job_run` of the agent's exactly-once runner (agent/jobs/jobs_host.py), so it resumes
across a kill -9 of the agent as any job does; its status is read from the job's view at each
GET, never kept twice. `metadata` passes job options as strings: `sgltui_choose` ("A,B,C": the
profile chosen by a trial, `sgltui job run --choose`), `sgltui_objective` (time|energy),
`sgltui_concurrency` (N or auto), `sgltui_pool` (a pool instead of the slot).

`BatchApi.routes()` is a list of aiohttp route definitions, mountable on any application: each
slot's front adds them before its pass-through route (agent/pools/slot_fronts.py), bound to its slot; an
agent-wide endpoint can add them bound to no slot. What it needs of the agent is `BatchJobs`:
three of its ops, typed (the supervisor's: agent/agent_calls.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import msgspec
from aiohttp import BodyPartReader, web

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.core.files import write_json_atomic
from sgltui.jobs.output import errors_path


class BatchJobs(Protocol):
    """The agent's batch-job ops the API sends (as client `openai-batch`)."""

    async def job_run(self, args: protocol.JobRunArgs, client: str | None) -> Any: ...
    async def job_status(self, args: protocol.JobArgs, client: str | None) -> Any: ...
    async def job_cancel(self, args: protocol.JobArgs, client: str | None) -> Any: ...


CLIENT = "openai-batch"  # the client name the jobs' events carry
ENDPOINTS = ("/v1/chat/completions", "/v1/completions")  # what the job runner sends
MAX_UPLOAD_BYTES = 512 << 20  # an input file (OpenAI's own cap is 200 MB); more: 413
ID_RE = re.compile(r"^(file|batch)-[A-Za-z0-9_-]{1,64}$")
METADATA_KEYS = ("sgltui_choose", "sgltui_objective", "sgltui_concurrency", "sgltui_pool")
_STATUS = {  # the job's state -> the batch's status (OpenAI's names)
    "checking": "validating",
    "waiting": "in_progress",
    "running": "in_progress",
    "paused": "in_progress",
    "done": "completed",
    "cancelled": "cancelled",
    "failed": "failed",
}
_HTTP = {"not_found": 404, "internal": 500}  # any other refusal: 400, its line


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param = status, param

    def response(self) -> web.Response:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        body = {"error": {"message": str(self), "type": kind, "param": self.param, "code": None}}
        return web.json_response(body, status=self.status)


class BatchRecord(msgspec.Struct, kw_only=True):
    """A batch: what its job does not hold (its ids, endpoint, window and metadata), as
    STATE_DIR/batch-api/batches/ID.json keeps it."""

    id: str
    job: str  # the agent's job (agent/jobs/records.py JobRecord) that runs it
    input_file_id: str
    endpoint: str
    completion_window: str = "24h"
    metadata: dict[str, str] = {}
    created_at: int
    output: str  # the job's output file
    cancelling_at: int | None = None  # when a cancel was asked


class BatchStore:
    """Uploaded files and batch records under ROOT (the agent's state dir / batch-api), 0600.
    A batch record holds what the job does not: its ids, endpoint, window and metadata."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = root / "files"
        self.batches = root / "batches"
        self.outputs = root / "outputs"

    def ensure(self) -> None:
        for d in (self.files, self.batches, self.outputs):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)

    @staticmethod
    def new_id(kind: str) -> str:
        return f"{kind}-{secrets.token_hex(12)}"

    def file_meta(self, file_id: str) -> dict:
        return _read(self.files / f"{_checked(file_id, 'file')}.json", f"no file {file_id!r}")

    def batch(self, batch_id: str) -> BatchRecord:
        path = self.batches / f"{_checked(batch_id, 'batch')}.json"
        raw = _read(path, f"no batch {batch_id!r}")
        try:
            return msgspec.convert(raw, BatchRecord, strict=False)
        except msgspec.ValidationError as exc:
            raise ApiError(500, f"{path}: not a batch's record ({exc})") from None

    def save_batch(self, rec: BatchRecord) -> None:
        write_json_atomic(self.batches / f"{rec.id}.json", msgspec.to_builtins(rec))

    def all_batches(self) -> list[BatchRecord]:
        out = []
        for p in self.batches.glob("batch-*.json"):
            with contextlib.suppress(OSError, ValueError, msgspec.ValidationError):
                raw = json.loads(p.read_text(encoding="utf-8"))
                out.append(msgspec.convert(raw, BatchRecord, strict=False))
        return sorted(out, key=lambda r: r.created_at, reverse=True)


def _checked(ref: str, kind: str) -> str:
    if not ID_RE.match(ref) or not ref.startswith(kind + "-"):
        raise ApiError(404, f"no {kind} {ref!r}")
    return ref


def _read(path: Path, missing: str) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ApiError(404, missing) from None
    except (OSError, ValueError) as exc:
        raise ApiError(500, f"{path}: cannot read it ({exc})") from None


class BatchApi:
    """The routes, bound to the slot (or pool) whose front serves them (None: the agent's own
    choice, its only slot)."""

    def __init__(self, store: BatchStore, jobs: BatchJobs, slot: str | None = None) -> None:
        self.store, self.jobs, self.slot = store, jobs, slot

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/files", self._wrap(self.upload)),
            web.get("/v1/files/{id}", self._wrap(self.file)),
            web.get("/v1/files/{id}/content", self._wrap(self.content)),
            web.post("/v1/batches", self._wrap(self.create)),
            web.get("/v1/batches", self._wrap(self.list)),
            web.get("/v1/batches/{id}", self._wrap(self.retrieve)),
            web.post("/v1/batches/{id}/cancel", self._wrap(self.cancel)),
        ]

    @staticmethod
    def _wrap(fn: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            try:
                return await fn(request)
            except ApiError as exc:
                return exc.response()
            except OpError as exc:
                return ApiError(_HTTP.get(exc.error.code, 400), exc.error.line()).response()

        return handler

    # ---- files -----------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            raise ApiError(400, "upload the file as multipart/form-data: file=@in.jsonl, purpose")
        self.store.ensure()
        file_id = self.store.new_id("file")
        data = self.store.files / f"{file_id}.jsonl"
        purpose, filename, size = None, "upload.jsonl", 0
        reader = await request.multipart()
        try:
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader) or part.name is None:
                    continue
                if part.name == "purpose":
                    purpose = (await part.text()).strip()
                elif part.name == "file":
                    filename = part.filename or filename
                    fd = os.open(data, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    with os.fdopen(fd, "wb") as fh:
                        while chunk := await part.read_chunk():
                            size += len(chunk)
                            if size > MAX_UPLOAD_BYTES:
                                raise ApiError(
                                    413,
                                    f"the file is over {MAX_UPLOAD_BYTES >> 20} MiB; split it "
                                    "into several batches",
                                    "file",
                                )
                            fh.write(chunk)
        except BaseException:
            data.unlink(missing_ok=True)
            raise
        if not data.exists():
            raise ApiError(400, "no `file` part in the upload", "file")
        if purpose != "batch":
            data.unlink(missing_ok=True)
            raise ApiError(400, f"purpose must be 'batch', not {purpose!r}", "purpose")
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": size,
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": "batch",
            "status": "processed",
            "path": str(data),
        }
        write_json_atomic(self.store.files / f"{file_id}.json", meta)
        return web.json_response(_public_file(meta))

    async def file(self, request: web.Request) -> web.Response:
        return web.json_response(_public_file(self._file(request.match_info["id"])))

    async def content(self, request: web.Request) -> web.StreamResponse:
        path = Path(self._file(request.match_info["id"])["path"])
        if not path.exists():  # an errors file the job never needed
            return web.Response(body=b"", content_type="application/jsonl")
        return web.FileResponse(path, headers={"Content-Type": "application/jsonl"})

    def _file(self, file_id: str) -> dict:
        """An uploaded file's record, or a batch's output or errors file (ID-output/-errors)."""
        for suffix, which in (("-output", "output"), ("-errors", "errors")):
            if file_id.startswith("batch-") and file_id.endswith(suffix):
                rec = self.store.batch(file_id.removesuffix(suffix))
                out = Path(rec.output)
                path = out if which == "output" else errors_path(out)
                size = path.stat().st_size if path.exists() else 0
                return {
                    "id": file_id,
                    "object": "file",
                    "bytes": size,
                    "created_at": rec.created_at,
                    "filename": path.name,
                    "purpose": "batch_output",
                    "status": "processed",
                    "path": str(path),
                }
        return self.store.file_meta(file_id)

    # ---- batches ---------------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            raise ApiError(400, "the body must be JSON: {input_file_id, endpoint, ...}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        endpoint = body.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise ApiError(400, f"endpoint must be one of {', '.join(ENDPOINTS)}", "endpoint")
        if body.get("completion_window", "24h") != "24h":
            raise ApiError(400, "completion_window must be '24h'", "completion_window")
        meta = body.get("metadata") or {}
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise ApiError(400, "metadata must map strings to strings", "metadata")
        source = self.store.file_meta(str(body.get("input_file_id") or "file-"))
        self.store.ensure()
        batch_id = self.store.new_id("batch")
        output = self.store.outputs / f"{batch_id}.jsonl"
        args = self._run_args(batch_id, source["path"], str(output), meta)
        view = _job_view(await self.jobs.job_run(args, CLIENT))
        rec = BatchRecord(
            id=batch_id,
            job=view.id,
            input_file_id=source["id"],
            endpoint=endpoint,
            metadata=meta,
            created_at=int(time.time()),
            output=str(output),
        )
        self.store.save_batch(rec)
        return web.json_response(self._object(rec, view))

    def _run_args(self, batch_id: str, inp: str, out: str, meta: dict) -> protocol.JobRunArgs:
        unknown = sorted(k for k in meta if k.startswith("sgltui_") and k not in METADATA_KEYS)
        if unknown:
            raise ApiError(
                400, f"unknown metadata {unknown[0]!r}; known: {', '.join(METADATA_KEYS)}"
            )
        raw: dict[str, Any] = {"input": inp, "output": out, "name": batch_id, "slot": self.slot}
        if meta.get("sgltui_choose"):
            raw["choose"] = meta["sgltui_choose"]
        if meta.get("sgltui_objective"):
            raw["objective"] = meta["sgltui_objective"]
        conc = meta.get("sgltui_concurrency")
        if conc:
            raw["concurrency"] = conc if conc == "auto" else _int(conc, "sgltui_concurrency")
        if meta.get("sgltui_pool"):
            raw["pool"], raw["slot"] = meta["sgltui_pool"], None
        try:
            return msgspec.convert(raw, protocol.JobRunArgs)
        except msgspec.ValidationError as exc:
            raise ApiError(400, f"metadata: {exc}", "metadata") from None

    async def list(self, request: web.Request) -> web.Response:
        data = []
        for rec in self.store.all_batches()[:100]:
            data.append(self._object(rec, await self._job(rec)))
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def retrieve(self, request: web.Request) -> web.Response:
        rec = self.store.batch(request.match_info["id"])
        return web.json_response(self._object(rec, await self._job(rec)))

    async def cancel(self, request: web.Request) -> web.Response:
        rec = self.store.batch(request.match_info["id"])
        job = await self._job(rec)
        if job is not None and job.state not in ("done", "cancelled", "failed"):
            rec.cancelling_at = int(time.time())
            self.store.save_batch(rec)
            job = _job_view(await self.jobs.job_cancel(protocol.JobArgs(job=rec.job), CLIENT))
        return web.json_response(self._object(rec, job))

    async def _job(self, rec: BatchRecord) -> protocol.JobView | None:
        try:
            view = await self.jobs.job_status(protocol.JobArgs(job=rec.job), CLIENT)
        except OpError as exc:
            if exc.error.code == "not_found":
                return None  # the job's record is gone: the batch reads as expired
            raise
        return _job_view(view)

    def _object(self, rec: BatchRecord, job: protocol.JobView | None) -> dict:
        """The OpenAI Batch object, read from the batch's record and its job's view now."""
        state = str(job.state) if job else None
        status = _STATUS.get(state or "", "expired")
        if rec.cancelling_at and state not in ("done", "cancelled", "failed"):
            status = "cancelling"
        finished = job.finished if job else None
        obj: dict[str, Any] = {
            "id": rec.id,
            "object": "batch",
            "endpoint": rec.endpoint,
            "input_file_id": rec.input_file_id,
            "completion_window": rec.completion_window,
            "status": status,
            "created_at": rec.created_at,
            "metadata": rec.metadata,
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "in_progress_at": rec.created_at if status != "validating" else None,
            "expires_at": rec.created_at + 24 * 3600,
            "cancelling_at": rec.cancelling_at,
            "request_counts": {
                "total": (job.total if job else None) or 0,
                "completed": (job.answered if job else None) or 0,
                "failed": (job.failed if job else None) or 0,
            },
        }
        if job is None:
            obj["expired_at"] = int(time.time())
            return obj
        if status in ("completed", "cancelled", "failed"):
            when = int(finished or time.time())
            obj[
                {"completed": "completed_at", "cancelled": "cancelled_at"}.get(status, "failed_at")
            ] = when
            obj["output_file_id"] = f"{rec.id}-output"
            if errors_path(Path(rec.output)).exists():
                obj["error_file_id"] = f"{rec.id}-errors"
        if status == "failed" and job.error:
            obj["errors"] = {
                "object": "list",
                "data": [{"code": "job_failed", "message": job.error, "param": None}],
            }
        return obj


def _job_view(view: object) -> protocol.JobView:
    """A job op's reply (the supervisor's JobView; a client's dict decoded) as the view."""
    return view if isinstance(view, protocol.JobView) else msgspec.convert(view, protocol.JobView)


def _public_file(meta: dict) -> dict:
    return {k: v for k, v in meta.items() if k != "path"}


def _int(raw: str, key: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f"metadata {key} must be a whole number or auto", "metadata") from None
