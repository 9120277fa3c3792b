"""One server slot: a GPU set + port that runs at most one SGLang server at a time.

States (agent/slot/lifecycle.py): stopped -> launching(phase) -> ready -> draining -> stopping ->
stopped, launching -> failed(cause), ready -> crashed(cause). The slot spawns the server, tails
its log file for phases and the ready line, probes readiness, notices exits and hangs, and stops
the whole process tree. It does not decide *what* to run: the supervisor sequences commands.

Three parts: the slot's state, its transitions and views (agent/slot/core.py SlotCore); the
server's processes: spawn, log relay, tree, kill, reap (agent/slot/server_process.py); and, here, the
sequences that drive the one through the other: launch, adopt, hand over, watch, stop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sgltui import protocol
from sgltui.agent import secret_config
from sgltui.agent.slot import discovery, http_probe, launch_check, lifecycle, procs

# The slot's state and views (agent/slot/core.py), and the lifecycle's states: re-exported here.
from sgltui.agent.slot.core import (
    CRASHED,
    DRAINING,
    FAILED,
    IDLE,
    LAUNCHING,
    READY,
    RUNNING,
    STOPPED,
    STOPPING,
    SlotConfig,
    SlotCore,
    SlotHost,
    as_cause,
    redact_argv,
)
from sgltui.agent.slot.server_process import LaunchError, stop_outcome
from sgltui.core import causes, phases, units
from sgltui.core.tasks import spawn

if TYPE_CHECKING:
    from sgltui.agent.slot.resolved import Resolved

__all__ = [
    "CRASHED",
    "DRAINING",
    "FAILED",
    "IDLE",
    "LAUNCHING",
    "READY",
    "RUNNING",
    "STOPPED",
    "STOPPING",
    "LaunchError",
    "Slot",
    "SlotConfig",
    "SlotHost",
    "as_cause",
]

log = logging.getLogger("sgltui.agent.slot")


async def to_the_end(coro: Any) -> Any:
    """Await `coro` to its end even when the caller is cancelled, then pass the cancel on: a
    stop or a spawn cut half-way would leave a slot in `stopping` or a server it does not track
    (issue 29, F1)."""
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            try:
                await task
            except Exception:  # its own failure is logged by whoever awaited it first
                log.exception("an uncancellable step failed after its caller was cancelled")
        raise


class Slot(SlotCore):
    """One slot's server: launched, adopted, watched and stopped through the slot's
    transitions (agent/slot/core.py); its processes are agent/slot/server_process.py's."""

    # ---- launch --------------------------------------------------------------------------------

    @staticmethod
    def validate(profile: Resolved) -> str | None:
        """The first error the flag validator finds in `profile` (one line), before anything stops
        or starts; None when it is valid or the validator is unavailable."""
        return launch_check.validate(profile)

    def precheck(
        self, profile: Resolved, exclude_pids: set[int], skip: frozenset[str] = frozenset()
    ) -> None:
        """Refuse a launch that cannot work before minutes are spent loading it
        (agent/slot/launch_check.py); keeps what the target GPUs use before it."""
        launch_check.check_port(profile, skip)
        self.gpu_baseline = None
        self.gpu_baseline = launch_check.check_gpus(profile, exclude_pids, skip)

    async def launch(self, profile: Resolved, client: str | None, launch_id: str) -> None:
        """Spawn `profile` (the caller ran precheck). Returns once the process exists. The table
        is asked first: a launch it refuses starts nothing. Popen runs in a worker thread and,
        once begun, to its end (a cancel then waits for the process to be tracked)."""
        lifecycle.next_state(self.state, lifecycle.SPAWN)  # raises before anything starts
        await to_the_end(self._launch(profile, client, launch_id))

    async def _launch(self, profile: Resolved, client: str | None, launch_id: str) -> None:
        self.client = client
        self.paused = self.released = self.pinned_once = False  # a new process: awake
        self.profile, self.profile_name = profile, profile.name
        self.server_host, self.port, self.api_key = profile.host, profile.port, profile.api_key
        if self.api_key:
            self.host.add_secret(self.api_key)
        try:
            self.tp_size = int(
                profile.server.get("tp-size") or profile.server.get("tensor-parallel-size") or 1
            )
        except (TypeError, ValueError):
            self.tp_size = 1
        # Secrets go in a 0600 --config file removed once read, never in argv (ps shows argv).
        # "The launch is over" counts only once the spawn has returned: before it, the state is
        # still the previous launch's (not launching), and a spawn slower than the watcher's poll
        # (a loaded machine) had the file removed before the server could read it, which then
        # failed as 'rejected its command-line flags' (seen in CI's fleet pool test).
        spawned: list[bool] = []
        self.command = secret_config.launch_argv(
            profile.profile, self.host.state_dir, lambda: bool(spawned) and self.state != LAUNCHING
        )
        self.command_hash = profile.command_hash()
        self.launch_id = launch_id
        self.proc.log_path = log_path = self.host.server_log_path(launch_id)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update({k: str(v) for k, v in (profile.env or {}).items()})
        env.setdefault(
            "PYTHONUNBUFFERED", "1"
        )  # log lines reach the file (and the phases) as printed
        env[discovery.LAUNCH_MARK] = launch_id  # any agent's discovery knows it is sgltui's
        self._reset_launch()
        try:
            popen = await asyncio.to_thread(self.proc.spawn, self.command, env)
        finally:  # nothing awaits from here to the SPAWN below: the watcher sees it launching
            spawned.append(True)
        self.proc.track(popen)
        self.started_at = time.time()
        self.host.bus.publish(
            protocol.Launch(
                client=client,
                slot=self.id,
                launch_id=launch_id,
                profile=profile.name,
                command=redact_argv(self.command),
                command_hash=self.command_hash,
                log_path=str(log_path),
                pid=popen.pid,
            )
        )
        self.phase = None
        self._fire(lifecycle.SPAWN, f"launching {profile.name}")
        self._set_phase(phases.SPAWNED)
        self._monitor = spawn(self._watch(), f"slot-{self.id}-watch")

    def hand_over(self) -> dict:
        """Let another slot object take this ready server over, running (a warm swap moves a
        server between a slot and a standby's own slot: agent/swap/standby.py): stop watching it and
        forget it, without a state event (the taker's swap says what happened)."""
        record = self.record()
        assert record is not None and self.state == READY, "only a ready server is handed over"
        if self._monitor and not self._monitor.done():
            self._monitor.cancel()
        handed = {"record": record, "popen": self.proc.hand_over(), "profile": self.profile}
        self.state = STOPPED
        return handed

    def take_over(self, handed: dict) -> None:
        """Watch a server another slot object handed over (hand_over), ready as it was."""
        assert self.state == STOPPED, "a slot takes a server over only when it has none"
        if not self.adopt(handed["record"], handed["profile"]):
            raise LaunchError(
                causes._cause("exit", "the server handed over is gone", [], "start it again", None)
            )
        self.proc.take_popen(handed["popen"])  # still our child: reaped when it ends
        self.host.bus.changed()
        self._changed.set()

    def adopt(self, record: dict, profile: Resolved | None) -> bool:
        """Take over a server launched by an earlier agent. False when it is gone."""
        if not self.proc.adopt(record["tree"]):
            return False
        self.profile, self.profile_name = profile, record.get("profile")
        self.launch_id, self.proc.log_path = record.get("launch_id"), Path(record["log_path"])
        self.started_at, self.ready_at = record.get("started_at"), record.get("ready_at")
        self.server_host, self.port = (
            record.get("host", "127.0.0.1"),
            int(record.get("port", 30000)),
        )
        self.command, self.command_hash = record.get("command") or [], record.get("command_hash")
        self.tp_size = int(record.get("tp_size") or 1)
        self.paused, self.released = bool(record.get("paused")), bool(record.get("released"))
        self.pinned_once = bool(record.get("pinned_once") or self.released)
        baseline = record.get("gpu_baseline")
        self.gpu_baseline = (
            {int(i): int(b) for i, b in baseline.items()} if isinstance(baseline, dict) else None
        )
        self.api_key = getattr(profile, "api_key", None) if profile else None
        if self.api_key:
            self.host.add_secret(self.api_key)
        # Re-read the whole log to rebuild phase and tail (not pushed again: clients saw it).
        self.proc.rewind_log()
        lines = self.proc.read_new_lines()
        self._tail.extend(lines)
        self.progress.replay(lines, record.get("phase_done") or {})
        self.state = lifecycle.next_state(
            self.state,
            lifecycle.ADOPT_READY if record.get("state") == READY else lifecycle.ADOPT_LAUNCHING,
        )
        if self.state == READY:
            self.phase = None
        self._monitor = spawn(self._watch(), f"slot-{self.id}-watch")
        return True

    def watch_external(
        self,
        external: Any,
        tree: procs.ProcTree | None,
        watch: Any,
        note: str = "",
        log_path: Path | None = None,
    ) -> None:
        """Watch a server sgltui did not start (agent/slot/attach.py): ready at once, `watch` (a
        coroutine) follows it; lifecycle commands are refused while `external` is set. Its log
        file (`log_path`) holds only the note that its lines are not ours."""
        if log_path is not None:
            self.proc.log_path = log_path
        if self.state in (FAILED, CRASHED):
            self._fire(lifecycle.STOPPED_EV, "cleared for an attached server")
        self._reset_launch()
        if note:  # why its log stays empty (the log pane, `sgltui logs`)
            self._tail.append(note)
        self.external = external
        self.proc.watch_tree(tree)
        self.gpu_baseline = None
        self._fire(lifecycle.ADOPT_READY, f"attached {external.url}")
        self._monitor = asyncio.get_running_loop().create_task(watch, name=f"slot-{self.id}-ext")

    # ---- watching ------------------------------------------------------------------------------

    async def _drain_output(self, timeout: float, close: bool = False) -> None:
        """After the server exited: take what the relay still carries (the lines that explain
        the exit), bounded, since an orphan may hold the pipe open; `close` then stops reading
        the relay (the tree is gone)."""
        deadline = time.monotonic() + timeout
        while self.proc.relay_open and time.monotonic() < deadline:
            self._consume(self.proc.read_new_lines())
            if self.proc.relay_open:
                await asyncio.sleep(0.02)
        self._consume(self.proc.read_new_lines())
        self._consume(self.proc.take_partial(close))
        if close:
            self.proc.close_relay()

    async def _watch(self) -> None:
        try:
            await self._watch_loop()
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug here must not leave the slot silently stuck
            log.exception("slot %s watcher failed", self.id)

    async def _watch_loop(self) -> None:
        poll = self.host.config.poll_s
        next_probe = 0.0
        probed_after_line = False
        while True:
            self._consume(self.proc.read_new_lines())
            now = time.monotonic()
            if now - self._last_refresh > 1.0 and self.tree:
                self._last_refresh = now
                await self.proc.refresh()
            exited, rc = self.proc.exit_code()
            if exited:
                if not self._stopping:
                    await self._drain_output(1.0)
                    await self._on_unexpected_exit(rc)
                return
            if self.state == READY and not self._stopping and self.tree is not None:
                self.liveness.tick(
                    now, self.tree.pid, self.server_host, self.port, self.api_key
                )  # fmt: skip
            else:
                self.liveness.reset()
            if self.state == LAUNCHING and not self._stopping:
                # /ready is asked whether or not the ready line was seen: lines may be lost (a
                # full disk under a re-adopted server's log, a relay that fell behind), and a
                # launch must never wait on them. Before the line only the strict /ready counts
                # (an older server's /model_info answers before warm-up).
                seen = self.progress.ready_line_at is not None
                # The ready line makes the next probe due at once (every ms of it is swap time).
                if now >= next_probe or (seen and not probed_after_line):
                    probed_after_line = seen
                    next_probe = now + (0.2 if seen else 0.5)
                    if await http_probe.ready(
                        self.server_host, self.port, self.api_key, fallback=seen
                    ):
                        self._on_ready()
                        continue
                if self._hung(now):
                    continue
            # Fast while launching (every poll is added to the time-to-ready), relaxed after.
            await asyncio.sleep(poll / 5 if self.state == LAUNCHING else poll * 2)

    def _consume(self, lines: list[str]) -> None:
        if not lines:
            return
        for line in lines:
            self._tail.append(line)
            self.host.telemetry_line(self.id, line)
            if self.state == LAUNCHING and (new := self.progress.observe(line)) is not None:
                self._set_phase(new)
        self.host.push_log(self.id, self.launch_id or "", lines)

    def _on_ready(self) -> None:
        self.ready_at = self.progress.finish(self.started_at)
        self.host.record_launch(self.profile_name or "", dict(self.progress.done))
        self._fire(lifecycle.READY_EV, f"{self.profile_name} ready on port {self.port}")

    def _hung(self, now: float) -> bool:
        cause = self.progress.hang(
            now,
            self.host.learned(self.profile_name or ""),
            self.host.config,
            f"{self.server_host}:{self.port}",
            list(self._tail),
        )
        if cause is None:
            return False
        log.warning("slot %s: %s", self.id, cause["summary"])
        self._stopping = True  # the watcher must not report the kill below as a crash
        spawn(self._fail_hung(cause), f"slot {self.id}: ending a hung server")
        return True

    async def _fail_hung(self, cause: dict) -> None:
        # A hung server still holds the GPU and the port: take it down before reporting the
        # failure, so that a rollback started on "failed" finds both free.
        await asyncio.to_thread(self.proc.terminate, self.host.config.force_grace_s)
        self.proc.reap()
        await self._drain_output(0.5, close=True)
        await self._wait_released()
        self._fire(lifecycle.HANG, cause["summary"], cause)

    async def _on_unexpected_exit(self, rc: int | None) -> None:
        cause = causes.classify(rc, list(self._tail))
        was = self.state
        # Children may survive a crashed launcher (reparented to init, still holding VRAM): end them before reporting.
        await self.proc.kill_all()
        self.proc.reap()
        await self._drain_output(0.5, close=True)
        await self._wait_released()
        if was == LAUNCHING:
            self._fire(
                lifecycle.EXIT, f"{self.profile_name} failed to start: {cause['summary']}", cause
            )
        else:
            self._fire(lifecycle.EXIT, f"{self.profile_name} crashed: {cause['summary']}", cause)

    # ---- stopping ------------------------------------------------------------------------------

    async def stop(
        self,
        client: str | None,
        drain: str = "wait",
        timeout: float = 30.0,
        on_step: Callable[[str], None] | None = None,
    ) -> protocol.StopReport:
        """Drain (bounded), SIGTERM, SIGKILL the group after the grace period, verify nothing of the
        tree is left, wait (bounded) for its GPU memory and the port. Returns a report with
        timings and whatever is still held."""
        self.client = client
        step = on_step or (lambda s: None)
        t0 = time.monotonic()
        report = protocol.StopReport()
        if self.tree is None or self.state in (STOPPED,):
            self._stopping = False
            if self.state != STOPPED:
                self._fire(lifecycle.STOPPED_EV, "nothing was running")
            return report
        if self.state == READY and drain == "wait":
            step("draining")
            self._fire(lifecycle.DRAIN, f"waiting up to {timeout:.0f}s for running requests")
            deadline = time.monotonic() + timeout
            said: tuple[int | None, float] = (None, 0.0)
            while not self.proc.exit_code()[0]:
                busy = await self._busy()
                if not busy:
                    break
                if time.monotonic() >= deadline:
                    report.drain_timed_out = True
                    break
                # One line (and one countdown event) when the count changes or every second for
                # the event, every 5 s for the log: not one per 0.1 s poll.
                remaining = max(0.0, deadline - time.monotonic())
                if busy != said[0] or time.monotonic() - said[1] >= 1.0:
                    if busy != said[0] or time.monotonic() - said[1] >= 5.0:
                        log.info(
                            "slot %s: draining, %s requests still running or queued, %.0fs left",
                            self.id,
                            busy,
                            remaining,
                        )
                    said = (busy, time.monotonic())
                    self.draining = {
                        "requests": busy,
                        "left_s": round(remaining, 1),
                        "timeout_s": timeout,
                    }
                    self.host.bus.publish(
                        protocol.SlotDrain(
                            client=self.client,
                            slot=self.id,
                            requests=busy,
                            left_s=round(remaining, 1),
                            timeout_s=timeout,
                        )
                    )
                await asyncio.sleep(0.1)  # cheap to ask; every poll interval is swap latency
            self.draining = None
        report.timings_s["drain"] = round(time.monotonic() - t0, 3)
        # From the SIGTERM on, the stop runs to its end whoever cancels its caller.
        return await to_the_end(self._stop_tree(drain, report, step))

    async def _stop_tree(
        self, drain: str, report: protocol.StopReport, step: Callable
    ) -> protocol.StopReport:
        report.requests_at_sigterm = await self._busy() if not self.proc.exit_code()[0] else 0
        t1 = time.monotonic()
        step("stopping")
        self._stopping = True
        if self.state not in (FAILED, CRASHED, STOPPING):
            self._fire(lifecycle.STOP, "force stop" if drain == "force" else "stop")
        grace = (
            self.host.config.force_grace_s if drain == "force" else self.host.config.stop_grace_s
        )
        loop = asyncio.get_running_loop()
        self.proc.kill = None
        left = await asyncio.to_thread(self.proc.terminate, grace, loop, self._busy)
        self.proc.reap()
        if self._monitor and not self._monitor.done():
            self._monitor.cancel()
        await self._drain_output(1.0, close=True)
        report.timings_s["stop"] = round(time.monotonic() - t1, 3)
        report.left_pids = left
        t2 = time.monotonic()
        step("releasing memory")
        held, port_ok, method = await self._wait_released()
        report.timings_s["memory_release"] = round(time.monotonic() - t2, 3)
        report.gpu_bytes_held, report.port_free = held, port_ok
        report.release_method = method
        problems = []
        if left:
            problems.append(f"processes still alive: {procs.describe(left)}")
        if held:
            problems.append(f"{units.gib(held)} of GPU memory still held (by {method})")
        if not port_ok:
            problems.append(f"port {self.port} still in use")
        report.problems = problems
        report.signal, kill_cause = stop_outcome(self.proc.kill, report)
        reason = {
            "SIGTERM": "stopped (exited on SIGTERM)",
            "SIGKILL": "stopped by SIGKILL"
            if kill_cause
            else "stopped (SIGTERM, leftovers SIGKILLed)",
            None: "stopped (it had already exited)",
        }[report.signal]
        if kill_cause:
            reason += f": {kill_cause['summary']}"
        if problems:
            reason += " but " + "; ".join(problems)
        keep_cause = self.cause if self.state in (FAILED, CRASHED) else kill_cause
        self.last_stop = protocol.StopView(
            at=time.time(),
            launch_id=self.launch_id,
            signal=report.signal,
            drain=drain,
            drain_timed_out=report.drain_timed_out,
            requests_at_sigterm=report.requests_at_sigterm,
            requests_at_sigkill=report.requests_at_sigkill,
            timings_s=dict(report.timings_s),
        )
        self.proc.tree, self.proc.popen = None, None
        self._fire(lifecycle.STOPPED_EV, reason, keep_cause)
        return report

    async def _busy(self) -> int:
        """Requests the server runs or queues, plus those the front passed to it and that have
        not reached it yet (a drain that only asked the server could stop under them)."""
        load = await http_probe.load(self.server_host, self.port, self.api_key)
        front = self.front.in_flight((self.server_host, self.port)) if self.front else 0
        return (load or 0) + front

    async def _wait_released(self) -> tuple[int, bool, str]:
        """Wait (bounded) until the tree's GPU memory is released and the port is free.
        -> (bytes still held, port free, how release was told: gpu.Release.method)."""
        env = getattr(self.profile, "env", None) or {}
        return await self.proc.wait_released(
            self.server_host,
            self.port,
            self.gpu_baseline,
            env.get("CUDA_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES"),
            getattr(self.profile, "launcher", None) == "sim",
            self.host.config.release_timeout_s,
        )

    async def close(self) -> None:
        """Agent shutdown: stop watching, leave the server running."""
        if self._monitor and not self._monitor.done():
            self._monitor.cancel()
            try:
                await self._monitor
            except asyncio.CancelledError:
                pass
            except Exception:  # the watcher's own failure; closing goes on
                log.exception("slot %s: the server watcher failed", self.id)
