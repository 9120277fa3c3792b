"""Sane ranges for SGLang's numeric flags (and the simulator's), by flag name.

argparse checks only that `--tp-size` is an integer, so `--tp-size 0` or `--mem-fraction-static
7.0` pass it and fail minutes later, deep in start-up (or silently misbehave). These ranges are
what SGLang's start-up checks and the hardware allow. They are keyed by canonical flag name and
the validator applies one only where the catalog it is given types the flag as a number, so the
table serves every catalog version: a flag a version lacks is simply never looked up.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: the value must be above `low`, not equal to it
    why: str = ""

    def problem(self, number: float) -> str | None:
        """Why `number` is out of range, or None."""
        if self.low is not None:
            if self.low_open and number <= self.low:
                return f"must be more than {_num(self.low)}{self._why()}"
            if not self.low_open and number < self.low:
                return f"must be at least {_num(self.low)}{self._why()}"
        if self.high is not None and number > self.high:
            return f"must be at most {_num(self.high)}{self._why()}"
        return None

    def _why(self) -> str:
        return f" ({self.why})" if self.why else ""


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# The most GPUs one parallel dimension can span; far beyond any real deployment, and far below
# what would make SGLang try to allocate per-rank structures for 100,000 ranks.
MAX_PARALLEL = 1024
# Anything above int64 overflows SGLang's tensors and numpy arrays.
INT64_MAX = 2**63 - 1

_PARALLEL = Range(1, MAX_PARALLEL, why="a number of GPUs or ranks")
_COUNT = Range(1, INT64_MAX)
_NON_NEGATIVE = Range(0, INT64_MAX)
_FRACTION = Range(0, 1, low_open=True, why="a fraction of memory")
_POSITIVE = Range(0, None, low_open=True)

RANGES: dict[str, Range] = {
    # parallelism
    **dict.fromkeys(
        (
            "tp-size",
            "dp-size",
            "pp-size",
            "ep-size",
            "attn-dp-size",
            "attn-cp-size",
            "moe-dp-size",
            "moe-dense-tp-size",
            "dcp-size",
            "dwdp-size",
            "max-ep-size",
            "shared-experts-tp-size",
            "nnodes",
        ),
        _PARALLEL,
    ),
    "node-rank": Range(0, MAX_PARALLEL - 1),
    "base-gpu-id": Range(0, MAX_PARALLEL - 1),
    "gpu-id-step": Range(1, MAX_PARALLEL),
    # memory
    "mem-fraction-static": _FRACTION,
    "hicache-host-memory-fraction": _FRACTION,
    "mamba-full-memory-ratio": _FRACTION,
    "swa-full-tokens-ratio": _FRACTION,
    "hicache-ratio": _POSITIVE,
    "hicache-size": _NON_NEGATIVE,
    "cpu-offload-gb": _NON_NEGATIVE,
    # sizes and counts of tokens and requests
    **dict.fromkeys(
        (
            "max-running-requests",
            "max-total-tokens",
            "max-prefill-tokens",
            "context-length",
            "page-size",
            "stream-interval",
            "decode-log-interval",
            "max-queued-requests",
            "cuda-graph-max-bs-decode",
            "cuda-graph-max-bs-prefill",
            "speculative-num-steps",
            "speculative-eagle-topk",
            "speculative-num-draft-tokens",
            "tokenizer-worker-num",
            "detokenizer-worker-num",
            "max-mamba-cache-size",
            "max-loras-per-batch",
            "max-loaded-loras",
            "max-lora-rank",
            "torch-compile-max-bs",
            "mamba-track-interval",
        ),
        _COUNT,
    ),
    # -1 (or any value <= 0) turns chunked prefill off, so negatives are legal here
    "chunked-prefill-size": Range(-1, INT64_MAX),
    # times
    "watchdog-timeout": _POSITIVE,
    "soft-watchdog-timeout": _POSITIVE,
    "dist-timeout": _POSITIVE,
    "schedule-conservativeness": _POSITIVE,
    "random-seed": Range(0, 2**32 - 1, why="a 32-bit seed"),
    # the simulator's own flags
    "sim-time-scale": Range(0, 1000, why="0 = no delays, 1 = real time"),
    "sim-crash-after": Range(0, None),
    "sim-slow-start": Range(0, 1000, low_open=True),
    "sim-host-memory-gb": Range(0, 1_000_000, low_open=True),
    "sim-pinned-bandwidth-gbs": Range(0, 10_000, low_open=True),
    "sim-seed": Range(-INT64_MAX, INT64_MAX),
}


def is_port_flag(name: str) -> bool:
    return name == "port" or name.endswith("-port")


def range_for(name: str, kind: str) -> Range | None:
    """The range of flag `name` of type `kind` ("int", "float", "human_int"), if any: the table's,
    else int64 for any integer flag."""
    found = RANGES.get(name)
    if found is not None:
        return found
    if kind in ("int", "human_int"):
        return Range(-INT64_MAX - 1, INT64_MAX)
    return None
