"""Child processes: the scheduler ranks (start-up phases, then the batching loop) and the
detokenizer, started with multiprocessing 'spawn' like SGLang's.

Children die with their parent (PR_SET_PDEATHSIG, as SGLang sets) and a failing scheduler logs
`Scheduler hit an exception:` and sends SIGQUIT to the main process, which then takes the whole
tree down (sglang/srt/entrypoints/engine.py, its SIGQUIT handler), so an agent sees the same failure cascade it would see for real.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from typing import Any

from sgltui.sim.logs import gb, rank_prefix, setup_logging
from sgltui.sim.memory_saver import (
    OffloadTagMissing,
    SchedulerRuntimeError,
    TmsExit,
    scheduler_control,
)

CONTROL = ("pause", "continue", "release", "resume")  # memory_saver.py's messages

log = logging.getLogger("sglang")

_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1


def become_child(title: str) -> None:
    """Die with the parent; show an SGLang-like name in ps/top (comm is 15 bytes at most)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's business
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(title.encode()[:15]))
    except (OSError, AttributeError):
        pass


class _Crash(Exception):
    """--sim-crash-after fired."""


class _SimulatedError(RuntimeError):
    """A failure SGLang would raise here (the message is SGLang's); printed as a RuntimeError."""


class _NoModule(ImportError):
    """A module the scheduler imports is missing (its name); printed as a ModuleNotFoundError."""


