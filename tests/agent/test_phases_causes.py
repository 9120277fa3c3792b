"""Log lines -> phases and failures -> causes, on SGLang's own wording."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sgltui.core import causes, phases

STARTUP = [
    "[2026-10-01 12:00:00] server_args=ServerArgs(model_path='x', api_key='k')",
    "[2026-10-01 12:00:03 TP0] Load weight begin. avail mem=78.52 GB",
    "[2026-10-01 12:00:15 TP0] Load weight end. elapsed=12.34 s, type=LlamaForCausalLM, avail mem=63.40 GB, mem usage=15.12 GB.",
    "[2026-10-01 12:00:15 TP0] Load weight begin. avail mem=63.40 GB",  # draft model
    "[2026-10-01 12:00:16 TP0] Load weight end. elapsed=1.0 s, type=Qwen3_5MTP, avail mem=62.40 GB, mem usage=1.00 GB.",
    "[2026-10-01 12:00:17 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412160, K size: 25.16 GB, V size: 25.16 GB",
    "[2026-10-01 12:00:17 TP1] Load weight end. elapsed=12.40 s, type=LlamaForCausalLM, avail mem=63.40 GB, mem usage=15.12 GB.",
    "[2026-10-01 12:00:18 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=8.10 GB",
    "[2026-10-01 12:00:39 TP0] max_total_num_tokens=412160, chunked_prefill_size=8192, max_prefill_tokens=16384",
    "[2026-10-01 12:00:40] Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    "[2026-10-01 12:00:41] The server is fired up and ready to roll!",
]


def test_phases_follow_startup_and_never_rewind_on_late_ranks():
    seen, phase = [], None
    for line in STARTUP:
        new = phases.advance(phase, line)
        if new != phase:
            seen.append(new)
            phase = new
    assert seen == [
        "loading weights",
        "allocating KV cache",
        "loading weights",
        "allocating KV cache",
        "capturing CUDA graphs",
        "warming up",
    ]
    assert phases.is_ready_line(STARTUP[-1]) and not phases.is_ready_line(STARTUP[-2])
    # A late TP1 "Load weight end" while capturing graphs does not move the phase back.
    assert phases.advance("capturing CUDA graphs", STARTUP[6]) == "capturing CUDA graphs"


def test_estimate_uses_learned_durations():
    learned = {
        "spawned": 2.0,
        "loading weights": 10.0,
        "allocating KV cache": 1.0,
        "capturing CUDA graphs": 5.0,
        "warming up": 2.0,
    }
    progress, eta = phases.estimate("loading weights", 4.0, {"spawned": 2.0}, learned)
    assert eta == pytest.approx(6.0 + 1.0 + 5.0 + 2.0)
    assert progress == pytest.approx(6.0 / 20.0)
    p0, eta0 = phases.estimate("loading weights", 4.0, {"spawned": 2.0}, None)
    assert eta0 is None and 0.1 < p0 < 0.6


@pytest.mark.parametrize(
    "line,kind",
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
        (
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.5",
            "oom",
        ),
        (
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
            "port",
        ),
        (
            "nccl_port at 31000 is not available in 30 seconds. nccl_port is used by a process already.",
            "port",
        ),
        ("sglang serve: error: unrecognized arguments: --cuda-graph-max-bs 8", "flag"),
        ("sglang serve: error: argument --kv-cache-dtype: invalid choice: 'fp9'", "flag"),
        # a key that leads with "-", as the agent's log shows it (redacted)
        ("sglang serve: error: argument --api-key: ******** one argument", "flag"),
        (
            "OSError: foo/bar is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'",
            "model",
        ),
        ("RuntimeError: CUDA error: no CUDA-capable device is detected", "cuda"),
    ],
)
def test_causes_from_sglang_messages(line, kind):
    lines = [
        "[2026-10-01 12:00:00] server_args=ServerArgs(...)",
        line,
        "Traceback (most recent call last):",
    ]
    cause = causes.classify(1, lines)
    assert cause["kind"] == kind
    assert line in cause["lines"] and cause["fix"] and cause["exit_code"] == 1


def test_oom_during_graph_capture_wins_over_the_cascade():
    lines = [
        "Scheduler hit an exception: Traceback ...",
        "Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB",
        "Received sigquit from a child process. It usually means the child failed.",
    ]
    cause = causes.classify(-9, lines)
    assert cause["kind"] == "oom" and "CUDA graphs" in cause["summary"]


def test_a_repeated_error_line_is_shown_once():
    line = "RuntimeError: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2 GiB"
    cause = causes.classify(1, ["loading", line, "Traceback (most recent call last):", line])
    assert cause["kind"] == "oom"
    assert cause["lines"] == [line]


def test_signal_and_plain_exit():
    cause = causes.classify(-9, ["[..] Decode batch, #running-req: 3"])
    assert (
        cause["kind"] == "signal" and "SIGKILL" in cause["summary"] and "OOM killer" in cause["fix"]
    )
    cause = causes.classify(3, ["something odd", "ValueError: boom"])
    assert cause["kind"] == "exit" and "exit code 3" in cause["summary"] and cause["lines"]
    # A re-adopted server's exit status cannot be read: silence in its log means a kill.
    cause = causes.classify(None, ["[..] Decode batch, #running-req: 3"])
    assert cause["kind"] == "signal" and "killed by a signal" in cause["summary"]
    cause = causes.classify(None, ["Traceback (most recent call last):", "ValueError: boom"])
    assert cause["kind"] == "exit" and "unknown exit status" in cause["summary"]


def test_missing_sglang_and_missing_dependency_are_import_causes():
    cause = causes.classify(1, ["ModuleNotFoundError: No module named 'sglang'"])
    assert cause["kind"] == "import" and "SGLang is not installed" in cause["summary"]
    assert "pip install 'sgltui[sglang]'" in cause["fix"] and cause["fix"].count("fix") == 0
    cause = causes.classify(1, ["ModuleNotFoundError: No module named 'flashinfer.jit'"])
    assert cause["kind"] == "import" and "flashinfer.jit" in cause["summary"]


REAL_PY = Path("/tmp/sglang-cpu-env/bin/python")


@pytest.mark.skipif(
    not REAL_PY.exists(), reason="real SGLang venv absent (/tmp/sglang-cpu-env): dev-only check"
)
def test_real_sglang_flag_error_is_classified():
    out = subprocess.run(
        [str(REAL_PY), "-m", "sglang.launch_server", "--model-path", "x", "--no-such-flag", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    cause = causes.classify(out.returncode, (out.stdout + out.stderr).splitlines())
    assert out.returncode == 2
    assert cause["kind"] == "flag" and any("unrecognized arguments" in ln for ln in cause["lines"])


def test_launch_progress_never_goes_back_when_a_phase_comes_again():
    """Issue 37: the draft model's weights load after the target's KV cache; the estimate for
    'loading weights' entered again was lower (`allocating KV cache 72%`, `loading weights
    56%`). phases.Forward (what the slot reports through) holds it."""
    forward, phase, done, shown, raw = phases.Forward(), None, {}, [], []
    for line in STARTUP:
        new = phases.advance(phase, line)
        if new != phase:
            if phase:
                done[phase] = done.get(phase, 0.0) + 1.0
            phase = new
            p, _ = phases.estimate(phase, 0.5, done, None)
            raw.append(p)
            shown.append(forward("launch-1", p))
    assert any(b < a for a, b in zip(raw, raw[1:]))  # the estimate alone goes back
    assert shown == sorted(shown) and shown[-1] == max(raw)
    assert forward("launch-2", 0.05) == 0.05  # a new launch starts again
