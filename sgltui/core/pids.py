"""Whether a pid is a process that still runs (stdlib only: the keeper imports it and stays light)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while `pid` runs. A zombie (exited, not yet reaped) still answers kill(0) but does
    nothing any more: not alive. A pid that cannot be a process (0, negative, too large) is not."""
    if pid <= 0:  # kill(0) and kill(-n) would ask about a whole process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except (OverflowError, ValueError):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:  # no /proc, or it ended just now: kill(0) said it was there
        return True
