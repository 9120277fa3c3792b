"""The batching loop in-process, at time scale 0: admission, KV-pool queueing, retraction,
chunked prefill, prefix cache and HiCache load-back."""

from __future__ import annotations

import logging

import pytest

from sgltui.sim.cli import parse_args
from sgltui.sim.hardware import GPU_PRESETS
from sgltui.sim.memory import plan_memory
from sgltui.sim.models import resolve_draft, resolve_model
from sgltui.sim.scheduler import Scheduler
from sgltui.sim.speed import SpeedModel
from tests.sim.helpers import qwen36


class Harness:
    def __init__(self, *flags: str):
        args = parse_args(
            ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--sim-time-scale", "0", *flags]
        )
        model = resolve_model(args.model_path)
        draft = (
            resolve_draft(args.speculative_algorithm, model, args.speculative_draft_model_path)
            if args.speculative_algorithm
            else None
        )
        gpu = GPU_PRESETS[args.sim_gpu]
        self.plan = plan_memory(args, gpu, model, draft, 512e9)
        self.outs: dict[str, dict] = {}
        self.stats: list[dict] = []
        self.sched = Scheduler(
            self.plan, SpeedModel(gpu, model, self.plan), args, self.emit, model.is_hybrid, 0, 400
        )
        self.max_running = 0
        self.max_used = 0

    def emit(self, kind, payload):
        if kind == "out":
            for rid, new, finish, meta in payload:
                o = self.outs.setdefault(rid, {"ids": [], "finish": None})
                o["ids"] += new
                o["finish"] = finish
                o["meta"] = meta
        elif kind == "stats":
            self.stats.append(payload)

    def add(self, rid: str, prompt: list[int], max_new: int):
        self.sched.add(
            {"rid": rid, "input_ids": prompt, "max_new_tokens": max_new, "ignore_eos": True}
        )

    def run(self, max_steps: int = 100_000):
        for _ in range(max_steps):
            if not self.sched.step() and self.sched.idle:
                return
            self.max_running = max(self.max_running, len(self.sched.running))
            self.max_used = max(self.max_used, self.sched.used_tokens)
        raise AssertionError("scheduler did not drain")


@pytest.fixture
def lines():
    got: list[str] = []

    class H(logging.Handler):
        def emit(self, record):
            got.append(record.getMessage())

    h = H()
    log = logging.getLogger("sglang")
    log.addHandler(h)
    old = log.level
    log.setLevel(logging.INFO)
    yield got
    log.removeHandler(h)
    log.setLevel(old)


def test_running_batch_capped_by_max_running_requests():
    h = Harness("--max-running-requests", "4")
    for i in range(10):
        h.add(f"r{i}", [i + 1] * 20, 30)
    h.run()
    assert h.max_running == 4
    assert all(h.outs[f"r{i}"]["finish"] == {"type": "length", "length": 30} for i in range(10))


def test_kv_pool_limits_admission_and_nothing_overflows():
    h = Harness("--max-total-tokens", "3000", "--disable-radix-cache")
    for i in range(12):
        h.add(f"r{i}", list(range(i * 1000, i * 1000 + 600)), 300)
    h.run()
    assert h.max_used <= 3000
    assert 2 <= h.max_running < 12  # the pool, not the request cap, held requests back
    assert all(len(h.outs[f"r{i}"]["ids"]) == 300 for i in range(12))


def test_full_pool_retracts_and_finishes_everyone(lines):
    # Admission reserves only new_token_ratio x remaining output, so long answers overfill the
    # pool and some requests are retracted (and recomputed later), as in SGLang.
    h = Harness("--max-total-tokens", "2000", "--disable-radix-cache")
    for i in range(8):
        h.add(f"r{i}", list(range(i * 500, i * 500 + 100)), 700)
    h.run()
    assert h.max_used <= 2000
    assert any(ln.startswith("KV cache pool is full. Retract requests.") for ln in lines)
    assert sum(h.outs[f"r{i}"]["meta"]["num_retractions"] for i in range(8)) >= 1
    assert all(len(h.outs[f"r{i}"]["ids"]) == 700 for i in range(8))


def test_chunked_prefill_splits_long_prompts(lines):
    h = Harness("--chunked-prefill-size", "256")
    h.add("long", list(range(1000)), 2)
    h.run()
    new_tokens = [
        int(ln.split("#new-token: ")[1].split(",")[0])
        for ln in lines
        if ln.startswith("Prefill batch")
    ]
    assert new_tokens == [256, 256, 256, 232]


def test_prefix_cache_hits_on_device():
    h = Harness()
    prompt = list(range(5000, 5200))
    h.add("a", prompt, 5)
    h.run()
    h.add("b", prompt + [1, 2, 3], 5)
    h.run()
    assert h.outs["a"]["meta"]["cached_tokens"] == 0
    assert h.outs["b"]["meta"]["cached_tokens_details"] == {"device": 192, "host": 0, "storage": 0}


