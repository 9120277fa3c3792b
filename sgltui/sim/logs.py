"""Log output in SGLang's format: `[YYYY-mm-dd HH:MM:SS<rank prefix>] message`.

Every line is written with one write() and flushed, because the main process and the schedulers
share one stdout and the agent tails it line by line.
"""

from __future__ import annotations

import logging
import os
import sys
import time

_FMT_DATE = "%Y-%m-%d %H:%M:%S"


class _Formatter(logging.Formatter):
    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix
        self.ms = os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true")

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime(_FMT_DATE, time.localtime(record.created))
        if self.ms:
            stamp += f".{int(record.msecs):03d}"
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        return f"[{stamp}{self.prefix}] {msg}"


def setup_logging(prefix: str = "", level: str = "info") -> logging.Logger:
    """Configure the process-wide 'sglang' logger; `prefix` is e.g. ' TP0' (empty for TP 1)."""
    log = logging.getLogger("sglang")
    log.handlers.clear()
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Formatter(prefix))
    log.addHandler(handler)
    log.setLevel(getattr(logging, str(level).upper(), logging.INFO))
    log.propagate = False
    return log


def rank_prefix(tp_rank: int, tp_size: int) -> str:
    return f" TP{tp_rank}" if tp_size > 1 else ""


def gb(x: float) -> str:
    """A size as SGLang's start-up log prints it: bytes / 2**30 to two places, which SGLang
    labels "GB" (the simulator copies the wording; sgltui's own output says GiB, core/units)."""
    return f"{x / (1 << 30):.2f}"