class Phases:
    """Plays SGLang's start-up lines with durations from the model, on the scaled clock."""

    def __init__(self, cfg: dict, conn, rank: int):
        self.cfg = cfg
        self.conn = conn
        self.rank = rank
        self.args = cfg["args"]
        self.slow = float(self.args.sim_slow_start or 1.0)
        self.scale = float(self.args.sim_time_scale) * self.slow
        self.crash_at = cfg.get("crash_at")  # monotonic deadline, or None
        self.timings: dict[str, Any] = {}  # seconds per phase; cuda_graph: seconds per graph

    def sleep(self, sim_seconds: float) -> float:
        """Sleep the scaled duration; returns the simulated elapsed time for the log (a slow
        start makes the phase itself longer, so the log shows the longer time)."""
        end = time.monotonic() + sim_seconds * self.scale
        while True:
            left = end - time.monotonic()
            if self.crash_at is not None and time.monotonic() >= self.crash_at:
                raise _Crash()
            if left <= 0:
                return sim_seconds * self.slow
            time.sleep(min(left, 0.05))

    def hang(self) -> None:
        while True:
            if self.crash_at is not None and time.monotonic() >= self.crash_at:
                raise _Crash()
            time.sleep(0.2)

    def phase(self, name: str) -> None:
        if self.rank == 0:
            self.conn.send(("phase", name))

    def run(self) -> None:
        cfg, args = self.cfg, self.args
        plan, model, failure = cfg["plan"], cfg["model"], cfg.get("failure")
        fail, hang = args.sim_fail_at_start, args.sim_hang_in
        pre = cfg["pre_bytes"]
        self.sleep(cfg["t_proc"])
        if fail == "memory-saver" and getattr(args, "enable_memory_saver", False):
            # torch_memory_saver missing or broken in the server's interpreter: SGLang 0.5.23's
            # TorchMemorySaverAdapter.create (the model runner's init) re-raises its import
            # error in the scheduler, so the launch fails; without the saver it is never imported.
            raise _NoModule("torch_memory_saver")
        if fail == "cuda":
            raise _SimulatedError(
                "CUDA error: no CUDA-capable device is detected\nCUDA kernel errors might "
                "be asynchronously reported at some other API call, so the stacktrace below "
                "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
            )
        self.phase("loading weights")
        log.info(f"Load weight begin. avail mem={gb(pre)} GB")
        if hang == "weights":
            self.hang()
        if failure is not None and failure["phase"] == "weights":
            self.sleep(cfg["t_weights"] * 0.7)
            raise _SimulatedError(failure["lines"][-1])
        weights = cfg["weights_bytes"]
        t = self.sleep(cfg["t_weights"])
        self.timings["load_weight"] = t
        log.info(
            f"Load weight end. elapsed={t:.2f} s, type={model.architectures[0]}, "
            f"avail mem={gb(pre - weights)} GB, mem usage={gb(weights)} GB."
        )
        if plan is not None and plan.spec is not None:
            dw = plan.draft_weights_bytes
            log.info(f"Load weight begin. avail mem={gb(pre - weights)} GB")
            t2 = self.sleep(cfg["t_draft"])
            self.timings["load_weight"] += t2
            log.info(
                f"Load weight end. elapsed={t2:.2f} s, type={cfg['draft_arch']}, "
                f"avail mem={gb(pre - weights - dw)} GB, mem usage={gb(dw)} GB."
            )
        self.phase("allocating KV cache")
        if hang == "kv":
            self.hang()
        if failure is not None:
            self.sleep(0.3)
            raise _SimulatedError(failure["lines"][-1])
        t = self.sleep(cfg["t_pools"])
        self.timings["kv_cache_allocation"] = t
        self._pool_lines(plan, model, cfg)
        self.phase("capturing CUDA graphs")
        if hang == "graphs":
            self._graph_begin(plan, "target decode", 1)
            self.hang()
        if fail == "oom":
            self._graph_begin(plan, "target decode", 1)
            self.sleep(cfg["t_graphs"] * 0.3)
            free = plan.available_after_pools
            raise _SimulatedError(
                f"Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                f"capacity of {plan.gpu_total_bytes / (1 << 30):.2f} GiB of which {max(0, free) / (1 << 30) * 0.1:.2f}"
                " GiB is free.\nPossible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)"
                "\n2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n3. disable decode CUDA graph by "
                "--cuda-graph-backend-decode=disabled.\nOpen an issue on GitHub "
                "https://github.com/sgl-project/sglang/issues/new/choose"
            )
        graphs = self._graphs(plan, cfg)
        self.timings["cuda_graph"] = graphs
        if self.rank == 0:
            log.info(
                f"max_total_num_tokens={plan.max_total_num_tokens}, chunked_prefill_size="
                f"{plan.chunked_prefill_size}, max_prefill_tokens={plan.max_prefill_tokens}, "
                f"max_running_requests={plan.max_running_requests}, context_len={plan.context_len}, "
                f"available_gpu_mem={gb(plan.available_after_pools - plan.graph_bytes)} GB"
            )

    def _pool_lines(self, plan, model, cfg) -> None:
        pre = cfg["pre_bytes"]
        if plan.mamba_slots:
            s_b = plan.state_bytes_per_slot
            conv_share = cfg["conv_share"]
            base = (plan.mamba_slots + 1) * s_b
            extra = ""
            if plan.spec is not None:
                inter = plan.mamba_pool_bytes - base
                extra = (
                    f" intermediate_ssm_state_cache size: {gb(inter * (1 - conv_share))}GB "
                    f"intermediate_conv_window_cache size: {gb(inter * conv_share)}GB "
                )
            log.info(
                f"Mamba Cache is allocated. max_mamba_cache_size: {plan.mamba_slots}, conv_state size: "
                f"{gb(base * conv_share)}GB, ssm_state size: {gb(base * (1 - conv_share))}GB{extra}"
            )
        half = plan.kv_pool_bytes / 2
        log.info(
            f"KV Cache is allocated. dtype: {cfg['kv_dtype']}, #tokens: {plan.max_total_num_tokens}, "
            f"K size: {gb(half)} GB, V size: {gb(half)} GB"
        )
        if plan.draft_kv_bytes:
            dh = plan.draft_kv_bytes / 2
            log.info(
                f"draft KV Cache is allocated. dtype: {cfg['kv_dtype']}, #tokens: "
                f"{plan.max_total_num_tokens}, K size: {gb(dh)} GB, V size: {gb(dh)} GB"
            )
        for w in plan.warnings:
            if (
                not w.startswith("Max running requests is reset")
                and not w.startswith("HiCache")
                and not w.startswith("speculative_num_draft")
            ):
                log.warning(w)
        if plan.hicache_host_tokens:
            log.info(
                f"Allocating kv hierarchical KV host pool: {plan.hicache_host_tokens} tokens, "
                f"{plan.hicache_host_bytes / 1e9:.2f} GB host memory."
            )
            if plan.hicache_state_host_bytes:
                log.info(
                    f"Allocating mamba hierarchical host pool: "
                    f"{plan.hicache_state_host_bytes / 1e9:.2f} GB host memory."
                )
            for w in plan.warnings:
                if w.startswith("HiCache"):
                    log.warning(w)
        log.info(f"Memory pool end. avail mem={gb(plan.available_after_pools)} GB")
        del pre

    def _graph_begin(self, plan, label: str, per_req: int) -> None:
        log.info(
            f"Capture {label} CUDA graph begin. backend=full, num_tokens_per_req={per_req}, "
            f"avail mem={gb(plan.available_after_pools)} GB"
        )

    def _graphs(self, plan, cfg) -> dict[str, float]:
        sets = [("target decode", 1, "decode")]
        if plan.spec is not None:
            sets = [
                ("target verify", plan.spec.num_draft_tokens, "target_verify"),
                ("draft decode", plan.spec.eagle_topk, "draft"),
                ("draft extend", plan.spec.num_steps + 1, "draft_extend"),
            ]
        out = {}
        avail = plan.available_after_pools
        per_set = plan.graph_bytes / len(sets)
        for label, per_req, key in sets:
            self._graph_begin(plan, label, per_req)
            t = self.sleep(cfg["t_graphs"] / len(sets))
            avail -= per_set
            log.info(
                f"Capture {label} CUDA graph end. bs={plan.cuda_graph_bs}, elapsed={t:.2f} s, "
                f"mem usage={gb(per_set)} GB, avail mem={gb(avail)} GB."
            )
            out[key] = t
        return out


