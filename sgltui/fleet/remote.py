"""`sgltui --host NAME <command>`: the command run by that host's sgltui, over ssh.

The far sgltui runs the command against its own agent, so every command works the same on every
host (its paths are that host's paths). ssh's own failures (host key, authentication, no
sgltui on the remote PATH) come back as one line naming the host and the fix: stderr is held
until ssh exits so that such a failure is that one line, not ssh's chatter followed by ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from sgltui.fleet import transport
from sgltui.fleet.config import Fleet, Host

HELD_LINES = 1000  # beyond this many stderr lines, they are passed on as they come


def run(fleet: Fleet, host: Host, words: list[str], interactive: bool) -> int:
    tty = interactive and sys.stdin.isatty() and sys.stdout.isatty()
    unlisted = transport.not_listed(host)
    if unlisted:
        print(f"sgltui: error: {unlisted}", file=sys.stderr)
        return 255
    argv = transport.argv(fleet, host, *words, tty=tty)
    if tty:
        # A terminal program over there needs ssh in the terminal's foreground process group
        # (a background group reading the tty is stopped by SIGTTIN), so here, and only here,
        # ssh shares ours; Ctrl-C reaches it, and through it the far program.
        try:
            proc = subprocess.Popen(argv)
        except OSError as exc:
            return _no_ssh(fleet, host, exc)
        rc = proc.wait()
        if transport.failed(host, rc, ""):
            line = transport.explain(host, rc, "", retrying=False)
            print(f"sgltui: error: {line}", file=sys.stderr)
        return rc
    try:
        proc = subprocess.Popen(
            argv,
            stdin=None if not sys.stdin.isatty() else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return _no_ssh(fleet, host, exc)
    held: list[str] = []
    streaming = threading.Event()

    def relay() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            if streaming.is_set():
                sys.stderr.write(line)
                sys.stderr.flush()
                continue
            held.append(line)
            if len(held) >= HELD_LINES:
                sys.stderr.write("".join(held))
                held.clear()
                streaming.set()

    t = threading.Thread(target=relay, daemon=True)
    t.start()
    gave_up: list[int] = []  # the signal that ended us, when one did

    def give_up(signum: int, _frame: object) -> None:
        gave_up.append(signum)
        raise KeyboardInterrupt

    # ssh is in its own group: a SIGTERM or SIGHUP (the terminal closed) reaches only us; ssh
    # must end with us, so that sshd closes the far command's pipes and it ends too
    # (core/hangup.py), instead of both running on without anyone to answer.
    restore = _on_signals((signal.SIGTERM, signal.SIGHUP), give_up)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        # The terminal's Ctrl-C reached only us, not ssh's group: pass it on.
        _stop(proc, gave_up[0] if gave_up else signal.SIGINT)
        t.join(2)
        if gave_up:
            return 128 + gave_up[0]
        raise  # cli.main: "sgltui: interrupted", exit 130
    finally:
        restore()
    t.join(2)
    text = "".join(held)
    if transport.failed(host, rc, text):
        line = transport.explain(host, rc, text, retrying=False)  # one shot: nothing retries
        print(f"sgltui: error: {line}", file=sys.stderr)
        return rc
    sys.stderr.write(text)
    return rc


def _stop(proc: subprocess.Popen, sig: int) -> None:
    """`sig` to ssh's group; SIGKILL after 5 s; reaped."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _on_signals(sigs: tuple[int, ...], handler: Callable[[int, Any], None]) -> Callable[[], None]:
    """Install `handler` for `sigs` (main thread only: elsewhere nothing); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    before = {s: signal.signal(s, handler) for s in sigs}

    def restore() -> None:
        for s, h in before.items():
            signal.signal(s, h)

    return restore


def _no_ssh(fleet: Fleet, host: Host, exc: OSError) -> int:
    print(
        f"sgltui: error: {transport.cannot_run(fleet, host)} ({exc.strerror or exc})",
        file=sys.stderr,
    )
    return 255
