"""The simulated scheduler: continuous batching on a virtual GPU clock.

Each forward pass (a prefill batch or one decode step) costs the time the speed model gives; the
loop sleeps until wall time catches up with `virtual time x time scale`, then hands the tokens it
produced to the main process. Admission follows SGLang's rules (sglang/srt/managers/schedule_policy.py): the running
batch is capped by max_running_requests, the KV pool (with a decaying new-token reservation) and,
on hybrid models, free state slots; a full pool evicts prefix cache, then retracts requests.
Prefill and decode alternate (no mixed chunk), so a long chunked prompt stalls decodes one chunk
at a time. A request and the tokens it generates are sim/request.py; the log lines and load
snapshots sim/sched_report.py.
"""

from __future__ import annotations

import logging
import time
from collections import deque

from sgltui.sim.memory import MemoryPlan
from sgltui.sim.prefix_cache import BLOCK, PrefixCache, block_keys
from sgltui.sim.request import Req, accept_length, generate, output
from sgltui.sim.sched_report import SchedulerReport
from sgltui.sim.speed import SpeedModel
from sgltui.sim.text import WordStream

log = logging.getLogger("sglang")

RESERVE_CAP = 4096  # min(max_new, 4096) in SGLang's admission check


class Scheduler:
    def __init__(
        self,
        plan: MemoryPlan,
        speed: SpeedModel,
        args,
        emit,
        is_hybrid: bool,
        seed: int,
        mean_answer: int,
    ):
        self.plan = plan
        self.speed = speed
        self.args = args
        self.emit = emit  # emit(kind, payload) -> main process
        self.hybrid = is_hybrid
        self.seed = seed
        self.mean_answer = mean_answer
        self.scale = float(args.sim_time_scale)
        self.waiting: deque[Req] = deque()
        self.paused = False  # pause_generation: nothing runs until continue_generation
        self.bad_draft = False  # set by a resume under --sim-bad-resume-draft (memory_saver.py)
        # What a real scheduler knows of its memory saver (memory_saver.py): the tags released
        # (SGLang's offload_tags) and torch-memory-saver's paused regions.
        self.offload_tags: set[str] = set()
        self.tms_paused: set[str] = set()
        # HiCache copies in flight (write-through of inserted blocks, load-back of host hits),
        # as the wall time each is done; only the running loop retires them (drain_hicache).
        self.hicache_ops: list[float] = []
        self.link_bytes_s = max(1e6, float(getattr(args, "sim_pinned_bandwidth_gbs", 54.0)) * 1e9)
        self.running: list[Req] = []
        self.chunked: Req | None = None
        host_tokens = plan.hicache_host_tokens
        self.cache = PrefixCache(
            not args.disable_radix_cache, host_tokens, plan.hicache_host_mamba_states
        )
        self.total_tokens = plan.max_total_num_tokens
        self.owned_tokens = 0
        self.slots_total = plan.mamba_slots
        self.slots_used = 0
        self.spec = plan.spec
        start_ratio = min(1.0, 0.7 * float(getattr(args, "schedule_conservativeness", 1.0) or 1.0))
        self.init_ratio = start_ratio
        self.min_ratio = 0.14 * start_ratio
        self.new_token_ratio = start_ratio
        self.last_was_prefill = False
        self.warmup_extra_s = 0.0  # first forward pays JIT/Triton compilation
        # Virtual clock.
        self.vclock = 0.0
        self.wall0 = time.monotonic()
        # Statistics.
        self.decode_steps = 0
        self.interval_tokens = 0
        self.interval_start_v = 0.0
        self.interval_verify = 0
        self.interval_accepted_tokens = 0
        self.last_gen_throughput = 0.0
        self.last_prefill_v = 0.0
        self.cache_hit_rate = 0.0
        self.total_prefill_uncached = 0
        self.total_prefill_busy_s = 0.0
        self.spec_accept_length = 0.0
        self.spec_accept_rate = 0.0
        self.busy_since_snapshot = 0.0
        self.pcie_rx_bytes = 0.0
        self.pcie_tx_bytes = 0.0
        self.retracted_total = 0
        self.realtime = {"prefill_compute": 0, "prefill_cache": 0, "decode": 0}
        self.prefill_hits = {"device_hit": 0, "host_hit": 0, "input": 0}
        # Its log lines and load snapshots (sim/sched_report.py).
        self.reporter = SchedulerReport(self)

    # ---- pool accounting --------------------------------------------------------------------
    @property
    def used_tokens(self) -> int:
        return self.cache.device_tokens + self.owned_tokens

    @property
    def busy_tokens(self) -> int:
        """What SGLang reports as used: total - (available + evictable), i.e. without idle cache."""
        return self.used_tokens - self.cache.evictable_tokens()

    @property
    def available_tokens(self) -> int:
        return self.total_tokens - self.used_tokens

    def _alloc(self, n: int) -> bool:
        if n > self.available_tokens:
            self.cache.evict(n - self.available_tokens)
        if n > self.available_tokens:
            return False
        self.owned_tokens += n
        return True

    def _release(self, req: Req, insert: bool) -> None:
        self.cache.unlock(req.locked)
        ids = req.input_ids + req.output_ids
        self.owned_tokens -= req.owned
        if insert:
            keys = block_keys(ids)
            backed_up = self.cache.backup_tokens
            self.cache.insert(keys)
            self._hicache_copy(self.cache.backup_tokens - backed_up)  # the write-through
        req.owned = 0
        req.locked = []
        if self.hybrid:
            self.slots_used -= self.plan.mamba_slots_held_per_req

    # ---- requests in --------------------------------------------------------------------------
    def add(self, r: dict) -> None:
        ids = list(r["input_ids"])
        max_new = r.get("max_new_tokens")
        max_new = int(max_new) if max_new is not None else 128
        if len(ids) + max_new > self.plan.context_len:
            max_new = max(0, self.plan.context_len - len(ids))
        req = Req(
            rid=r["rid"],
            input_ids=ids,
            max_new=max_new,
            ignore_eos=bool(r.get("ignore_eos")),
            stop=[s for s in (r.get("stop") or []) if s],
            stop_ids=set(r.get("stop_token_ids") or []),
            words=WordStream(self.seed, ids, self.mean_answer),
        )
        if len(ids) >= self.plan.context_len:
            self._finish_abort(
                req,
                f"The input ({len(ids)} tokens) is longer than the model's context "
                f"length ({self.plan.context_len} tokens).",
                400,
            )
            return
        limit = getattr(self.args, "max_queued_requests", None)
        if limit is not None and len(self.waiting) >= int(limit):
            self._finish_abort(req, "The request queue is full.", 503)
            return
        req.keys = block_keys(ids)
        self.waiting.append(req)

    def abort(self, rid: str | None) -> None:
        victims = [
            q
            for q in list(self.waiting) + self.running + ([self.chunked] if self.chunked else [])
            if rid is None or q.rid == rid
        ]
        for req in victims:
            if req in self.waiting:
                self.waiting.remove(req)
            else:
                if req is self.chunked:
                    self.chunked = None
                else:
                    self.running.remove(req)
                self._release(req, insert=False)
            self._finish_abort(
                req,
                "Abort in waiting queue" if req.prefilled == 0 else "Abort before finished",
                499,
            )

    def _finish_abort(self, req: Req, message: str, status: int) -> None:
        req.finish = {"type": "abort", "message": message, "status_code": status, "err_type": None}
        self.emit("out", [output(req, [], self.spec)])

    def flush_cache(self) -> bool:
        if not self.fully_idle:
            return False
        self.cache.clear()
        return True

    def reject_unfittable(self) -> None:
        """A prompt larger than the whole KV pool can never run: abort it instead of waiting forever."""
        if self.running or self.chunked or not self.waiting:
            return
        req = self.waiting[0]
        if req.seq_len + 1 > self.total_tokens:
            self.waiting.popleft()
            self._finish_abort(
                req,
                f"Input length ({req.seq_len} tokens) exceeds the KV pool "
                f"({self.total_tokens} tokens).",
                400,
            )

    @property
    def idle(self) -> bool:
        return not (self.waiting or self.running or self.chunked)

    # ---- hicache copies in flight ----------------------------------------------------------------
    def _hicache_copy(self, tokens: int) -> None:
        """A host <-> device copy of `tokens` KV tokens starts now (at the pinned link's speed)."""
        if tokens <= 0:
            return
        seconds = tokens * self.plan.kv_cell_eff_bytes / self.link_bytes_s * self.scale
        self.hicache_ops.append(time.monotonic() + seconds)

    def drain_hicache(self) -> None:
        """Retire the copies that are done. SGLang checks them only while its loop runs (the
        paused loop skips it): the caller does not call this while paused."""
        if self.hicache_ops:
            now = time.monotonic()
            self.hicache_ops = [t for t in self.hicache_ops if t > now]

    def hicache_in_flight(self) -> bool:
        return bool(self.hicache_ops)

    @property
    def fully_idle(self) -> bool:
        """SGLang's is_fully_idle: no request anywhere and no hicache copy in flight."""
        return self.idle and not self.hicache_ops

    # ---- one iteration --------------------------------------------------------------------------
    def step(self) -> bool:
        """Run one forward pass if there is work; False when idle."""
        if self.idle:
            return False
        batch = None
        if not (self.last_was_prefill and self.running):
            batch = self._prefill_batch()
        if batch:
            dt, outs = self._run_prefill(batch)
            self.last_was_prefill = True
        elif self.running:
            dt, outs = self._run_decode()
            self.last_was_prefill = False
        else:
            self.last_was_prefill = False
            return False  # waiting requests that do not fit yet: wait for memory or arrivals
        dt += self.warmup_extra_s
        self.warmup_extra_s = 0.0
        self._advance(dt)
        if outs:
            self.emit("out", outs)
        return True

    def _advance(self, dt: float) -> None:
        self.vclock += dt
        self.busy_since_snapshot += dt
        if self.scale > 0:
            delay = self.wall0 + self.vclock * self.scale - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def realign(self) -> None:
        """After idling, the virtual clock restarts at 'now' (an idle GPU does not bank time)."""
        if self.scale > 0:
            self.vclock = max(self.vclock, (time.monotonic() - self.wall0) / self.scale)

    # ---- prefill ---------------------------------------------------------------------------------
    def _reserved_for_running(self) -> float:
        return sum(min(r.remaining, RESERVE_CAP) for r in self.running) * self.new_token_ratio

    def _prefill_batch(self) -> list[tuple[Req, int]]:
        """[(req, tokens computed this pass)], admitting from the waiting queue in FCFS order."""
        chunk = self.plan.chunked_prefill_size
        budget = chunk if chunk and chunk > 0 else 1 << 30
        budget = min(budget, self.plan.max_prefill_tokens) if chunk <= 0 else budget
        batch: list[tuple[Req, int]] = []
        if self.chunked is not None:
            req = self.chunked
            todo = min(req.seq_len - req.prefilled, budget)
            batch.append((req, todo))
            budget -= todo
            if todo < req.seq_len - req.prefilled:
                return batch
        mrr = self.plan.max_running_requests
        while self.waiting and budget > 0:
            if len(self.running) + len(batch) >= mrr:
                break
            if (
                self.hybrid
                and self.slots_total - self.slots_used < self.plan.mamba_slots_held_per_req
            ):
                break
            req = self.waiting[0]
            dev, host = self.cache.match(req.keys)
            full = req.seq_len
            dev_tokens = min(dev * BLOCK, full - 1)
            host_tokens = min(host * BLOCK, full - 1 - dev_tokens)
            extend = full - dev_tokens - host_tokens
            need = extend + host_tokens + min(req.remaining, RESERVE_CAP)
            room = (
                self.available_tokens + self.cache.evictable_tokens() - self._reserved_for_running()
            )
            if need > room and (self.running or batch):
                break
            if extend + host_tokens > self.available_tokens + self.cache.evictable_tokens():
                break  # cannot even hold the prompt: wait for running requests to finish
            self.waiting.popleft()
            # Lock the device hit first, so making room for the host span cannot evict it.
            req.locked = req.keys[: dev_tokens // BLOCK]
            self.cache.lock(req.locked)
            if host_tokens and not self._alloc(host_tokens):
                host_tokens = 0  # no room to load the host copy back: recompute that span instead
                extend = full - dev_tokens
            elif host_tokens:
                # The loaded span becomes device cache (counted there, not as owned tokens).
                self.owned_tokens -= host_tokens
                loaded = req.keys[dev_tokens // BLOCK : (dev_tokens + host_tokens) // BLOCK]
                self.cache.load_back(loaded)
                req.locked += loaded
                self._hicache_copy(host_tokens)  # the load-back
            req.dev_hit, req.host_hit = dev_tokens, host_tokens
            req.prefilled = dev_tokens + host_tokens
            if self.hybrid:
                self.slots_used += self.plan.mamba_slots_held_per_req
            todo = min(extend, budget)
            batch.append((req, todo))
            budget -= todo
            if todo < extend:
                break  # this request continues as the chunked request
        return batch

    def _run_prefill(self, batch: list[tuple[Req, int]]):
        new_tokens = sum(t for _, t in batch)
        cached = sum(
            r.dev_hit + r.host_hit for r, _ in batch if r.prefilled == r.dev_hit + r.host_hit
        )
        ctx = max(1, sum(r.seq_len for r, _ in batch) // max(1, len(batch)))
        dt = self.speed.prefill(new_tokens, ctx)
        loading = [r for r, _ in batch if r.prefilled == r.dev_hit + r.host_hit and r.host_hit]
        host_hit = sum(r.host_hit for r in loading)
        if host_hit:
            # A hybrid model also restores each request's state checkpoint from the host
            # (reference 3.4: plus S_b per restored state).
            states = len(loading) if self.hybrid else 0
            # Load-back overlaps the suffix prefill layer by layer; only the excess shows.
            load = self.speed.host_load(host_hit, states)
            dt = max(dt, load) + 0.1 * min(dt, load)
            self.pcie_rx_bytes += self.speed.host_load_bytes(host_hit, states)
        outs = []
        self.chunked = None
        running_before = len(self.running)
        for req, todo in batch:
            if req.prefilled == req.dev_hit + req.host_hit:
                self.prefill_hits["device_hit"] += req.dev_hit
                self.prefill_hits["host_hit"] += req.host_hit
                # SGLang's "input" mode counts the uncached extend tokens (raw_extend_input_len).
                self.prefill_hits["input"] += req.seq_len - req.dev_hit - req.host_hit
            if not self._alloc(todo):
                # Admission reserved room, so this only happens under retraction churn: make
                # room by retracting decodes, as SGLang does, and take the memory.
                while self.available_tokens < todo and self.running:
                    self._retract(self.running[-1])
                self.owned_tokens += todo
            req.owned += todo
            req.prefilled += todo
            if req.prefilled < req.seq_len:
                self.chunked = req
                continue
            self.running.append(req)
            if req.remaining > 0:
                new = generate(req, 1)
            else:
                req.finish = {"type": "length", "length": req.max_new}
                new = []
            if req.finish:
                self.running.remove(req)
                self._release(req, insert=True)
            outs.append(output(req, new, self.spec))
        self.total_prefill_uncached += new_tokens
        self.total_prefill_busy_s += dt
        self.realtime["prefill_compute"] += new_tokens
        self.realtime["prefill_cache"] += cached
        self.cache_hit_rate = cached / max(1, cached + new_tokens)
        gap = max(dt, self.vclock + dt - self.last_prefill_v) if self.last_prefill_v else dt
        self.last_prefill_v = self.vclock + dt
        self.reporter.log_prefill(
            len(batch), new_tokens, cached, new_tokens / gap if gap > 0 else 0.0, running_before
        )
        self.reporter.snapshot(report=True)
        return dt, outs

    # ---- decode ----------------------------------------------------------------------------------
    def _run_decode(self):
        per_req = self.spec.num_draft_tokens if self.spec else 1
        need = sum(min(per_req, r.remaining) for r in self.running)
        if need > self.available_tokens:
            self.cache.evict(need - self.available_tokens)
        retracted = 0
        old_ratio = self.new_token_ratio
        while need > self.available_tokens and len(self.running) > 1:
            victim = self.running[-1]
            need -= min(per_req, victim.remaining)
            self._retract(victim)
            retracted += 1
        if retracted:
            self.new_token_ratio = min(1.0, self.new_token_ratio + 0.2 * retracted)
            log.info(
                f"KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, "
                f"#new_token_ratio: {old_ratio:.4f} -> {self.new_token_ratio:.4f}"
            )
        batch = len(self.running)
        ctx = sum(r.seq_len for r in self.running)
        dt = self.speed.decode_step(batch, ctx)
        outs = []
        produced = 0
        for req in list(self.running):
            n = 1
            if self.spec:
                n = accept_length(
                    req,
                    self.spec,
                    self.speed.model.accept_chain,
                    self.bad_draft,
                    batch,
                    float(getattr(self.args, "sim_accept_decay", 0.0) or 0.0),
                )
                req.verify_ct += 1
                req.accepted += n - 1
                self.interval_verify += 1
                self.interval_accepted_tokens += n
            n = min(n, req.remaining)
            if not self._alloc(n):
                n = max(0, min(n, self.available_tokens))
                self.owned_tokens += n
            req.owned += n
            new = generate(req, n)
            produced += len(new)
            if req.finish:
                self.running.remove(req)
                self._release(req, insert=True)
            outs.append(output(req, new, self.spec))
        self.new_token_ratio = max(
            self.min_ratio, self.new_token_ratio - (self.init_ratio - self.min_ratio) / 600
        )
        self.decode_steps += 1
        self.interval_tokens += produced
        self.realtime["decode"] += produced
        interval = int(getattr(self.args, "decode_log_interval", 40) or 40)
        if self.decode_steps % interval == 0:
            span = self.vclock + dt - self.interval_start_v
            self.last_gen_throughput = self.interval_tokens / span if span > 0 else 0.0
            if self.spec and self.interval_verify:
                self.spec_accept_length = self.interval_accepted_tokens / self.interval_verify
                self.spec_accept_rate = (self.spec_accept_length - 1) / max(1, self.spec.num_steps)
            self.reporter.log_decode()
            self.interval_tokens = 0
            self.interval_verify = 0
            self.interval_accepted_tokens = 0
            self.interval_start_v = self.vclock + dt
            self.reporter.snapshot(report=True)
        else:
            self.reporter.snapshot(report=False)
        return dt, outs

    def retract_running(self) -> None:
        """Every running request back to the queue (pause_generation's retract mode)."""
        for req in list(self.running):
            self._retract(req)

    def _retract(self, req: Req) -> None:
        self.running.remove(req)
        self._release(req, insert=False)
        req.prefilled = 0
        req.retractions += 1
        self.retracted_total += 1
        self.waiting.appendleft(req)


__all__ = ["Scheduler", "Req"]
