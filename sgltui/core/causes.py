"""Why a server failed: exit code + log lines -> a cause the operator can act on.

A cause is `{"kind", "summary", "lines", "fix", "exit_code"}` (sgltui/protocol/); kinds: oom,
port, flag, model, cuda, import (SGLang or a dependency missing), signal, hang, exit. Rules are
checked in order, most specific first: an OOM during CUDA-graph capture also prints a generic
"Scheduler hit an exception", and the operator needs the OOM, not the cascade.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sgltui.core import units


@dataclass(frozen=True)
class _Rule:
    kind: str
    needles: tuple[str, ...]
    summary: str
    fix: str


RULES: tuple[_Rule, ...] = (
    _Rule(
        "oom",
        ("Capture cuda graph failed",),
        "out of GPU memory while capturing CUDA graphs",
        "lower --mem-fraction-static (e.g. 0.8) or --cuda-graph-max-bs-decode, or disable decode graphs",
    ),
    _Rule(
        "oom",
        (
            "Not enough memory. Please try to increase --mem-fraction-static",
            "leave no GPU memory for the KV cache",
            "Not enough GPU memory for hybrid",
            "Not enough space for mamba cache",
        ),
        "not enough GPU memory for the KV cache / state pools",
        "raise --mem-fraction-static, lower --max-running-requests or --context-length, or free the GPU",
    ),
    _Rule(
        "oom",
        ("CUDA out of memory", "OutOfMemoryError", "The memory capacity is unbalanced"),
        "CUDA out of memory",
        "lower --mem-fraction-static or --chunked-prefill-size, and check `nvidia-smi` for other processes on the GPU",
    ),
    _Rule(
        "port",
        (
            "address already in use",
            "is not available in 30 seconds",
            "is used by a process already",
            "Port is already in use",
        ),
        "a port the server needs is already in use",
        "stop whatever holds the port (often a leftover sglang:: process) or set another port in the profile",
    ),
    _Rule(
        "flag",
        (
            "unrecognized arguments:",
            "invalid choice:",
            "ambiguous option:",
            "invalid int value",
            "invalid float value",
            "mutually exclusive",
            "Unknown speculative algorithm",
            "--model-path is required",
            "expected one argument",
            # argparse's own form for any rejected value; it survives the log's redaction,
            # which masks the word after "--api-key:" ("argument --api-key: ******** ...")
            ": error: argument --",
        ),
        "the server rejected its command-line flags",
        "fix the flag in the profile (`sgltui profiles validate NAME` names the nearest valid flag)",
    ),
    _Rule(
        "model",
        (
            "is not a local folder and is not a valid model identifier",
            "Repository Not Found",
            "401 Client Error",
            "gated repo",
            "No such file or directory: '",
            "does not appear to have a file named",
        ),
        "model not found or not accessible",
        "check model-path in the profile; for gated Hugging Face models set HF_TOKEN in the profile's [env]",
    ),
    _Rule(
        "cuda",
        (
            "CUDA error",
            "NCCL error",
            "cudaErrorNoDevice",
            "no CUDA-capable device",
            "CUDA driver version is insufficient",
            "device-side assert",
        ),
        "CUDA / driver error",
        "check `nvidia-smi`, CUDA_VISIBLE_DEVICES in the profile, and that the driver matches the torch build",
    ),
)

# Lines that only say "something else failed first"; shown when nothing more specific matched.
_GENERIC = (
    "Scheduler hit an exception",
    "crashed with exit code",
    "Initialization failed",
    "Received sigquit",
    "SIGQUIT received",
    "watchdog timeout",
    "Traceback (most recent call last)",
    "Error",
    "error:",
)

MAX_LINES = 6


def _signal_name(num: int) -> str:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


SGLANG_INSTALL_FIX = (
    "install SGLang into the profile's interpreter (`pip install 'sgltui[sglang]'`) or set "
    "`python` in the profile to an interpreter that has SGLang"
)
_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '?([\w.]+)'?")


def _missing_module(lines: Sequence[str], exit_code: int | None) -> dict[str, Any] | None:
    """A launch that died importing: SGLang itself missing, or one of its dependencies."""
    for line in lines:
        m = _NO_MODULE.search(line)
        if not m:
            continue
        module = m.group(1)
        if module.split(".")[0] == "sglang":
            return _cause(
                "import",
                "SGLang is not installed in the server's interpreter",
                [line],
                SGLANG_INSTALL_FIX,
                exit_code,
            )
        return _cause(
            "import",
            f"the server cannot import {module}",
            [line],
            f"install {module.split('.')[0]} into the profile's interpreter (`python`), "
            "or use one where SGLang's dependencies are complete",
            exit_code,
        )
    return None


def classify(
    exit_code: int | None, lines: Sequence[str], *, killed_by_us: bool = False
) -> dict[str, Any]:
    """The cause of a failure from the process's exit status and the tail of its log.

    `exit_code` follows Popen.returncode (negative = killed by that signal; None = unknown, e.g. a
    server re-adopted after an agent restart).
    """
    missing = _missing_module(lines, exit_code)
    if missing:
        return missing
    for rule in RULES:
        hits = _matching(lines, rule.needles)
        if hits:
            return _cause(rule.kind, rule.summary, hits, rule.fix, exit_code)
    if exit_code is not None and (exit_code < 0 or exit_code in (128 + 9, 128 + 15)):
        num = -exit_code if exit_code < 0 else exit_code - 128
        name = _signal_name(num)
        fix = (
            "look for the OOM killer in `dmesg` / `journalctl -k` (host RAM), or another user's kill"
            if num == _signal.SIGKILL
            else "see who sent it; relaunch with `sgltui start`"
        )
        return _cause(
            "signal", f"killed by {name}", _matching(lines, _GENERIC)[-MAX_LINES:], fix, exit_code
        )
    generic = _matching(lines, _GENERIC)
    if exit_code is None and not generic:
        # A re-adopted server is not our child: its exit status is gone with its parent. One
        # that ends without a single error line was almost always killed (SIGKILL leaves none).
        return _cause(
            "signal",
            "ended with no error in its log: most likely killed by a signal (SIGKILL); "
            "the exit status of a re-adopted server cannot be read",
            list(lines)[-MAX_LINES:],
            "look for the OOM killer in `dmesg` / `journalctl -k` (host RAM), or another user's kill",
            None,
        )
    code = "unknown exit status" if exit_code is None else f"exit code {exit_code}"
    return _cause(
        "exit",
        f"server exited ({code})",
        generic[-MAX_LINES:] or list(lines)[-MAX_LINES:],
        "read the server log (`sgltui logs`) for the first error",
        exit_code,
    )


def hang(phase: str, in_phase_s: float, expected_s: float, lines: Sequence[str]) -> dict[str, Any]:
    """The cause for a launch stuck in `phase` well past its usual duration."""
    return _cause(
        "hang",
        f"stuck in '{phase}' for {units.duration(in_phase_s)} (usually {units.duration(expected_s)})",
        list(lines)[-MAX_LINES:],
        "check GPU state with `nvidia-smi` and the server log; a leftover process or a stuck download is typical",
        None,
    )


def _matching(lines: Iterable[str], needles: tuple[str, ...]) -> list[str]:
    """The lines that show the cause, each once (a server often repeats its error line, and
    the same line printed twice under `cause:` reads as two failures)."""
    hits = dict.fromkeys(ln for ln in lines if any(n in ln for n in needles))
    return list(hits)[:MAX_LINES]


def line(cause: Mapping[str, Any]) -> str:
    """A cause as one line: what happened; what to do (a refused launch's message, a pool
    member's failure)."""
    fix = cause.get("fix")
    return f"{cause['summary']}; {fix}" if fix else str(cause["summary"])


def _cause(
    kind: str, summary: str, lines: list[str], fix: str, exit_code: int | None
) -> dict[str, Any]:
    return {
        "kind": kind,
        "summary": summary,
        "lines": [ln.rstrip("\n")[:500] for ln in lines],
        "fix": fix,
        "exit_code": exit_code,
    }