@pytest.mark.parametrize("hicache", [True, False])
def test_hicache_keeps_evicted_prefixes_on_host(hicache):
    flags = ["--max-total-tokens", "1024"] + (
        ["--enable-hierarchical-cache", "--hicache-ratio", "8"] if hicache else []
    )
    h = Harness(*flags)
    shared = list(range(7000, 7512))
    h.add("first", shared, 4)
    h.run()
    for i in range(6):  # other prompts push `shared` out of the GPU pool
        h.add(f"other{i}", list(range(20000 + i * 600, 20000 + i * 600 + 500)), 4)
        h.run()
    h.add("again", shared + [9], 4)
    h.run()
    details = h.outs["again"]["meta"]["cached_tokens_details"]
    assert details["device"] == 0
    if hicache:
        assert details["host"] == 512  # loaded back over PCIe instead of recomputed
        assert h.stats[-1]["pcie_rx_total_bytes"] == pytest.approx(512 * h.plan.kv_cell_eff_bytes)
        assert h.stats[-1]["hicache_host_used_tokens"] > 1024
    else:
        assert details["host"] == 0


def test_hybrid_hicache_load_back_restores_the_state_checkpoint_too():
    """On a hybrid model a host hit also brings back the request's state checkpoint
    (reference 3.4: hit tokens x cell size plus S_b per restored state over the link)."""
    h = Harness(
        *qwen36("rtx-pro-6000-96gb"),
        *("--max-total-tokens", "1024", "--enable-hierarchical-cache", "--hicache-ratio", "8"),
    )
    shared = list(range(7000, 7512))
    h.add("first", shared, 4)
    h.run()
    for i in range(6):
        h.add(f"other{i}", list(range(20000 + i * 600, 20000 + i * 600 + 500)), 4)
        h.run()
    h.add("again", shared + [9], 4)
    h.run()
    assert h.outs["again"]["meta"]["cached_tokens_details"]["host"] == 512
    state = h.plan.state_bytes_per_slot
    assert state > 0
    want = 512 * h.plan.kv_cell_eff_bytes + state
    assert h.stats[-1]["pcie_rx_total_bytes"] == pytest.approx(want)


def test_hicache_hit_is_faster_than_recompute():
    def time_second_request(flags):
        h = Harness("--max-total-tokens", "40000", *flags)
        big = list(range(30000))
        h.add("a", big, 2)
        h.run()
        h.sched.cache.evict(10**9)  # drop the GPU copy only
        t0 = h.sched.vclock
        h.add("b", big + [1], 2)
        h.run()
        return h.sched.vclock - t0

    recompute = time_second_request([])
    load_back = time_second_request(["--enable-hierarchical-cache"])
    assert load_back < recompute / 5


def test_speculative_accept_length_matches_chain():
    h = Harness(
        *qwen36("h200-141gb"),
        "--speculative-algorithm",
        "NEXTN",
    )
    h.add("s", [1, 2, 3], 2000)
    h.run()
    m = h.outs["s"]["meta"]
    assert m["spec_accept_length"] == pytest.approx(1 + 0.96 + 0.80 + 0.64, abs=0.15)
    assert m["spec_verify_ct"] == pytest.approx(2000 / 3.4, rel=0.1)


def test_queue_limit_aborts_with_sglang_message():
    h = Harness("--max-running-requests", "1", "--max-queued-requests", "2")
    for i in range(5):
        h.add(f"q{i}", [i + 1] * 10, 5)
    h.run()
    aborted = [r for r, o in h.outs.items() if o["finish"]["type"] == "abort"]
    # All five arrive before the first forward: q0 and q1 fill the queue of 2, the rest bounce.
    assert sorted(aborted) == ["q2", "q3", "q4"]
    assert h.outs["q3"]["finish"]["message"] == "The request queue is full."
    assert all(len(h.outs[r]["ids"]) == 5 for r in ("q0", "q1"))


def test_text_is_deterministic_per_seed_and_word_like():
    from sgltui.sim.text import WordStream, detokenize

    def answer(seed, prompt):
        w = WordStream(seed, prompt, 400)
        return detokenize([w.next_id() for _ in range(40)])

    a = answer(1, [5, 6, 7])
    assert a == answer(1, [5, 6, 7])
    assert a != answer(2, [5, 6, 7]) and a != answer(1, [5, 6, 8])
    words = a.split()
    assert len(words) >= 30 and all(w.strip(",.").isalpha() for w in words)


def test_prefix_cache_lock_accounting():
    from sgltui.sim.prefix_cache import BLOCK, PrefixCache, block_keys

    c = PrefixCache(True)
    keys = block_keys(list(range(64)))
    c.insert(keys)
    assert c.evictable_tokens() == 4 * BLOCK
    c.lock(keys[:2])
    c.lock(keys[:1])
    assert c.evictable_tokens() == 2 * BLOCK
    assert c.evict(10**6) == 2 * BLOCK and c.device_tokens == 2 * BLOCK
    c.unlock(keys[:2])
    assert c.evictable_tokens() == BLOCK  # keys[0] still held by the second lock
    c.unlock(keys[:1])
    assert c.evictable_tokens() == 2 * BLOCK
