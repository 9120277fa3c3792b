"""Mamba state slots as SGLang 0.5.23 sizes and holds them (docs/architecture.md, "Mamba state slots").

Expected values are the source's rules written out by hand: S from
KVCacheConfigurator._calculate_mamba_ratio, held slots from HybridReqToTokenPool.alloc, the
joint solve from _handle_max_mamba_cache.
"""

from __future__ import annotations

import math

import pytest

from tests.sim.test_memory import CTX, MIB, plan_for

QWEN = ("--model-path", "Qwen/Qwen3.6-27B", "--sim-gpu", "rtx-pro-6000-96gb", "--language-only")
MTP = ("--speculative-algorithm", "NEXTN")
S_B = 48 * (10240 * 3 * 2 + 48 * 128 * 128 * 4)  # one GDN state slot, 146.8 MiB


@pytest.mark.parametrize(
    "flags, strategy_s, held",
    [
        ((), 5, 3),  # auto -> extra_buffer (overlap on): 3 + 2 tracking; working + 2 ping-pong
        (("--mamba-radix-cache-strategy", "extra_buffer", "--disable-overlap-schedule"), 4, 2),
        (("--disable-overlap-schedule",), 3, 1),  # auto without overlap -> no_buffer
        (("--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"), 3, 1),
        (("--mamba-radix-cache-strategy", "extra_buffer_lazy"), 4, 2),
        (("--disable-radix-cache",), 1, 1),
        (MTP, 5, 3),  # speculation adds draft states beside the slots, not slots
    ],
)
def test_slots_per_request_budgeted_and_held(flags, strategy_s, held):
    p = plan_for(*QWEN, *flags)
    assert (p.mamba_slots_per_req, p.mamba_slots_held_per_req) == (strategy_s, held)
    assert p.max_running_requests <= p.mamba_slots // strategy_s


def test_small_mrr_does_not_enlarge_the_slot_pool_under_speculation():
    """0.5.23 solves K jointly with the draft states of min(MRR, K/S) requests and hands what a
    small MRR leaves unused to the KV pool; K itself is the same for MRR 4 and 48."""
    p4 = plan_for(*QWEN, *MTP, "--max-running-requests", "4")
    p48 = plan_for(*QWEN, *MTP)
    pre = 97887 * MIB - CTX
    rest = (pre - 55.6e9 - 0.85e9) - pre * (1 - 0.863)
    k = math.floor((rest * 0.9 / 1.9 / S_B - 5) / (1 + 4 / 5))
    assert p4.mamba_slots == p48.mamba_slots == k == 51
    assert p4.max_running_requests == 4 and p48.max_running_requests == 51 // 5
    assert p4.mamba_pool_bytes == pytest.approx((k + 1) * S_B + (4 + 1) * 4 * S_B)
    assert p4.max_total_num_tokens > p48.max_total_num_tokens  # the unused draft share


def test_pinned_and_radix_off_pool_sizes():
    pinned = plan_for(*QWEN, *MTP, "--max-mamba-cache-size", "40", "--max-running-requests", "16")
    assert pinned.mamba_slots == 40 and pinned.max_running_requests == 40 // 5 == 8
    assert pinned.mamba_pool_bytes == pytest.approx(41 * S_B + (8 + 1) * 4 * S_B)
    off = plan_for(*QWEN, "--disable-radix-cache", "--max-running-requests", "24")
    assert off.mamba_slots == 24 and off.max_running_requests == 24