def scheduler_main(conn, cfg: dict, rank: int) -> None:
    """Entry point of a scheduler rank (runs in a spawned child)."""
    args = cfg["args"]
    tp = int(args.tp_size or 1)
    suffix = f"_TP{rank}" if tp > 1 else ""
    become_child(f"sglang::scheduler{suffix}")
    setup_logging(rank_prefix(rank, tp), args.log_level)
    phases = Phases(cfg, conn, rank)
    try:
        phases.run()
        if rank != 0:
            conn.send(("ready", {}))
            _wait_for_shutdown(conn, phases)
            return
        conn.send(("ready", {"timings": phases.timings}))
        _serve(conn, cfg, phases)
    except _Crash:
        _fail(
            "RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
            "asynchronously reported at some other API call, so the stacktrace below might be incorrect."
        )
    except _SimulatedError as exc:
        _fail(f"RuntimeError: {exc}")
    except _NoModule as exc:
        _fail(f"ModuleNotFoundError: No module named '{exc}'")
    except SchedulerRuntimeError as exc:  # raised while serving (memory_saver.py)
        _fail(f"RuntimeError: {exc}", _SERVING_FRAMES)
    except OffloadTagMissing as exc:  # a resume of a tag never released
        _fail(f"KeyError: {exc.args[0]!r}", _SERVING_FRAMES)
    except AssertionError as exc:  # SGLang's own assertions (a release while requests run)
        _fail(f"AssertionError: {exc}", _SERVING_FRAMES)
    except TmsExit as exc:  # torch-memory-saver's exit(1): its line, no traceback, no SIGQUIT
        sys.stdout.flush()
        print(str(exc), file=sys.stderr, flush=True)
        os._exit(1)
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return
    except Exception:  # noqa: BLE001 - a simulator bug: its traceback, as SGLang reports a rank crash
        _fail(traceback.format_exc().split("\n", 1)[1])


_SGLANG = "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers"
_STARTUP_FRAMES = (
    f'  File "{_SGLANG}/scheduler.py", line 3187, '
    "in run_scheduler_process\n    scheduler = Scheduler(\n"
    f'  File "{_SGLANG}/tp_worker.py", line 241, '
    "in __init__\n    self.model_runner = ModelRunner(\n"
)
_SERVING_FRAMES = (
    f'  File "{_SGLANG}/scheduler.py", line 3201, in run_scheduler_process\n'
    "    scheduler.event_loop_overlap()\n"
    f'  File "{_SGLANG}/scheduler.py", line 2034, in event_loop_overlap\n'
    "    self.process_input_requests(recv_reqs)\n"
    f'  File "{_SGLANG}/scheduler_components/weight_updater.py", line 339, '
    "in memory_occupation\n    output = self._request_dispatcher(recv_req)\n"
)


def _fail(last: str, frames: str = _STARTUP_FRAMES) -> None:
    tb = "Traceback (most recent call last):\n" + frames + last
    log.error(f"Scheduler hit an exception: {tb}")
    sys.stdout.flush()
    try:
        os.kill(os.getppid(), signal.SIGQUIT)
    except ProcessLookupError:
        pass
    os._exit(1)


def _unbatch(msg: tuple) -> list[tuple]:
    """The main process coalesces messages queued during a write into ("batch", [...])."""
    return list(msg[1]) if msg[0] == "batch" else [msg]


class _Inbox:
    """The scheduler's inbound pipe, read by a thread of its own: requests keep being taken off
    the pipe while the scheduler loop is blocked writing tokens to a main process that is busy,
    so neither side can end up blocked on a full pipe waiting for the other."""

    EOF = ("eof",)

    def __init__(self, conn):
        self.conn = conn
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="sim-recv", daemon=True).start()

    def _run(self) -> None:
        try:
            while True:
                for m in _unbatch(self.conn.recv()):
                    self._q.put(m)
        except (EOFError, OSError, ValueError):
            self._q.put(self.EOF)

    def get(self, timeout: float) -> tuple | None:
        """The next message, waiting up to `timeout` (0: do not wait); None if there is none."""
        try:
            return self._q.get(timeout=timeout) if timeout > 0 else self._q.get_nowait()
        except queue.Empty:
            return None


