"""Memory figures against hand computations from SGLang 0.5.23's sizing rules (two presets).

Each expected number is worked out below step by step from SGLang 0.5.23's formulas, not taken
from the simulator, so a change in the sizing code that drifts from SGLang fails here.
"""

from __future__ import annotations

import argparse

import pytest

from sgltui.sim.cli import parse_args
from sgltui.sim.hardware import GPU_PRESETS
from sgltui.sim.memory import StartupFailure, capture_batch_sizes, plan_memory
from sgltui.sim.models import resolve_draft, resolve_model
from tests.sim.helpers import qwen36

GIB = 1 << 30
MIB = 1 << 20
CTX = int(0.6 * GIB)  # CUDA context before load: 95.6 vs 95.0 GiB measured on an RTX PRO 6000


def plan_for(*flags: str):
    args = parse_args(list(flags))
    model = resolve_model(args.model_path)
    draft = (
        resolve_draft(args.speculative_algorithm, model, args.speculative_draft_model_path)
        if args.speculative_algorithm
        else None
    )
    return plan_memory(args, GPU_PRESETS[args.sim_gpu], model, draft, 512e9)


def test_qwen3_32b_on_h100_by_hand():
    p = plan_for("--model-path", "Qwen/Qwen3-32B", "--sim-gpu", "h100-80gb")
    # default-MFS table: G = 81559 MiB -> chunk 8192, graph bs 256; reserve 512 + 1.5*8192 + 2*256 + 1024/8 = 13440
    assert p.chunked_prefill_size == 8192 and p.cuda_graph_max_bs == 256
    assert p.mem_fraction_static == 0.835  # round((81559 - 13440) / 81559, 3)
    pre = 81559 * MIB - CTX
    rest = (pre - 65.5e9) - pre * (1 - 0.835)  # the KV + state budget
    cell = 8 * (128 + 128) * 64 * 2  # kv_heads x (hd + v_hd) x L x bf16
    assert cell == 262144
    assert p.max_total_num_tokens == int(rest // cell) == 20492
    # request pool: clamp(20492 / 40960 * 512, 2048, 4096) = 2048 <= 20492 // 2; MRR = min(10246, 2048)
    assert p.max_running_requests == 2048
    assert p.requested_max_running_requests is None
    assert any("fewer than --context-length 40960" in w for w in p.warnings)


def test_qwen36_27b_hybrid_on_rtx_pro_6000_by_hand():
    p = plan_for(
        "--model-path", "Qwen/Qwen3.6-27B", "--sim-gpu", "rtx-pro-6000-96gb", "--language-only"
    )
    assert p.mem_fraction_static == 0.863  # round((97887 - 13440) / 97887, 3)
    pre = 97887 * MIB - CTX
    rest = (pre - 55.6e9) - pre * (1 - 0.863)  # ~30.2 GiB (SGLang's own log: rest ~ 30 GiB)
    s_b = 48 * (10240 * 3 * 2 + 48 * 128 * 128 * 4)  # GDN state slot, 146.8 MiB
    assert p.state_bytes_per_slot == s_b and round(s_b / MIB, 1) == 146.8
    k = int(rest * 0.9 / 1.9 / s_b - 1)  # (K + 1) S_b = budget
    assert p.mamba_slots == k == 98  # SGLang 0.5.23 reports ~98
    assert p.max_running_requests == 98 // 5 == 19  # extra_buffer, S = 5
    kv = int((rest - (k + 1) * s_b) // (16 * 4 * 512 * 2))  # 64 KiB per token
    assert p.max_total_num_tokens == kv and 255_000 < kv < 265_000
    assert any("capped to 19 by the mamba state cache" in w for w in p.warnings)


def test_qwen36_27b_mtp_joint_solve_by_hand():
    p = plan_for(
        *qwen36("rtx-pro-6000-96gb"),
        "--language-only",
        "--speculative-algorithm",
        "NEXTN",
    )
    assert (p.spec.num_steps, p.spec.eagle_topk, p.spec.num_draft_tokens) == (3, 1, 4)
    assert p.requested_max_running_requests == 48  # SGLang's speculative default
    pre = 97887 * MIB - CTX
    rest = (pre - 55.6e9 - 0.85e9) - pre * (1 - 0.863)  # draft weights are counted
    s_b = 48 * (10240 * 3 * 2 + 48 * 128 * 128 * 4)
    budget = rest * 0.9 / 1.9
    k = int((budget / s_b - (1 + 4)) / (1 + 4 / 5))  # main joint solve, D = 4, S = 5
    assert p.mamba_slots == k == 51  # table: ~52
    assert p.max_running_requests == 10  # table: 10
    mamba = (k + 1) * s_b + (10 + 1) * 4 * s_b
    assert p.mamba_pool_bytes == pytest.approx(mamba)
    kv = int((rest - mamba) // (65536 * (1 + 1 / 16)))  # draft KV factor 1 + L_draft / L_target
    assert p.max_total_num_tokens == kv
    assert p.cuda_graph_bs == [1, 2, 3, 4, 5, 6, 7, 8, 10]  # clamped to MRR, spec list 1-8, 10
    assert any("reset to 48 for speculative decoding" in w for w in p.warnings)


def test_multimodal_factor_shrinks_the_budget():
    lang = plan_for(
        "--model-path", "Qwen/Qwen3.6-27B", "--sim-gpu", "rtx-pro-6000-96gb", "--language-only"
    )
    mm = plan_for("--model-path", "Qwen/Qwen3.6-27B", "--sim-gpu", "rtx-pro-6000-96gb")
    c = 27 * 1152**2 / (24 * 1024**2)
    assert mm.mem_fraction_static == round(0.863 * 0.95 * (1 - 0.1 * (c - 1)), 3)  # ~0.785
    assert 0.70 < mm.max_total_num_tokens / lang.max_total_num_tokens < 0.80  # "shrinks by ~25%"


def test_mtp_with_four_requests_and_hicache_host_pool():
    p = plan_for(
        *qwen36("rtx-pro-6000-96gb"),
        "--speculative-algorithm",
        "NEXTN",
        "--max-running-requests",
        "4",
        "--enable-hierarchical-cache",
        "--hicache-ratio",
        "2",
    )
    assert p.max_running_requests == 4
    assert p.hicache_host_tokens == 2 * p.max_total_num_tokens
    assert p.hicache_host_bytes == p.hicache_host_tokens * p.kv_cell_bytes
    plain = plan_for(
        *qwen36("rtx-pro-6000-96gb"),
        "--speculative-algorithm",
        "NEXTN",
        "--max-running-requests",
        "4",
    )
    # SGLang sizes these before HiCache exists: HiCache changes none of the device figures.
    assert plain.max_total_num_tokens == p.max_total_num_tokens
    assert plain.max_running_requests == p.max_running_requests


def test_hicache_size_in_gb_overrides_ratio():
    p = plan_for(
        "--model-path",
        "Qwen/Qwen3-32B",
        "--sim-gpu",
        "h200-141gb",
        "--enable-hierarchical-cache",
        "--hicache-size",
        "40",
        "--hicache-ratio",
        "5",
    )
    assert p.hicache_host_tokens == int(40e9 / 262144)


def test_host_memory_too_small_fails_with_sglang_message():
    args = parse_args(
        ["--model-path", "Qwen/Qwen3-32B", "--enable-hierarchical-cache", "--hicache-size", "400"]
    )
    model = resolve_model(args.model_path)
    with pytest.raises(StartupFailure) as exc:
        plan_memory(args, GPU_PRESETS["h100-80gb"], model, None, 64e9)
    assert "Not enough host memory available. Requesting 400.00 GB" in str(exc.value)


def test_weights_that_leave_no_room_fail_with_sglang_message():
    with pytest.raises(StartupFailure) as exc:
        plan_for(
            "--model-path",
            "Qwen/Qwen3-32B",
            "--sim-gpu",
            "h100-80gb",
            "--mem-fraction-static",
            "0.7",
        )
    msg = str(exc.value)
    assert (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.7."
        in msg
    )
    pre = 81559 * MIB - CTX
    assert f"minimum viable = 1 - available/pre = {1 - (pre - 65.5e9) / pre:.3f}" in msg


def test_model_larger_than_the_gpu_fails_as_cuda_oom():
    with pytest.raises(StartupFailure) as exc:
        plan_for("--model-path", "Qwen/Qwen3-32B", "--sim-gpu", "l40s-48gb")
    assert "CUDA out of memory" in str(exc.value)


def test_speculative_on_dense_model_keeps_48_and_eagle_draft_kv():
    p = plan_for(
        "--model-path",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
    )
    assert (p.spec.num_steps, p.spec.eagle_topk, p.spec.num_draft_tokens) == (
        5,
        4,
        8,
    )  # Llama default
    assert p.max_running_requests == 48
    assert p.draft_weights_bytes == pytest.approx(2.2e9)
    assert p.kv_cell_eff_bytes == pytest.approx(p.kv_cell_bytes * (1 + 1 / 32))


def test_capture_lists():
    assert capture_batch_sizes(256, False)[:7] == [1, 2, 4, 8, 12, 16, 24]
    assert capture_batch_sizes(4, True) == [1, 2, 3, 4]


def test_flag_parsing_matches_sglang_types():
    ns = parse_args(["--model-path", "m-7B", "--context-length", "32Ki"])
    assert isinstance(ns, argparse.Namespace)
    p = plan_memory(ns, GPU_PRESETS["h100-80gb"], resolve_model("m-7B"), None, 512e9)
    assert p.context_len == 32768
