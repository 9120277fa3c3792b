"""The session writer (the agent's recorder): its evidence on disk, in the format of layout.py.

Rules this module keeps, and why:

* Every line is written with a single ``os.write`` on an ``O_APPEND`` descriptor, so a kill -9
  loses at most the line being written and never interleaves; readers (session/jsonl.py) skip a
  torn last line. A partial write (disk full mid-line) is cut back off, so nothing that was
  complete before is ever damaged.
* Secrets never reach disk: every event and sample goes through a :class:`Redactor` that learns
  secret values (``--api-key K`` in a launch command, ``HF_TOKEN`` in env, :meth:`add_secret`)
  and then also blanks them in the server logs, in place and length-preserving, because the
  server writes its log directly (its ``server_args=ServerArgs(... api_key='K')`` line).
* A full or read-only disk never raises into the agent: :attr:`disk` says what is wrong, the
  last events wait in a bounded memory backlog and are written, in order, once the disk takes
  writes again; samples are dropped (and counted) while it does not.
* Size limits with rotation (``SessionLimits``) keep a week-long session bounded.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgltui import protocol
from sgltui.core import config as env_config
from sgltui.core import retry, units
from sgltui.core.files import PRIVATE_DIR as DIR_MODE
from sgltui.core.files import PRIVATE_FILE as FILE_MODE
from sgltui.core.redact import Redactor
from sgltui.session.layout import (
    BENCH_DIR,
    EVENTS_FILE,
    SERVERS_DIR,
    TIMELINE_FILE,
    sessions_root,
)
from sgltui.session.layout import FORMAT_VERSION as SCHEMA_VERSION

# While the disk refuses writes, events wait here (oldest dropped first) and are retried at most
# this often, so a full disk is not hammered once per sample.
log = logging.getLogger(__name__)

BACKLOG_EVENTS = 5000
RETRY_INTERVAL_S = 2.0
SCRUB_INTERVAL_S = 0.5
SCRUB_CHUNK = 4 * 1024 * 1024
ROTATE_CHECK_INTERVAL_S = 10.0
FREE_CHECK_INTERVAL_S = 30.0
LOW_FREE_BYTES = 64 * 1024 * 1024

LIMITS_ENV = env_config.SESSION_LIMITS_ENV


# ---------------------------------------------------------------------------------------------
# Size limits
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RotationLimit:
    """Rotate a file to .1 when it would pass max_bytes; keep at most `keep` older parts."""

    max_bytes: int
    keep: int

    @property
    def total_bytes(self) -> int:
        return self.max_bytes * (self.keep + 1)


_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgG]?)[iI]?[bB]?$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    m = _SIZE.match(text.strip())
    if not m:
        raise ValueError(f"bad size {text!r}; use e.g. 64M, 512K or 1G")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


@dataclass(frozen=True)
class SessionLimits:
    """Per-file rotation limits. Defaults bound a session to about 0.9 GB however long it runs:
    events 32 MiB x 9 parts, timeline 64 MiB x 9 parts (~5 days of 1 Hz samples per 64 MiB on one
    GPU), each server log 64 MiB x 5 parts."""

    events: RotationLimit = field(default_factory=lambda: RotationLimit(32 * 1024**2, 8))
    timeline: RotationLimit = field(default_factory=lambda: RotationLimit(64 * 1024**2, 8))
    server_log: RotationLimit = field(default_factory=lambda: RotationLimit(64 * 1024**2, 4))

    @classmethod
    def parse(cls, spec: str) -> SessionLimits:
        """``events=32M:8,timeline=64M:8,server_log=64M:4`` (any subset; SIZE or SIZE:KEEP)."""
        values = {
            "events": cls().events,
            "timeline": cls().timeline,
            "server_log": cls().server_log,
        }
        for item in filter(None, (s.strip() for s in spec.split(","))):
            name, sep, rhs = item.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in values:
                raise ValueError(
                    f"{LIMITS_ENV}: bad entry {item!r}; use e.g. events=32M:8,timeline=64M:8,server_log=64M:4"
                )
            size_text, _, keep_text = rhs.partition(":")
            try:
                size = parse_size(size_text)
            except ValueError as exc:
                raise ValueError(f"{LIMITS_ENV}: {name}: {exc}") from None
            keep = int(keep_text) if keep_text.strip() else values[name].keep
            if size < 4096 or keep < 0:
                raise ValueError(f"{LIMITS_ENV}: {name} needs a size of at least 4K and keep >= 0")
            values[name] = RotationLimit(size, keep)
        return cls(**values)

    @classmethod
    def from_env(cls) -> SessionLimits:
        spec = env_config.session_limits()
        return cls.parse(spec) if spec else cls()


# ---------------------------------------------------------------------------------------------
# One append-only, rotating file
# ---------------------------------------------------------------------------------------------


def rotate_parts(path: Path, keep: int) -> int:
    """Shift path.(k) -> path.(k+1), path -> path.1, delete beyond `keep`. Returns parts dropped."""
    dropped = 0
    # Parts beyond the cap (the cap may have been lowered since they were made).
    k = keep + 1 if keep > 0 else 1
    while True:
        extra = path.with_name(f"{path.name}.{k}")
        if not extra.exists():
            break
        extra.unlink()
        dropped += 1
        k += 1
    if keep == 0:
        if path.exists():
            path.unlink()
            dropped += 1
        return dropped
    for i in range(keep - 1, 0, -1):
        src = path.with_name(f"{path.name}.{i}")
        if src.exists():
            os.replace(src, path.with_name(f"{path.name}.{i + 1}"))
    if path.exists():
        os.replace(path, path.with_name(f"{path.name}.1"))
    return dropped


class AppendFile:
    """An O_APPEND file written one whole line per os.write, with size-based rotation."""

    def __init__(self, path: Path, limit: RotationLimit) -> None:
        self.path = path
        self.limit = limit
        self._fd: int | None = None
        self._size = 0
        self._needs_newline = False
        self.rotations = 0
        self.dropped_parts = 0

    def _open(self) -> int:
        if self._fd is None:
            fd = os.open(
                self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE
            )
            try:
                os.fchmod(fd, FILE_MODE)
                size = os.fstat(fd).st_size
                # A previous writer killed mid-line left no newline: close that torn line first,
                # so our first line does not glue onto it (readers skip the torn one).
                if size:
                    with open(self.path, "rb") as fh:
                        fh.seek(size - 1)
                        self._needs_newline = fh.read(1) != b"\n"
            except OSError:
                os.close(fd)
                raise
            self._fd, self._size = fd, size
        return self._fd

    def write_line(self, line: bytes) -> None:
        """Append one line (must end with newline). Raises OSError; never leaves a partial line."""
        fd = self._open()
        if self._size and self._size + len(line) > self.limit.max_bytes:
            self._rotate()
            fd = self._open()
        data = (b"\n" + line) if self._needs_newline else line
        start = self._size
        written = 0
        try:
            while written < len(data):
                written += os.write(fd, data[written:])
        except OSError:
            if written:
                # Cut our partial line off again; if even that fails, the next line starts with
                # a newline so that only this line is lost.
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    self._needs_newline = True
                    self._size = start + written
            raise
        self._needs_newline = False
        self._size = start + written

    def _rotate(self) -> None:
        self.close()
        self.dropped_parts += rotate_parts(self.path, self.limit.keep)
        self.rotations += 1

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


# ---------------------------------------------------------------------------------------------
# Server logs: written by the server itself, scrubbed and rotated by the recorder
# ---------------------------------------------------------------------------------------------


class ServerLog:
    """Book-keeping for one servers/<launch-id>.log: how far it has been scrubbed of secrets."""

    def __init__(self, path: Path, limit: RotationLimit) -> None:
        self.path = path
        self.limit = limit
        self.scrubbed = 0  # byte offset up to which (whole lines) secrets were blanked
        self.rotations = 0

    def scrub(self, redactor: Redactor) -> int:
        """Blank secrets in the lines written since the last call, in place, same length.

        Same length matters: the server keeps appending to this file through its own descriptor,
        so bytes may be overwritten but never moved. Returns the number of bytes blanked."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return 0
        blanked = 0
        try:
            st = os.fstat(fd)
            if st.st_mode & 0o777 != FILE_MODE:
                # The writer created it with its umask (0644 typically); the 0700 directory
                # already keeps others out, this makes the file itself private too.
                os.fchmod(fd, FILE_MODE)
            size = st.st_size
            if size < self.scrubbed:  # truncated (rotated) under us
                self.scrubbed = 0
            if size == self.scrubbed:
                return 0
            # At most SCRUB_CHUNK per call: a re-adopting agent rescans whole logs, a little at a
            # time, instead of stalling its event loop on one 64 MiB read.
            chunk = os.pread(fd, min(size - self.scrubbed, SCRUB_CHUNK), self.scrubbed)
            end = chunk.rfind(b"\n") + 1  # only whole lines: a secret may still be half written
            if end == 0:
                if len(chunk) < SCRUB_CHUNK:
                    return 0
                end = len(
                    chunk
                )  # one line longer than a chunk: take it in pieces rather than stall
            # latin-1 maps bytes 1:1 to characters, so string offsets are file offsets.
            text = chunk[:end].decode("latin-1")
            for start, stop in redactor.secret_spans(text):
                os.pwrite(fd, b"*" * (stop - start), self.scrubbed + start)
                blanked += stop - start
            self.scrubbed += end
        finally:
            os.close(fd)
        return blanked

    def rotate_if_needed(self, redactor: Redactor) -> bool:
        """Copy-truncate rotation (the server holds the file open with O_APPEND, so it must keep
        its descriptor): scrub, copy to .1, truncate. Lines written between the copy and the
        truncate are lost; with a 64 MiB limit that is a few lines per rotation at worst."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return False
        if size <= self.limit.max_bytes:
            return False
        self.scrub(redactor)
        if self.limit.keep == 0:
            os.truncate(self.path, 0)
        else:
            for i in range(self.limit.keep - 1, 0, -1):
                src = self.path.with_name(f"{self.path.name}.{i}")
                if src.exists():
                    os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
            dst = self.path.with_name(f"{self.path.name}.1")
            fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
            with open(self.path, "rb") as src_fh, os.fdopen(fd, "wb") as dst_fh:
                shutil.copyfileobj(src_fh, dst_fh, 1024 * 1024)
            os.truncate(self.path, 0)
        self.scrubbed = 0
        self.rotations += 1
        return True


# ---------------------------------------------------------------------------------------------
# The recorder
# ---------------------------------------------------------------------------------------------


def _host_name() -> str:
    name = socket.gethostname().split(".")[0] or "host"
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def safe_name(name: str) -> str:
    """A launch or run id as a single path component (no slashes, no dot-dot)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", str(name)).lstrip(".")
    return cleaned or "unnamed"


