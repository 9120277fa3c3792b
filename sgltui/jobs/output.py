"""OpenAI Batch output files: the only record of what is done.

Exactly once rests on three rules:
- a line is written only by the one process that holds the output's lock (`OutputLock`), so two
  runners (an orphan and its successor) never append to the same file;
- a line is written whole, in one `write` of a batch of whole lines, and a torn last line (a
  crash in the middle of that write) is cut off before anything else is appended;
- on resume the custom_ids in the output and errors files are skipped: a request whose response
  arrived but whose line was not yet flushed at a crash is sent again, and its line written once.

Lines are appended as each completes and flushed in batches (at most FLUSH_LINES lines or
FLUSH_S seconds are lost to a kill -9), fsynced at most once a second; files are mode 0600.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

FLUSH_LINES = 256
FLUSH_S = 0.25
FSYNC_S = 1.0


class OutputError(Exception):
    """The output file cannot be used: one line that says what to do."""


def errors_path(output: Path) -> Path:
    """OUTPUT.jsonl -> OUTPUT.errors.jsonl (requests that still failed after retries)."""
    name = output.name
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    return output.with_name(stem + ".errors.jsonl")


def default_output(input_path: Path) -> Path:
    name = input_path.name
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    return input_path.with_name(stem + ".output.jsonl")


class OutputLock:
    """An exclusive flock on OUTPUT.lock, held for the writer's whole life."""

    def __init__(self, output: Path) -> None:
        self.path = output.with_name(output.name + ".lock")
        self.fd: int | None = None

    def acquire(self, timeout: float = 30.0) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise OutputError(
                f"cannot create {self.path} ({exc.strerror or exc}); choose another -o"
            ) from None
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise OutputError(
                        f"{self.path} is held by another runner still writing this output; "
                        "stop it (`sgltui job cancel`) or wait for it to exit"
                    ) from None
                time.sleep(0.05)
        self.fd = fd

    def release(self, remove: bool = False) -> None:
        """Drop the lock; `remove` also deletes the lock file (the job is over: no runner will
        want it again, and a finished output should not leave a stray file beside it)."""
        if self.fd is not None:
            if remove:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
            os.close(self.fd)  # closing drops the lock
            self.fd = None


@dataclass
class Scan:
    done: set[str] = field(default_factory=set)  # custom_ids with a line (output or errors)
    ok: int = 0
    failed: int = 0
    out_tokens: int = 0
    repaired_bytes: int = 0  # cut off a torn last line
    duplicates: int = 0


def repair(path: Path) -> int:
    """Cut a torn last line (no trailing newline) off `path`; the number of bytes removed."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        pos, tail = size, b""
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            chunk = os.pread(fd, step, pos)
            if not tail and chunk.endswith(b"\n"):
                return 0
            tail = chunk + tail
            nl = tail.rfind(b"\n")
            if nl >= 0:
                keep = pos + nl + 1
                os.ftruncate(fd, keep)
                os.fsync(fd)
                return size - keep
        os.ftruncate(fd, 0)
        return size
    finally:
        os.close(fd)


_CID = b'","custom_id":'
_RESP_OK = b',"response":{"status_code":200,'
_TOKENS = b'"completion_tokens":'
_END_OK = b'"error":null}\n'


def _fast_line(raw: bytes) -> tuple[str, int] | None:
    """(custom_id, completion tokens) of a success line as OutputWriter's caller writes them,
    read without parsing the response body (resume time is dominated by the bodies); None for
    any other line, which is then parsed whole."""
    i = raw.find(_CID, 0, 256)
    if i < 0 or not raw.endswith(_END_OK):
        return None
    j = raw.find(b',"response":', i)
    if j < 0 or not raw.startswith(_RESP_OK, j):
        return None
    try:
        cid = orjson.loads(raw[i + len(_CID) : j])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(cid, str):
        return None
    k = raw.rfind(_TOKENS)
    tokens = 0
    if k >= 0:
        digits = raw[k + len(_TOKENS) : k + len(_TOKENS) + 24].lstrip()
        n = 0
        while n < len(digits) and 48 <= digits[n] <= 57:
            n += 1
        tokens = int(digits[:n]) if n else 0
    return cid, tokens


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of `path`; nothing when it does not exist (no output yet)."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return
    with fh:
        yield from enumerate(fh, 1)


def parsed_line(raw: bytes) -> tuple[dict, str] | None:
    """(object, custom_id) of one output line; None when it is not one (torn or foreign): the
    resume scan refuses such a line, `job verify` counts it."""
    try:
        obj = orjson.loads(raw)
        return obj, obj["custom_id"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


def failed(obj: dict, in_errors_file: bool) -> bool:
    """An output line counts as failed in the errors file, with an error, or without HTTP 200."""
    resp = obj.get("response") or {}
    return in_errors_file or bool(obj.get("error")) or resp.get("status_code") != 200


def _scan_file(path: Path, scan: Scan, failed_file: bool) -> None:
    for lineno, raw in numbered_lines(path):
        if not failed_file:
            fast = _fast_line(raw)
            if fast is not None:
                cid, tokens = fast
                if cid in scan.done:
                    scan.duplicates += 1
                else:
                    scan.done.add(cid)
                    scan.ok += 1
                    scan.out_tokens += tokens
                continue
        if not raw.strip():
            continue
        line = parsed_line(raw)
        if line is None:
            raise OutputError(
                f"{path}:{lineno}: not a batch output line; move the file aside or fix the line"
            )
        obj, cid = line
        if cid in scan.done:
            scan.duplicates += 1
            continue
        scan.done.add(cid)
        if failed(obj, failed_file):
            scan.failed += 1
        else:
            scan.ok += 1
            usage = ((obj.get("response") or {}).get("body") or {}).get("usage") or {}
            scan.out_tokens += int(usage.get("completion_tokens") or 0)


def scan(output: Path) -> Scan:
    """Repair both files' last lines, then read which custom_ids are done."""
    result = Scan()
    for path, failed in ((output, False), (errors_path(output), True)):
        result.repaired_bytes += repair(path)
        _scan_file(path, result, failed)
    return result


