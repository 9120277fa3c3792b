"""A command that sshd runs without a terminal ends when the ssh connection does (and one that
`kubectl exec` runs in a pod, when kubectl's stream does).

`ssh HOST sgltui ...` (`sgltui --host NAME`, and the fleet's `sgltui agent bridge`) gives the far
sgltui pipes, not a terminal. When the client gives up (its timeout, Ctrl-C, a dropped link),
sshd closes those pipes but sends no SIGHUP: that comes only with a pty. A command waiting on a
hung agent neither reads nor writes, so it never notices, and runs on with nobody to answer.

So a thread watches stdout: once nothing can read it any more (a pipe whose reader is gone
polls POLLERR, a socket whose peer closed polls POLLHUP), the process ends as a terminal's
hangup would end it. Only under sshd (SSH_CONNECTION) and only when stdout is a pipe or a
socket: a terminal gets its own SIGHUP, and a file never "goes away". In a pod
(KUBERNETES_SERVICE_HOST, which the kubelet sets in every container) the same holds for
`kubectl exec -i POD -- sgltui ...`: the container runtime's end of the pipes is what goes away.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import threading
import time
from collections.abc import Mapping

GRACE_S = 5.0  # after SIGHUP: a handler that does not end the process gets SIGKILL


def watch(fd: int = 1, env: Mapping[str, str] | None = None) -> bool:
    """Start the watcher when this process is the far end of an ssh command (see above); True
    when it runs."""
    env = os.environ if env is None else env
    if "SSH_CONNECTION" not in env and "KUBERNETES_SERVICE_HOST" not in env:
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return False
    if threading.current_thread() is threading.main_thread():
        # The default action (end the process) even if whoever started us ignored SIGHUP.
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
    threading.Thread(target=_wait, args=(fd,), name="sgltui-hangup", daemon=True).start()
    return True


def _wait(fd: int) -> None:
    poller = select.poll()
    poller.register(fd, 0)  # no events asked: poll reports only ERR, HUP and NVAL
    while True:
        try:
            events = poller.poll()
        except InterruptedError:
            continue
        for _, ev in events:
            if ev & select.POLLNVAL:  # the process closed its own stdout: nothing to watch
                return
            if ev & (select.POLLERR | select.POLLHUP):
                hang_up()
                return


def hang_up() -> None:
    os.kill(os.getpid(), signal.SIGHUP)
    time.sleep(GRACE_S)  # still here: a handler caught it and did not end the process
    os.kill(os.getpid(), signal.SIGKILL)