def _describe(exc: OSError, target: Path) -> str:
    code = errno.errorcode.get(exc.errno or 0, "")
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free disk space under {target.parent}"
    elif exc.errno == errno.EFBIG:
        fix = f"raise the file-size limit (ulimit -f) or lower {LIMITS_ENV}"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = f"make {target.parent} writable"
    else:
        fix = f"check {target.parent}"
    return f"cannot write {target}: {why}{f' ({code})' if code else ''}; {fix} (sgltui keeps serving and retries)"


class Recorder:
    """Writes the session directory. Safe to call from the agent's loop and from threads."""

    def __init__(
        self, path: Path, limits: SessionLimits | None = None, warnings: list[str] | None = None
    ) -> None:
        self.path = Path(path)
        self.limits = limits or SessionLimits()
        self.redactor = Redactor()
        # Called with a disk.error / disk.ok EVENT when the disk state flips, so the agent can push
        # it to viewers even though it may not (yet) be on disk.
        self.on_disk_change: Callable[[dict[str, Any]], None] | None = None
        self._lock = threading.RLock()
        self._events = AppendFile(self.path / EVENTS_FILE, self.limits.events)
        self._timeline = AppendFile(self.path / TIMELINE_FILE, self.limits.timeline)
        self._server_logs: dict[str, ServerLog] = {}
        self._backlog: deque[bytes] = deque()
        self._dropped_events = 0
        self._dropped_samples = 0
        self._error: str | None = None
        self._error_since: float | None = None
        self._retry_at = 0.0
        # A disk that refuses writes is tried again at a fixed interval (core/retry.py).
        self._retry = retry.Backoff(first=RETRY_INTERVAL_S, cap=RETRY_INTERVAL_S, factor=1.0)
        self._next_scrub = 0.0
        self._next_rotate_check = 0.0
        self._next_free_check = 0.0
        self._free_bytes: int | None = None
        self._dirs_ok = False
        try:
            self._ensure_dirs()
        except OSError as exc:
            self._fail(exc, self.path)
        for message in warnings or ():
            self.event("session.warning", message=message)

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def create(
        cls, state_dir: Path, session_dir: Path | None = None, limits: SessionLimits | None = None
    ) -> Recorder:
        """A new session under <state_dir>/sessions/<YYYYmmdd-HHMMSS>-<host>/ (or `session_dir`)."""
        limits, warnings = cls._limits(limits)
        if session_dir is None:
            base = sessions_root(state_dir)
            try:
                base.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            except OSError:
                pass  # reported by the recorder itself when it cannot make its directory
            stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{_host_name()}"
            session_dir = base / stem
            n = 2
            while session_dir.exists():  # two agents started within one second (tests, restarts)
                session_dir = base / f"{stem}-{n}"
                n += 1
        return cls(Path(session_dir), limits, warnings)

    @classmethod
    def reopen(cls, session_dir: Path, limits: SessionLimits | None = None) -> Recorder:
        """Continue an existing session (the re-adopting agent). Secrets recorded before are
        already redacted on disk; call :meth:`add_secret` again for live servers' keys."""
        limits, warnings = cls._limits(limits)
        rec = cls(Path(session_dir), limits, warnings)
        # Re-register server logs so scrubbing and rotation continue for servers still running.
        for sub in (SERVERS_DIR, BENCH_DIR):
            folder = rec.path / sub
            if folder.is_dir():
                for log in folder.glob("*.log"):
                    # scrubbed starts at 0: lines written while no agent watched are scrubbed too.
                    rec._server_logs[f"{sub}/{log.name}"] = ServerLog(log, rec.limits.server_log)
        return rec

    @staticmethod
    def _limits(limits: SessionLimits | None) -> tuple[SessionLimits, list[str]]:
        if limits is not None:
            return limits, []
        try:
            return SessionLimits.from_env(), []
        except ValueError as exc:
            # A typo in an env var must not stop the agent; fall back and leave a trace.
            return SessionLimits(), [f"{exc}; using the defaults"]

    def _ensure_dirs(self) -> None:
        if self._dirs_ok:
            return
        for d in (self.path, self.path / SERVERS_DIR, self.path / BENCH_DIR):
            d.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            os.chmod(d, DIR_MODE)  # mkdir's mode is masked by the umask
        self._dirs_ok = True

    # -- public API ----------------------------------------------------------------------------
    def add_secret(self, secret: str | None) -> None:
        """Redact this value everywhere from now on (events, timeline, server logs)."""
        self.redactor.add_secret(secret)
        self._next_scrub = 0.0

    def event(self, type: str, **fields: Any) -> dict[str, Any]:
        """Add v/ts, redact, append and flush one EVENT; return it (as written)."""
        ts = fields.pop("ts", None)
        ev: dict[str, Any] = {
            "v": SCHEMA_VERSION,
            "ts": float(ts) if isinstance(ts, (int, float)) else time.time(),
            "type": str(type),
            "client": fields.pop("client", None),
            "slot": fields.pop("slot", None),
        }
        ev.update(fields)
        ev = self.redactor.obj(ev)
        line = _dumps(ev)
        with self._lock:
            self._write_event_line(line)
        return ev

    def sample(self, sample: dict[str, Any]) -> None:
        """Append one SAMPLE to timeline.jsonl (dropped and counted while the disk refuses)."""
        sample = dict(sample)
        sample.setdefault("v", SCHEMA_VERSION)
        sample.setdefault("ts", time.time())
        line = _dumps(self.redactor.obj(sample))
        with self._lock:
            now = time.monotonic()
            if self._error is not None:
                if now < self._retry_at or not self._retry_backlog():
                    self._dropped_samples += 1
                    return
            try:
                self._ensure_dirs()
                self._timeline.write_line(line)
            except OSError as exc:
                self._dropped_samples += 1
                self._fail(exc, self._timeline.path)
            self._maintain_locked(now)

    def maintain(self) -> None:
        """Scrub new server-log lines, rotate what is too big, check free space. Cheap; the
        agent may call it whenever it read new server output (sample() also calls it)."""
        with self._lock:
            self._maintain_locked(time.monotonic(), force_scrub=True)

    def server_log_path(self, launch_id: str) -> Path:
        """servers/<launch-id>.log. Pure apart from making sure servers/ exists: the file is not
        created here (callers test .exists() to pick unused launch ids), but it is watched from
        now on: scrubbed of secrets, set to mode 0600, rotated.

        The agent must open it for appending (``open(path, "ab")`` / ``O_APPEND``): rotation is
        copy-truncate, and only an O_APPEND writer continues at the new end of the file. A tailer
        must restart from offset 0 when the file's size drops below its offset."""
        path = self.path / SERVERS_DIR / f"{safe_name(launch_id)}.log"
        with self._lock:
            try:
                self._ensure_dirs()
            except OSError as exc:
                self._fail(exc, path)
            self._server_logs.setdefault(
                f"{SERVERS_DIR}/{path.name}", ServerLog(path, self.limits.server_log)
            )
            self._next_scrub = 0.0  # the next sample/maintain call fixes its mode promptly
        return path

    def bench_path(self, run_id: str) -> Path:
        """bench/<run-id>.json (the bench runner writes it; core.files.write_json_atomic does it
        atomically with mode 0600). Its output log, bench/<run-id>.log, is scrubbed of secrets
        and rotated like a server log."""
        path = self.path / BENCH_DIR / f"{safe_name(run_id)}.json"
        with self._lock:
            try:
                self._ensure_dirs()
            except OSError as exc:
                self._fail(exc, self.path / BENCH_DIR)
            log = path.with_suffix(".log")
            self._server_logs.setdefault(
                f"{BENCH_DIR}/{log.name}", ServerLog(log, self.limits.server_log)
            )
        return path

    @property
    def disk(self) -> dict[str, Any]:
        """{"ok", "error", "path", "since", "free_bytes", "warning", "dropped_events",
        "dropped_samples", "backlog"}: ok is False while writes fail."""
        with self._lock:
            warning = None
            if self._free_bytes is not None and self._free_bytes < LOW_FREE_BYTES:
                warning = f"only {units.size(self._free_bytes)} free under {self.path}"
            return {
                "ok": self._error is None,
                "error": self._error,
                "path": str(self.path),
                "since": self._error_since,
                "free_bytes": self._free_bytes,
                "warning": warning,
                "dropped_events": self._dropped_events,
                "dropped_samples": self._dropped_samples,
                "backlog": len(self._backlog),
            }

    def close(self) -> None:
        with self._lock:
            if self._error is not None:
                self._retry_backlog()
            for log in self._server_logs.values():
                try:
                    log.scrub(self.redactor)
                except OSError:
                    pass
            self._events.close()
            self._timeline.close()

    # -- internals -----------------------------------------------------------------------------
    def _write_event_line(self, line: bytes) -> None:
        if self._error is not None:
            # Waiting events first, then disk.ok, then this one: the file stays in time order.
            if time.monotonic() < self._retry_at or not self._retry_backlog():
                self._push_backlog(line)
                return
        try:
            self._ensure_dirs()
            self._events.write_line(line)
        except OSError as exc:
            self._push_backlog(line)
            self._fail(exc, self._events.path)

    def _push_backlog(self, line: bytes) -> None:
        if len(self._backlog) >= BACKLOG_EVENTS:
            self._backlog.popleft()
            self._dropped_events += 1
        self._backlog.append(line)

    def _retry_backlog(self) -> bool:
        """Try to write the waiting events, oldest first. True once the disk takes them all."""
        self._retry_at = time.monotonic() + self._retry.failed()
        try:
            self._ensure_dirs()
            while self._backlog:
                self._events.write_line(self._backlog[0])
                self._backlog.popleft()
        except OSError as exc:
            self._error = _describe(exc, self._events.path)
            return False
        self._recover()
        return True

    def _fail(self, exc: OSError, target: Path) -> None:
        first = self._error is None
        self._error = _describe(exc, target)
        self._retry_at = time.monotonic() + self._retry.failed()
        if first:
            self._error_since = time.time()
            ev = self.redactor.obj(
                protocol.event_dict(
                    protocol.DiskError(
                        v=SCHEMA_VERSION, ts=time.time(), error=self._error, path=str(target)
                    )
                )
            )
            self._push_backlog(_dumps(ev))  # lands on disk after the outage, as evidence
            self._notify(ev)

    def _recover(self) -> None:
        if self._error is None:
            return
        self._retry.reset()
        ev = protocol.event_dict(
            protocol.DiskOk(
                v=SCHEMA_VERSION,
                ts=time.time(),
                was=self._error,
                since=self._error_since,
                dropped_events=self._dropped_events,
                dropped_samples=self._dropped_samples,
            )
        )
        self._error = None
        self._error_since = None
        try:
            self._events.write_line(_dumps(ev))
        except OSError as exc:
            self._fail(exc, self._events.path)
            return
        self._notify(ev)

    def _notify(self, ev: dict[str, Any]) -> None:
        cb = self.on_disk_change
        if cb is not None:
            try:
                cb(ev)
            except Exception:  # noqa: BLE001 - a viewer-side bug must not break recording
                log.exception("disk-state callback failed")

    def _maintain_locked(self, now: float, force_scrub: bool = False) -> None:
        if force_scrub or now >= self._next_scrub:
            self._next_scrub = now + SCRUB_INTERVAL_S
            for log in list(self._server_logs.values()):
                try:
                    log.scrub(self.redactor)
                except OSError as exc:
                    self._fail(exc, log.path)
        if now >= self._next_rotate_check:
            self._next_rotate_check = now + ROTATE_CHECK_INTERVAL_S
            for log in list(self._server_logs.values()):
                try:
                    if log.rotate_if_needed(self.redactor):
                        self._write_event_line(
                            _dumps(
                                self.redactor.obj(
                                    protocol.event_dict(
                                        protocol.LogRotated(
                                            v=SCHEMA_VERSION,
                                            ts=time.time(),
                                            file=str(log.path.relative_to(self.path)),
                                            keep=log.limit.keep,
                                        )
                                    )
                                )
                            )
                        )
                except OSError as exc:
                    self._fail(exc, log.path)
        if now >= self._next_free_check:
            self._next_free_check = now + FREE_CHECK_INTERVAL_S
            try:
                st = os.statvfs(self.path)
                self._free_bytes = st.f_bavail * st.f_frsize
            except OSError:
                self._free_bytes = None


def _dumps(obj: Any) -> bytes:
    # default=str: an odd value (a Path, an exception) must never make recording fail.
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str) + "\n").encode(
        "utf-8"
    )