def _open_append(path: Path) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # an existing file too: responses may hold what the prompts held
    return fd


class OutputWriter:
    """Appends whole lines to the output (or errors) file in batches.

    A write the disk refuses (full, read-only, I/O error) raises OSError from `flush` and loses
    nothing: the unwritten bytes, a part of a line included, stay here and the next `flush`
    goes on from where the file stopped, so the file still gets each line once and whole.
    """

    def __init__(self, output: Path) -> None:
        self.output = output
        self.errors = errors_path(output)
        self._fds: dict[bool, int] = {}
        self._buf: dict[bool, list[bytes]] = {False: [], True: []}
        self._out: dict[bool, bytearray] = {False: bytearray(), True: bytearray()}
        self._out_lines: dict[bool, int] = {False: 0, True: 0}
        self._pending = 0
        self._last_flush = time.monotonic()
        self._last_sync = self._last_flush
        self.flush_s = FLUSH_S  # a --choose trial reads faster on a faster-than-real simulator
        self.written = 0
        self.on_flush: Callable[[], None] | None = None  # after lines reached the file

    def add(self, line: bytes, failed: bool = False) -> None:
        self._buf[failed].append(line)
        self._pending += 1

    def full(self) -> bool:
        """Enough lines wait that the caller should flush now."""
        return self._pending >= FLUSH_LINES

    def due(self) -> bool:
        return self._pending > 0 and time.monotonic() - self._last_flush >= self.flush_s

    def flush(self) -> None:
        now = time.monotonic()
        self._last_flush = now  # a refused write is tried again FLUSH_S later, not at once
        for failed, lines in self._buf.items():
            out = self._out[failed]
            if lines:
                out += b"".join(lines)
                self._out_lines[failed] += len(lines)
                lines.clear()
            if not out:
                continue
            fd = self._fds.get(failed)
            if fd is None:
                fd = self._fds[failed] = _open_append(self.errors if failed else self.output)
            while out:  # a short write (disk nearly full) goes on where it stopped
                n = os.write(fd, out)
                del out[:n]
            self.written += self._out_lines[failed]
            self._out_lines[failed] = 0
        self._pending = 0
        if now - self._last_sync >= FSYNC_S:
            self.sync()
        if self.on_flush is not None:
            self.on_flush()

    def sync(self) -> None:
        self._last_sync = time.monotonic()
        for fd in self._fds.values():
            os.fsync(fd)

    def close(self) -> None:
        """Write what is held and close. Lines the disk still refuses are dropped: they were
        never in the file, so the next run sends those requests again."""
        try:
            self.flush()
            self.sync()
        finally:
            for fd in self._fds.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds.clear()


def disk_problem(exc: OSError, path: Path) -> str:
    """A refused write in one line, starting with what it is ("disk full: ...")."""
    import errno

    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"disk full: cannot write {path} ({why}); "
            "free space there and the job goes on by itself"
        )
    return f"cannot write {path} ({why}); the job tries again every second"


def ensure_writable(output: Path) -> None:
    """Refuse early an output the runner could not write (missing folder, not a file)."""
    if not output.parent.is_dir():
        raise OutputError(f"{output.parent} does not exist; create it or choose another -o")
    if output.exists() and not output.is_file():
        raise OutputError(f"{output} is not a regular file; choose another -o")
    if not os.access(output.parent, os.W_OK):
        raise OutputError(f"cannot write in {output.parent} (read-only); choose another -o")
    if output.exists() and not os.access(output, os.W_OK):
        raise OutputError(f"cannot write {output} (read-only); choose another -o")