class _Flushes:
    """`/flush_cache?timeout=S` as SGLang's flush wrapper runs it: inside the scheduler loop,
    flushing once the scheduler is fully idle (requests and hicache copies), or answering False
    when the timeout passes first (0: now or never)."""

    def __init__(self, conn, sched) -> None:
        self.conn, self.sched = conn, sched
        self.pending: dict[int, float] = {}  # flush id -> deadline (monotonic)

    def add(self, fid: int, timeout: float) -> None:
        self.pending[fid] = time.monotonic() + max(0.0, timeout)
        self.check()

    def check(self) -> None:
        if not self.pending:
            return
        now = time.monotonic()
        for fid, deadline in list(self.pending.items()):
            if self.sched.fully_idle:
                ok = self.sched.flush_cache()
            elif now >= deadline:
                ok = False
            else:
                continue
            del self.pending[fid]
            self.conn.send(("flush_result", (fid, ok)))


def _wait_for_shutdown(conn, phases: Phases) -> None:
    while True:
        if conn.poll(0.5):
            if any(m[0] == "shutdown" for m in _unbatch(conn.recv())):
                return
        if phases.crash_at is not None and time.monotonic() >= phases.crash_at:
            raise _Crash()


def _serve(conn, cfg: dict, phases: Phases) -> None:
    from sgltui.sim.scheduler import Scheduler
    from sgltui.sim.speed import SpeedModel

    args, plan, model = cfg["args"], cfg["plan"], cfg["model"]
    speed = SpeedModel(cfg["gpu"], model, plan, int(args.tp_size or 1))

    def emit(kind, payload):
        conn.send((kind, payload))

    sched = Scheduler(
        plan, speed, args, emit, model.is_hybrid, int(args.sim_seed), model.stop_mean_tokens
    )
    sched.warmup_extra_s = cfg["t_warmup"] * (float(args.sim_slow_start or 1.0))
    if args.sim_hang_in == "warmup":
        sched.warmup_extra_s = float("inf")
    sched.reporter.snapshot(report=False)
    inbox = _Inbox(conn)  # from here on only the inbox thread reads conn; this thread writes
    flushes = _Flushes(conn, sched)
    last_idle_refresh = time.monotonic()
    while True:
        if phases.crash_at is not None and time.monotonic() >= phases.crash_at:
            raise _Crash()
        was_idle = sched.idle or sched.paused
        timeout = 0.0 if not was_idle else 0.5
        if was_idle and (flushes.pending or (sched.hicache_ops and not sched.paused)):
            timeout = 0.01  # a flush waits for idle, copies in flight finish: look again soon
        while (msg := inbox.get(timeout)) is not None:
            timeout = 0.0
            kind = msg[0]
            if kind == "add":
                sched.add(msg[1])
            elif kind == "abort":
                sched.abort(msg[1])
            elif kind == "flush":
                flushes.add(msg[1], msg[2])
            elif kind == "shutdown":
                return
            elif kind in CONTROL:
                conn.send(("control_result", scheduler_control(sched, msg)))
            elif msg is _Inbox.EOF:
                raise EOFError
        if not sched.paused:
            sched.drain_hicache()  # the paused loop skips hicache's events (SGLang ~2034)
        flushes.check()
        if was_idle:
            sched.realign()  # work that arrives after a pause starts on the current clock
        if sched.idle or sched.paused:
            sched.reporter.snapshot(report=False)
            if sched.reporter.gauges_stale or time.monotonic() - last_idle_refresh > 30:
                sched.reporter.idle_refresh()
                last_idle_refresh = time.monotonic()
            continue
        if sched.warmup_extra_s == float("inf"):
            phases.hang()
        if sched.tms_paused:
            # A released server that runs a batch reads memory torch-memory-saver unmapped.
            raise SchedulerRuntimeError(
                "CUDA error: an illegal memory access was encountered (a forward pass while "
                f"the memory saver's {', '.join(sorted(sched.tms_paused))} memory is released)"
                "\nCUDA kernel errors might be asynchronously reported at some other API call, "
                "so the stacktrace below might be incorrect."
            )
        if not sched.step():
            sched.reject_unfittable()
            time.sleep(0.01)
        last_idle_refresh = time.monotonic()


def detokenizer_main(conn) -> None:
    """SGLang's detokenizer is a process of its own; here it only holds its place in the tree."""
    become_child("sglang::detokenizer")
    try:
        while True:
            if conn.poll(1.0):
                if conn.recv()[0] == "shutdown":
                    return
    except (EOFError, KeyboardInterrupt):
        return
