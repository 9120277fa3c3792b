"""Carry one server's output from its pipe to the agent and, best effort, to its log file.

`python -m sgltui.agent.slot.logrelay LOG_PATH`: stdin is the server's stdout+stderr pipe, stdout a
pipe to the agent. The agent reads phases and the ready line from that pipe, so a full or broken
disk never stalls a launch (issue 18: a swap hung on a ready line that could not be written).

Why a process of its own rather than a pipe straight into the agent: the agent may be restarted
(or killed) while the server runs on. Then writes into a pipe nobody reads would fail or block
the server; this relay keeps reading, keeps the log file growing for the next agent to tail, and
exits by itself when the last writer of the pipe (the server's whole tree) is gone.

Never blocks the server on the agent: what the agent does not take within a bounded backlog is
dropped for the agent only (the file still gets it). A file write that fails (ENOSPC, EIO) is
counted; once the disk takes writes again one marker line says how much output was lost.
"""

from __future__ import annotations

import fcntl
import os
import selectors
import sys
import time

CHUNK = 1 << 16
PIPE_SIZE = 1 << 20  # Linux F_SETPIPE_SZ: room for bursts of output (tracebacks, weight loading)
AGENT_BACKLOG = 4 << 20  # bytes the agent may fall behind before the relay drops for it
REOPEN_EVERY_S = 1.0
FILE_MODE = 0o600


def _grow_pipe(fd: int) -> None:
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    except OSError:
        pass  # not a pipe or over the system limit: the default size still works


class LogFile:
    """Append-only writer that survives a full disk: counts what it could not write."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.lost = 0
        self._next_open = 0.0

    def _open(self) -> bool:
        if self.fd is not None:
            return True
        now = time.monotonic()
        if now < self._next_open:
            return False
        self._next_open = now + REOPEN_EVERY_S
        try:
            self.fd = os.open(
                self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE
            )
        except OSError:
            return False
        return True

    def _write_all(self, data: bytes) -> int:
        """Bytes written before the first error."""
        done = 0
        fd = self.fd
        assert fd is not None, "written only once open"
        while done < len(data):
            try:
                n = os.write(fd, data[done:])
            except InterruptedError:
                continue
            except OSError:
                break
            if n <= 0:
                break
            done += n
        return done

    def write(self, data: bytes) -> None:
        if not self._open():
            self.lost += len(data)
            return
        if self.lost:
            marker = (
                f"[sgltui: {self.lost} bytes of server output lost: the log file refused writes]\n"
            )
            if self._write_all(marker.encode()) < len(marker):
                self.lost += len(data)
                return
            self.lost = 0
        if data:
            self.lost += len(data) - self._write_all(data)


def relay(src: int, dst: int, log: LogFile) -> None:
    """Copy src to the log file and to dst until src ends; never block on dst."""
    os.set_blocking(dst, False)
    _grow_pipe(src)
    _grow_pipe(dst)
    sel = selectors.DefaultSelector()
    sel.register(src, selectors.EVENT_READ)
    watching_dst = False
    pending = bytearray()
    dropped = 0
    agent_gone = False
    reading = True
    while True:
        want_write = bool(pending) and not agent_gone
        if want_write != watching_dst:
            if want_write:
                sel.register(dst, selectors.EVENT_WRITE)
            else:
                sel.unregister(dst)
            watching_dst = want_write
        if not reading and not want_write:
            return
        # Once the server is gone, give a slow agent a little while for the last lines; while
        # output is lost, wake up to say so in the file as soon as the disk takes it.
        if not reading:
            timeout: float | None = 2.0
        else:
            timeout = REOPEN_EVERY_S if log.lost else None
        events = sel.select(timeout=timeout)
        if not events:
            if reading:
                log.write(b"")
                continue
            return
        for key, _ in events:
            if key.fd == src:
                try:
                    data = os.read(src, CHUNK)
                except InterruptedError:
                    continue
                if not data:
                    reading = False
                    sel.unregister(src)
                    continue
                log.write(data)
                if agent_gone:
                    continue
                if len(pending) + len(data) > AGENT_BACKLOG:
                    dropped += len(pending)
                    pending.clear()
                if dropped:
                    note = f"[sgltui: {dropped} bytes of server output skipped: the agent fell behind]\n"
                    pending += note.encode()
                    dropped = 0
                pending += data
            else:
                try:
                    n = os.write(dst, pending)
                except BlockingIOError:
                    continue
                except OSError:  # EPIPE: the agent is gone; the file still gets everything
                    agent_gone = True
                    pending.clear()
                    continue
                del pending[:n]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m sgltui.agent.slot.logrelay LOG_PATH", file=sys.stderr)
        return 2
    import signal

    # The agent stops servers by their process group; this relay is in a session of its own and
    # ends at EOF, after the last line of the server's tree. SIGHUP/SIGINT must not end it early.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    log = LogFile(args[0])
    relay(0, 1, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
