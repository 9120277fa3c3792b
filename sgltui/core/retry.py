"""One way to wait between attempts: waits that grow after each failure in a row, up to a cap,
and start over after a success. Each caller states its policy where it makes one (the first
wait, the cap, how many failures are tried again at once); none writes the arithmetic again.

    backoff = Backoff(first=1.0, cap=30.0)
    while True:
        try:
            await connect()
            backoff.reset()
        except OSError:
            await asyncio.sleep(backoff.failed())
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Backoff:
    first: float  # the wait after the first failure that waits
    cap: float  # never longer than this
    factor: float = 2.0  # each failure in a row multiplies the wait (1.0: a fixed interval)
    immediate: int = 0  # this many failures in a row are tried again at once (0 s)
    failures: int = 0  # failures in a row so far

    def failed(self) -> float:
        """Count one more failure; the seconds to wait before the next attempt."""
        self.failures += 1
        return self.wait(self.failures)

    def wait(self, failures: int) -> float:
        """The wait after `failures` failures in a row (what `failed` returns for it)."""
        waiting = failures - self.immediate
        if waiting <= 0:
            return 0.0
        return min(self.first * self.factor ** (waiting - 1), self.cap)

    def reset(self) -> None:
        """It worked: the next failure waits `first` again."""
        self.failures = 0
