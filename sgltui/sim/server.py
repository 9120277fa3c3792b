"""`python -m sgltui.sim`: the main process (HTTP server + tokenizer side), as SGLang's launcher.

Start-up: validate flags and model -> log server_args -> spawn scheduler ranks and a detokenizer
-> wait for the schedulers' start-up phases -> bind HTTP -> warm up through our own /generate ->
"The server is fired up and ready to roll!". Signals follow SGLang 0.5.23: SIGTERM before the
HTTP server exists kills at once (Python's default), after the first request it drains; SIGINT
stops HTTP and SIGKILLs the children; SIGQUIT from a failing child takes the whole tree down.
The HTTP endpoints are sim/http_api.py (with http_info.py, http_admin.py); the /server_info and
/v1/loads bodies sim/server_info.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from sgltui.sim import deprecations, startup_times
from sgltui.sim.cli import parse_args
from sgltui.sim.gpu_publish import GpuPublisher
from sgltui.sim.hardware import get_gpu
from sgltui.sim.logs import setup_logging
from sgltui.sim.memory import (
    StartupFailure,
    parse_context_length,
    plan_memory,
)
from sgltui.sim.memory_saver import MemorySaver
from sgltui.sim.models import ModelNotFound, resolve_draft, resolve_model

if TYPE_CHECKING:  # imported lazily at run time: the engine and aiohttp load only once needed
    from aiohttp import web

    from sgltui.sim.engine import Engine
    from sgltui.sim.memory import MemoryPlan
    from sgltui.sim.metrics import SimMetrics
    from sgltui.sim.models import ModelSpec

log = logging.getLogger("sglang")

KNOWN_SPEC = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
_FAKE_FRAME = (
    "<frame at 0x7f3a2c1d5a40, file '/usr/lib/python3.12/selectors.py', line 468, code select>"
)


def _traceback_exit(last_line: str, where: str = "sglang/srt/server_args.py", code: int = 1) -> int:
    """Print an uncaught-exception traceback the way SGLang's launcher dies on bad input."""
    sys.stdout.flush()
    sys.stderr.write(
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py", line 32, in <module>\n'
        "    server_args = prepare_server_args(sys.argv[1:])\n"
        f'  File "/usr/local/lib/python3.12/dist-packages/{where}", line 5120, in __post_init__\n'
        "    self._handle_args()\n" + last_line + "\n"
    )
    sys.stderr.flush()
    return code


def _check_flags(args, model) -> str | None:
    """SGLang's start-up compatibility rules (ServerArgs.check_server_args) the simulator can hit."""
    if args.enable_hierarchical_cache and args.disable_radix_cache:
        return (
            "ValueError: The arguments enable-hierarchical-cache and disable-radix-cache are mutually "
            "exclusive and cannot be used at the same time. Please use only one of them."
        )
    algo = args.speculative_algorithm
    if algo and str(algo).upper() not in KNOWN_SPEC:
        return f"ValueError: Unknown speculative algorithm name: {algo}"
    if algo and str(algo).upper() == "DFLASH" and not args.speculative_draft_model_path:
        return "ValueError: DFLASH speculative decoding requires setting --speculative-draft-model-path."
    if (
        algo
        and str(algo).upper() in ("EAGLE", "EAGLE3", "STANDALONE")
        and not args.speculative_draft_model_path
        and not model.mtp_layers
    ):
        return (
            f"ValueError: {str(algo).upper()} speculative decoding requires setting "
            "--speculative-draft-model-path."
        )
    try:
        ctx = parse_context_length(args.context_length)
    except ValueError:
        return f"ValueError: invalid --context-length {args.context_length!r}"
    if (
        ctx
        and ctx > model.context_length
        and not os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")
    ):
        return (
            f"ValueError: User-specified context_length ({ctx}) is greater than the derived context_length "
            f"({model.context_length}). This may lead to incorrect model outputs or CUDA errors. To allow "
            "overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
        )
    return None


def _server_args_repr(args) -> str:
    items = [f"{k}={v!r}" for k, v in vars(args).items() if not k.startswith("sim_")]
    return "ServerArgs(" + ", ".join(items) + ")"


