"""pid_alive (the keeper, the simulated GPUs and `agent stop` ask it): a running process is
alive; an exited one that is not yet reaped (a zombie) is not; a pid that cannot be a process
is not, and never asks about a process group."""

from __future__ import annotations

import os
import subprocess
import sys

from sgltui.core.pids import pid_alive


def test_a_running_process_is_alive() -> None:
    assert pid_alive(os.getpid())


def test_a_zombie_is_not_alive() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    try:
        # wait for its exit but leave it unreaped (WNOWAIT): a zombie, as a crashed child is
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        assert not pid_alive(proc.pid)
    finally:
        proc.wait()


def test_a_pid_that_cannot_be_a_process_is_not_alive() -> None:
    for pid in (0, -1, -os.getpgid(0), 2**63):
        assert not pid_alive(pid)