class SimServer:
    def __init__(self, args, argv: list[str]):
        self.args = args
        self.argv = argv
        self.t0 = time.monotonic()
        self.started_wall = time.time()
        self.scale = float(args.sim_time_scale)
        self.gpu = get_gpu(args.sim_gpu)
        self.model: ModelSpec | None = None
        self.plan: MemoryPlan | None = None
        self.failure: dict[str, Any] | None = None
        self.status = "Starting"
        self.draining = False
        self.paused = False
        self.requests_handled = 0
        self.metrics: SimMetrics | None = None
        self.engine: Engine | None = None
        self.publisher: GpuPublisher | None = None
        self.startup_timings: dict = {}
        self.sim_startup_s = 0.0
        self.ready_at: float | None = None
        self._stop = asyncio.Event()  # binds to the running loop on first use
        self._exit_code = 0
        self._runner: web.AppRunner | None = None
        self._dying = False
        self.draining_done = False  # children are being stopped on purpose from here on
        self.saver = MemorySaver(self)  # release/resume of GPU memory (sim/memory_saver.py)

    # Set by prepare() and run(); everything after start-up may rely on them.
    @property
    def the_model(self) -> ModelSpec:
        assert self.model is not None, "prepare() resolves the model first"
        return self.model

    @property
    def the_plan(self) -> MemoryPlan:
        assert self.plan is not None, "prepare() plans memory first"
        return self.plan

    @property
    def the_engine(self) -> Engine:
        assert self.engine is not None, "run() starts the engine first"
        return self.engine

    @property
    def model_name(self) -> str:
        return self.args.served_model_name or self.args.model_path

    # ---- preparation -------------------------------------------------------------------------
    def prepare(self) -> int | None:
        """Validate and size everything; returns an exit code if start-up ends here."""
        args = self.args
        if not args.model_path:
            sys.stderr.write(
                "Error: --model-path is required. Please provide the path to the model.\n"
            )
            return 1
        self._sleep_scaled(startup_times.MAIN_IMPORTS_S)
        if args.sim_fail_at_start == "model-not-found":
            return self._model_not_found()
        try:
            self.model = resolve_model(args.model_path)
        except ModelNotFound:
            return self._model_not_found()
        problem = _check_flags(args, self.model)
        if problem is None and args.sim_fail_at_start == "flag":
            problem = (
                "ValueError: The arguments enable-hierarchical-cache and disable-radix-cache are mutually "
                "exclusive and cannot be used at the same time. Please use only one of them."
            )
        if problem:
            log.info(f"server_args={_server_args_repr(args)}")
            return _traceback_exit(problem)
        log.info(f"server_args={_server_args_repr(args)}")
        draft = None
        if args.speculative_algorithm:
            draft = resolve_draft(
                args.speculative_algorithm, self.model, args.speculative_draft_model_path
            )
        try:
            self.plan = plan_memory(
                args, self.gpu, self.model, draft, args.sim_host_memory_gb * 1e9
            )
        except StartupFailure as exc:
            if exc.phase == "args":
                return _traceback_exit(
                    "\n".join(exc.lines[1:]) if len(exc.lines) > 1 else exc.lines[-1]
                )
            self.failure = {"lines": exc.lines, "phase": exc.phase}
        if self.plan is not None:
            for w in self.the_plan.warnings:
                if w.startswith("Max running requests is reset") or w.startswith(
                    "speculative_num_draft"
                ):
                    log.warning(w)
        return None

    def _model_not_found(self) -> int:
        path = self.args.model_path
        return _traceback_exit(
            f"OSError: {path} is not a local folder and is not a valid model identifier listed on "
            "'https://huggingface.co/models'\nIf this is a private repository, make sure to pass a token having "
            "permission to this repo either by logging in with `hf auth login` or by passing `token=<your_token>`",
            where="transformers/utils/hub.py",
        )

    def _sleep_scaled(self, sim_seconds: float) -> None:
        t = sim_seconds * self.scale * float(self.args.sim_slow_start or 1.0)
        if t > 0:
            time.sleep(t)

    def child_config(self) -> dict:
        args, plan, model = self.args, self.plan, self.the_model
        tp = int(args.tp_size or 1)
        weights = plan.weights_bytes if plan else model.weights_bytes / tp
        kv_dtype = (
            "torch.float8_e4m3fn"
            if str(args.kv_cache_dtype or "").startswith("fp8")
            else "torch.bfloat16"
        )
        conv_share = 0.0
        if model.is_hybrid:
            conv = (
                (2 * model.lin_k_heads * model.lin_k_dim + model.lin_v_heads * model.lin_v_dim)
                * (model.conv_kernel - 1)
                * 2
            )
            conv_share = conv / max(1, model.state_bytes_per_slot(1) / model.linear_layers)
        graphs = len(plan.cuda_graph_bs) * (3 if plan.spec else 1) if plan else 0
        host = (plan.hicache_host_bytes + plan.hicache_state_host_bytes) if plan else 0
        pools = (plan.kv_pool_bytes + plan.mamba_pool_bytes + plan.draft_kv_bytes) if plan else 0
        crash_at = None
        if args.sim_crash_after is not None:
            crash_at = self.t0 + float(args.sim_crash_after)
        return {
            "args": args,
            "plan": plan,
            "model": model,
            "gpu": self.gpu,
            "failure": self.failure,
            "pre_bytes": self.gpu.total_bytes - int(0.6 * (1 << 30)),
            "weights_bytes": weights,
            "draft_arch": "Qwen3_5MTP"
            if (plan and plan.spec and plan.spec.draft.kind == "mtp")
            else "LlamaForCausalLMEagle3",
            "kv_dtype": kv_dtype,
            "conv_share": conv_share,
            "t_proc": startup_times.SCHEDULER_INIT_S,
            "t_weights": startup_times.weights_s(model.weights_bytes / tp),
            "t_draft": startup_times.draft_s(plan.draft_weights_bytes)
            if plan and plan.spec
            else 0.0,
            "t_pools": startup_times.pools_s(pools, host),
            "t_graphs": startup_times.graphs_s(graphs),
            "t_warmup": startup_times.WARMUP_S,
            "crash_at": crash_at,
        }

    # ---- running ------------------------------------------------------------------------------
    async def run(self) -> int:
        from sgltui.sim.engine import Engine
        from sgltui.sim.metrics import SimMetrics

        loop = asyncio.get_running_loop()
        cfg = self.child_config()
        if self.args.enable_metrics and self.plan is not None:
            self.metrics = SimMetrics(
                self.model_name,
                int(self.args.tp_size or 1),
                self.the_model.is_hybrid,
                bool(self.args.enable_hierarchical_cache),
                self.the_plan.spec,
            )
        self.engine = Engine(cfg, on_stats=self._on_stats, on_request_done=self._on_request_done)
        self.the_engine.on_phase = self._on_phase
        self.publisher = publisher = GpuPublisher(
            self.gpu,
            int(self.args.tp_size or 1),
            int(self.args.port),
            getattr(self.args, "simulated_gpus", None),
            os.environ.get("CUDA_VISIBLE_DEVICES"),
        )
        publisher.plan = self.plan
        publisher.adjust = self.saver.breakdown
        publisher.backup_bytes = self.saver.host_bytes
        loop.add_signal_handler(signal.SIGQUIT, self._on_sigquit)
        loop.add_signal_handler(signal.SIGINT, self._on_sigint)
        self.the_engine.start()
        pub = asyncio.create_task(self._publish_loop())
        try:
            ready = await self.the_engine.wait_ready()
            if self._dying:
                await asyncio.Event().wait()
            code = await self._serve(ready)
        finally:
            pub.cancel()
            self.publisher.remove()
        return code

    async def _serve(self, ready: dict) -> int:
        args = self.args
        timings = ready.get("timings", {})
        # Simulated seconds, as the real server would report them (wall time / scale would
        # include this machine's process start-up overheads, magnified).
        sched_e2e = (
            startup_times.MAIN_IMPORTS_S
            + startup_times.SCHEDULER_INIT_S
            + timings.get("load_weight", 0.0)
            + timings.get("kv_cache_allocation", 0.0)
            + sum(timings.get("cuda_graph", {}).values())
        )
        graphs = ", ".join(f"{k}={v:.2f}" for k, v in timings.get("cuda_graph", {}).items())
        self.sim_startup_s = (
            sched_e2e + 0.4 + (0.0 if args.skip_server_warmup else startup_times.WARMUP_S)
        )
        self.startup_timings = {
            "load_weight": timings.get("load_weight", 0.0),
            "kv_cache_allocation": timings.get("kv_cache_allocation", 0.0),
            "cuda_graph": timings.get("cuda_graph", {}),
        }
        log.info(
            f"Engine startup timings (s): load_weight={timings.get('load_weight', 0.0):.2f}, "
            f"kv_cache_allocation={timings.get('kv_cache_allocation', 0.0):.2f}, "
            f"scheduler_e2e={sched_e2e:.2f}, "
            f"cuda_graph={{{graphs}}}, tokenizer_e2e={sched_e2e + 0.4:.2f}"
        )
        if self.metrics is not None:
            self.metrics.set_constants(self.plan, self.startup_timings)
        self._on_phase("warming up")
        if args.sim_fail_at_start == "port":
            log.error(
                f"ERROR:    [Errno 98] error while attempting to bind on address ('{args.host}', {args.port}): "
                "address already in use"
            )
            self.the_engine.kill_children()
            return 1
        from aiohttp import web

        from sgltui.sim.http_api import Api

        self._runner = runner = web.AppRunner(
            Api(self).app(), access_log=None, handle_signals=False
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, args.host, int(args.port)).start()
        except OSError as exc:
            log.error(f"ERROR:    {exc}")
            self.the_engine.kill_children()
            await runner.cleanup()
            return 1
        log.info(f"INFO:     Started server process [{os.getpid()}]")
        log.info("INFO:     Waiting for application startup.")
        log.info("INFO:     Application startup complete.")
        log.info(
            f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)"
        )
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._on_sigterm)
        if not args.skip_server_warmup:
            ok = await self._warmup()
            if not ok:
                return 0
        self.status = "Up"
        self.ready_at = time.monotonic()
        self._on_phase("ready")
        log.info("The server is fired up and ready to roll!")
        await self._stop.wait()
        return self._exit_code

    async def _warmup(self) -> bool:
        import aiohttp

        args = self.args
        host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        url = f"http://{host}:{args.port}"
        headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
        # SGLANG_WARMUP_TIMEOUT (-1 -> 600 s), scaled like every other simulated wait.
        limit = float(os.environ.get("SGLANG_WARMUP_TIMEOUT", "-1"))
        limit = 600.0 if limit < 0 else limit
        if self.scale > 0:
            limit *= min(1.0, self.scale)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=limit)) as session:
                async with session.get(url + "/model_info", headers=headers) as r:
                    r.raise_for_status()
                body = {
                    "text": "The capital city of France is",
                    "sampling_params": {"temperature": 0, "max_new_tokens": 8},
                }
                async with session.post(url + "/generate", json=body, headers=headers) as r:
                    r.raise_for_status()
                    await r.read()
            return True
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
            # Any failure is SGLang's "warmup error" and kills the server.
            kind = "TimeoutError" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__
            log.error(
                f"Initialization failed. warmup error: Traceback (most recent call last):\n"
                f'  File "sglang/srt/entrypoints/http_server.py", line 1712, in _execute_server_warmup\n'
                f"{kind}: {exc or 'warmup request did not finish within ' + str(round(limit, 1)) + ' s'}"
            )
            self._kill_tree()
            return False

    # ---- events from the engine ---------------------------------------------------------------------
    def _on_phase(self, phase: str) -> None:
        if self.publisher is None:
            return
        self.publisher.phase = phase
        self.publisher.phase_started = time.monotonic()
        if phase == "loading weights":
            cfg_weights = startup_times.weights_s(
                self.the_model.weights_bytes / int(self.args.tp_size or 1)
            )
            self.publisher.phase_expected_s = max(
                1e-3, cfg_weights * self.scale * float(self.args.sim_slow_start or 1)
            )
        # NVML shows memory as it is taken: publish at every phase, not only on the next tick, so a
        # reader right after ready sees the weights (a test once read the pre-load document).
        self.publisher.write(self.the_engine.pids, self.the_engine.stats)

    def _on_stats(self, stats: dict) -> None:
        if self.metrics is not None:
            self.metrics.on_stats(stats)

    def _on_request_done(self, st) -> None:
        now = time.monotonic()
        if self.metrics is None:
            return
        ttft = (st.first_token_at - st.created) if st.first_token_at else None
        self.metrics.on_request_done(
            st.streaming,
            ttft,
            st.itls,
            now - st.created,
            st.prompt_tokens,
            len(st.output_ids),
            (st.meta.get("cached_tokens_details") or {}),
            (st.finish or {}).get("type") == "abort",
            st.meta.get("spec_verify_ct", 0),
        )

    async def _publish_loop(self) -> None:
        """Once a second: publish the simulated GPU, and notice children that died on their own."""
        publisher = self.publisher
        assert publisher is not None, "run() makes the publisher first"
        while True:
            publisher.write(self.the_engine.pids, self.the_engine.stats)
            dead = self.the_engine.check_children()
            if dead and not self._dying and not self.draining_done:
                name, pid, code = dead
                log.error(
                    f"Subprocess {name} (pid={pid}) crashed with exit code {code}. "
                    "Triggering SIGQUIT for cleanup..."
                )
                os.kill(os.getpid(), signal.SIGQUIT)
            await asyncio.sleep(1.0)

    # ---- signals -------------------------------------------------------------------------------------
    def _kill_tree(self) -> None:
        """kill_process_tree(own pid, include_parent=True): children, then ourselves, by SIGKILL."""
        self._dying = True
        if self.publisher is not None:
            self.publisher.remove()
        sys.stdout.flush()
        self.the_engine.kill_children()
        os.kill(os.getpid(), signal.SIGKILL)

    def _on_sigquit(self) -> None:
        if self._dying:
            return
        if self.status == "Starting" and self.ready_at is None:
            log.error("Received sigquit from a child process. It usually means the child failed.")
        else:
            log.error(
                f"SIGQUIT received. signum={int(signal.SIGQUIT)}, frame={_FAKE_FRAME}. "
                "It usually means one child failed."
            )
        self._kill_tree()

    def _on_sigint(self) -> None:
        if self._runner is None:
            # Still loading: KeyboardInterrupt in the launcher, whose finally kills the children.
            self.the_engine.kill_children()
            if self.publisher is not None:
                self.publisher.remove()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
            return
        asyncio.get_running_loop().create_task(self._stop_http_then_kill())

    async def _stop_http_then_kill(self) -> None:
        if self.draining_done:
            return  # a second Ctrl-C while the first is still stopping
        self.draining_done = True
        log.info("INFO:     Shutting down")
        if self._runner is not None:
            await self._runner.cleanup()
        self.the_engine.kill_children()
        self._exit_code = 0
        self._stop.set()

    def _on_sigterm(self) -> None:
        if self.draining:
            return
        if self.requests_handled == 0:
            # uvicorn's own handler: nothing was ever in flight, stop and kill the children.
            asyncio.get_running_loop().create_task(self._stop_http_then_kill())
            return
        if os.environ.get("SGL_FORCE_SHUTDOWN") or self.status == "UnHealthy":
            why = (
                "health check failed" if self.status == "UnHealthy" else "SGL_FORCE_SHUTDOWN is set"
            )
            log.info(f"Signal SIGTERM received while {why}. Force exiting.")
            asyncio.get_running_loop().create_task(self._stop_http_then_kill())
            return
        log.info(
            f"SIGTERM received. signum={int(signal.SIGTERM)} frame={_FAKE_FRAME} "
            "Draining requests and shutting down..."
        )
        self.draining = True
        asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        poll = 5.0 * min(1.0, self.scale) if self.scale > 0 else 0.05
        poll = max(0.05, poll)
        while True:
            await asyncio.sleep(poll)
            active = [r for r in self.the_engine.reqs if not r.startswith("HEALTH_CHECK")]
            if not active:
                break
            log.info(
                f"Gracefully exiting... Remaining number of requests {len(active)}. "
                f"Remaining requests remaining_rids={active[:20]}."
            )
        self.draining_done = True
        stuck = await asyncio.get_running_loop().run_in_executor(
            None, self.the_engine.shutdown_children, 15.0
        )
        if stuck:
            log.warning(
                f"Schedulers still alive 15s after ShutdownReq, killing them before they released: {stuck}"
            )
        if self._runner is not None:
            await self._runner.cleanup()
        self._exit_code = 0
        self._stop.set()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    deprecations.print_parse_time_warnings(argv)  # SGLang's parser prints them as it meets them
    args = parse_args(argv)  # argparse prints SGLang's error text and exits 2 itself
    if args.sim_time_scale < 0 or args.sim_slow_start is None or args.sim_slow_start <= 0:
        sys.stderr.write(
            "sglang serve: error: --sim-time-scale must be >= 0 and --sim-slow-start > 0\n"
        )
        return 2
    setup_logging("", args.log_level)
    for line in deprecations.resolve(args):
        log.warning(line)
    server = SimServer(args, argv)
    code = server.prepare()
    if code is not None:
        return code
    try:
        return asyncio.run(server.run())
    except KeyboardInterrupt:
        return 130


__all__ = ["main", "SimServer"]
