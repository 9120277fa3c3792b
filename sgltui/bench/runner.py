"""A benchmark sweep: for each profile swap it in via the agent, wait until it is ready, run each
concurrency (and repeat) in a load-generator process, and keep `bench/<run-id>.json` current.

    python -m sgltui.bench.runner --agent-socket S --session-dir D --run-id R --spec-json J
    python -m sgltui.bench.runner --url URL --session-dir D --run-id R --spec-json J   (no agent)

The agent spawns the first form for `bench_start`; progress goes back as `bench_progress`.
The result file is rewritten (atomically) after every point, so a stopped or crashed run keeps
what it measured. SIGTERM stops the current point, records the run as "stopped" and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sgltui.bench import compare, energy
from sgltui.bench.loadgen import API_KEY_ENV
from sgltui.bench.metrics import clean_json
from sgltui.bench.spec import BenchSpec, SpecError
from sgltui.core import config as env_config
from sgltui.core import provenance
from sgltui.core.files import private_dir, write_json_atomic
from sgltui.core.redact import redact_obj

Progress = Callable[[dict[str, Any]], Awaitable[None] | None]


class RunError(Exception):
    """A profile or point that could not be measured; one line."""


@dataclass
class Target:
    profile: str | None
    base_url: str
    api_key: str | None = None
    command_hash: str | None = None
    capacity: dict | None = None
    server_info: dict | None = None

    @property
    def server_version(self) -> str | None:
        return (self.server_info or {}).get("version")


def _redact(obj: Any, secret: str | None) -> Any:
    return redact_obj(obj, [secret] if secret else [])


async def fetch_server_info(target: Target) -> dict | None:
    return (await probe_server_info(target))[1]


async def probe_server_info(target: Target) -> tuple[int | None, dict | None]:
    """(HTTP status or None when nothing answered, /server_info's JSON when it was 200)."""
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=10.0)) as client:
            resp = await client.get(target.base_url.rstrip("/") + "/server_info", headers=headers)
            if resp.status_code == 404:
                # SGLang's model gateway (a pool's endpoint) answers the older name only, with
                # the info of one of its workers.
                resp = await client.get(
                    target.base_url.rstrip("/") + "/get_server_info", headers=headers
                )
            if resp.status_code != 200:
                return resp.status_code, None
            info = resp.json()
    except httpx.HTTPError:
        return None, None
    except ValueError:
        return 200, None
    return 200, (_redact(info, target.api_key) if isinstance(info, dict) else None)


def auth_error(url: str, status: int, key_sent: bool) -> str:
    """The one line for a server that refused us for want of the right API key."""
    how = f"set {API_KEY_ENV}=KEY or pass --api-key-file FILE (the key is never a flag: ps shows argv)"
    if key_sent:
        return f"the server at {url} refused the API key ({status}); check the key: {how}"
    return f"the server at {url} needs an API key ({status} without one); {how}"


def accept_length(info: dict | None) -> float | None:
    if not info:
        return None
    states = info.get("internal_states") or []
    value = (
        states[0].get("avg_spec_accept_length") if states and isinstance(states[0], dict) else None
    )
    return value if isinstance(value, (int, float)) else None


# ---- agent side ------------------------------------------------------------------------------


def _slot(status: dict, slot_id: str) -> dict | None:
    for slot in status.get("slots") or []:
        if str(slot.get("id")) == slot_id:
            return slot
    return None


def _profile_api_key(name: str, dirs: list[str]) -> str | None:
    from sgltui.core.profiles import ProfileError, get_profile

    try:
        return get_profile(name, [Path(d) for d in dirs]).api_key
    except ProfileError:  # the agent already validated it; no key is the safe default
        return None


def _target_from_slot(slot: dict, profile: str | None, dirs: list[str]) -> Target:
    name = profile or slot.get("profile")
    return Target(
        profile=name,
        base_url=f"http://{slot.get('host') or '127.0.0.1'}:{slot.get('port') or 30000}",
        api_key=_profile_api_key(name, dirs) if name and slot.get("api_key_set") else None,
        command_hash=slot.get("command_hash"),
        capacity=slot.get("capacity"),
    )


async def ensure_ready(client: Any, spec: BenchSpec, profile: str | None) -> Target:
    """Make `profile` the ready server of the spec's slot (start or swap), or raise RunError."""
    status = await client.call("status")
    slot = _slot(status, spec.slot)
    if profile is None:
        if not slot or slot.get("state") != "ready":
            state = slot.get("state") if slot else "absent"
            raise RunError(
                f"slot {spec.slot} is {state}; start a profile first (sgltui start PROFILE) or pass --profile"
            )
        return _target_from_slot(slot, None, spec.profiles_dirs)
    asked_at = time.time()
    if not (slot and slot.get("profile") == profile and slot.get("state") == "ready"):
        if slot is None or slot.get("state") in (None, "stopped", "failed", "crashed"):
            await client.call(
                "start", profile=profile, slot=spec.slot, profiles_dirs=spec.profiles_dirs
            )
        else:
            await client.call(
                "swap", profile=profile, slot=spec.slot, profiles_dirs=spec.profiles_dirs
            )
    deadline = time.monotonic() + spec.ready_timeout
    while True:
        slot = _slot(await client.call("status"), spec.slot) or {}
        state, swap = slot.get("state"), slot.get("swap") or {}
        if (
            slot.get("profile") == profile
            and state == "ready"
            and swap.get("step") in (None, "ready")
        ):
            return _target_from_slot(slot, profile, spec.profiles_dirs)
        # A swap that failed and rolled back leaves the old profile ready with no swap in
        # progress: only last_swap tells, so read it too (or we would wait out ready_timeout).
        last = slot.get("last_swap") or {}
        swap_failed = (
            last.get("to") == profile
            and last.get("ok") is False
            and (last.get("finished_at") or 0) >= asked_at
        )
        if (
            swap_failed
            or swap.get("step") in ("failed", "rolling back")
            or (slot.get("profile") == profile and state in ("failed", "crashed"))
        ):
            cause = (
                ((last.get("cause") if swap_failed else None) or slot.get("cause") or {}).get(
                    "summary"
                )
                or state
                or "failed"
            )
            raise RunError(f"profile {profile} did not come up: {cause}")
        if time.monotonic() > deadline:
            raise RunError(
                f"profile {profile} not ready after {spec.ready_timeout:.0f} s (state {state})"
            )
        await asyncio.sleep(0.5)


# ---- one point -------------------------------------------------------------------------------


class Runner:
    def __init__(
        self,
        spec: BenchSpec,
        out_path: Path,
        run_id: str,
        agent: Any = None,
        on_progress: Progress | None = None,
    ) -> None:
        self.spec = spec
        self.out_path = out_path
        self.run_id = run_id
        self.agent = agent
        self.on_progress = on_progress
        self.records_dir = out_path.parent / run_id
        self.proc: asyncio.subprocess.Process | None = None
        self.stopping = False
        self.cut = False  # a swap the user confirmed over this bench: stop, and no put back
        self.result: dict[str, Any] = {
            "v": 1,
            "run_id": run_id,
            "state": "running",
            "started": time.time(),
            "finished": None,
            "host": socket.gethostname(),
            "spec": spec.to_dict(),
            "results": [],
            "comparison": None,
            "server_info": {},
        }
        self._last_post = 0.0
        self._point = 0

    async def progress(self, force: bool = False, **fields: Any) -> None:
        now = time.monotonic()
        if not force and now - self._last_post < 0.5:
            return
        self._last_post = now
        msg = {"run_id": self.run_id, "points": self.spec.points(), **fields}
        if self.on_progress is not None:
            r = self.on_progress(msg)
            if asyncio.iscoroutine(r):
                await r
        if self.agent is not None:
            from sgltui.client import AgentError

            # Progress is best effort: a lost agent connection must not end the run.
            with contextlib.suppress(AgentError, OSError, asyncio.TimeoutError):
                await self.agent.call("bench_progress", **clean_json(msg))

    def save(self) -> None:
        private_dir(self.out_path.parent)
        write_json_atomic(self.out_path, clean_json(self.result), indent=1)

    async def run_point(self, target: Target, concurrency: int, repeat: int, point: int) -> dict:
        spec = self.spec
        label = f"{target.profile or 'server'}-c{concurrency}-r{repeat}"
        records = self.records_dir / f"{label}.jsonl"
        records.unlink(missing_ok=True)
        cfg = {
            "base_url": target.base_url,
            "concurrency": concurrency,
            "api": spec.api,
            "requests": spec.requests,
            "duration": spec.duration,
            "warmup": spec.warmup,
            "input_len": spec.input_len,
            "output_len": spec.output_len,
            "workload": spec.workload,
            "seed": spec.seed,
            "ignore_eos": spec.ignore_eos,
            "flush_cache": spec.flush_cache,
        }
        env = dict(os.environ)
        env.pop(API_KEY_ENV, None)
        if target.api_key:
            env[API_KEY_ENV] = target.api_key
        self.records_dir.mkdir(parents=True, exist_ok=True)
        stderr_path = records.with_suffix(".stderr")
        with stderr_path.open("wb") as stderr:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sgltui.bench.loadgen",
                "--config-json",
                json.dumps(cfg),
                "--records",
                str(records),
                "--exit-with-parent",
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
            final: dict | None = None
            assert self.proc.stdout is not None
            async for raw in self.proc.stdout:
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if msg.get("type") == "progress":
                    await self.progress(
                        state="running",
                        profile=target.profile,
                        concurrency=concurrency,
                        repeat=repeat,
                        point=point,
                        points=spec.points(),
                        **{
                            k: msg.get(k)
                            for k in (
                                "phase",
                                "done",
                                "failed",
                                "total",
                                "in_flight",
                                "out_tokens",
                                "elapsed",
                            )
                        },
                    )
                else:
                    final = msg
            rc = await self.proc.wait()
        self.proc = None
        if self.stopping:
            raise RunError("stopped")
        if final and final.get("type") == "result":
            stderr_path.unlink(missing_ok=True)
            return {
                "metrics": final["metrics"],
                "requests_path": str(records.relative_to(self.out_path.parent)),
            }
        if final and final.get("type") == "error":
            raise RunError(final["message"])
        tail = (
            stderr_path.read_text(errors="replace").strip().splitlines()[-1:]
            if stderr_path.exists()
            else []
        )
        raise RunError(f"load generator exited with code {rc}" + (f": {tail[0]}" if tail else ""))

    def cut_by_swap(self) -> None:
        """SIGUSR1 from the agent: the slot is being swapped by someone else, so stop and leave
        it to them (swapping back would undo their swap)."""
        self.cut = True
        self.stop()

    def stop(self) -> None:
        self.stopping = True
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    async def run(self) -> dict:
        spec = self.spec
        self.save()
        await self.progress(force=True, state="running", point=0, points=spec.points())
        point = 0
        profiles: list[str | None] = list(spec.profiles) or [None]
        finished = False
        before = await self._serving()
        try:
            for profile in profiles:
                if self.stopping:
                    break
                self._point = point
                try:
                    target = await self._target(profile)
                except RunError as exc:
                    for c in spec.concurrency:
                        for k in range(spec.repeat):
                            point += 1
                            self._add(Target(profile, ""), c, k, error=str(exc))
                    self.save()
                    await self.progress(
                        force=True,
                        state="running",
                        profile=profile,
                        error=str(exc),
                        point=point,
                        points=spec.points(),
                    )
                    continue
                for c in spec.concurrency:
                    for k in range(spec.repeat):
                        if self.stopping:
                            break
                        point += 1
                        await self.progress(
                            force=True,
                            state="running",
                            profile=target.profile,
                            concurrency=c,
                            repeat=k,
                            point=point,
                            points=spec.points(),
                            phase="starting",
                        )
                        t_point = time.time()
                        try:
                            res = await self.run_point(target, c, k, point)
                        except RunError as exc:
                            if self.stopping:
                                break
                            self._add(target, c, k, error=str(exc))
                        else:
                            info = await fetch_server_info(target)
                            if info:
                                target.server_info = info
                            res["metrics"]["accept_length"] = accept_length(info)
                            res["metrics"].update(await self._energy(t_point, res["metrics"]))
                            self._add(target, c, k, **res)
                        self.save()
                self.result["server_info"][target.profile or "server"] = target.server_info
                if target.server_info:  # what produced the numbers: core/provenance.py
                    rec = provenance.record(target.server_info)
                    self.result.setdefault("provenance", {})[target.profile or "server"] = rec
            finished = True
        finally:
            # an unexpected error still leaves a readable file that says the run failed
            self.result["state"] = (
                "stopped" if self.stopping else ("done" if finished else "failed")
            )
            self.result["finished"] = time.time()
            self.result["comparison"] = compare.build(
                self.result["results"], spec.job_completions, spec.job_output_len, spec.output_len
            )
            self.save()
        await self._put_back(before, point)
        await self.progress(
            force=True,
            state=self.result["state"],
            path=str(self.out_path),
            point=point,
            points=spec.points(),
        )
        return self.result

    async def _serving(self) -> str | None:
        """The profile the slot serves before the sweep swaps it (None: nothing ready, a --url
        run, or a sweep of the profile running now only)."""
        if self.spec.url or self.agent is None or not self.spec.profiles:
            return None
        from sgltui.client import AgentError

        with contextlib.suppress(AgentError, OSError, asyncio.TimeoutError):
            slot = _slot(await self.agent.call("status"), self.spec.slot) or {}
            if slot.get("state") == "ready":
                return slot.get("profile")
        return None

    async def _put_back(self, before: str | None, point: int) -> None:
        """A sweep that swapped the slot away from what it served swaps it back, and says so in
        the result (`put_back`, shown by `sgltui bench`, the Bench tab and the Activity pane)."""
        if before is None or self.agent is None or self.cut:
            return
        from sgltui.client import AgentError

        with contextlib.suppress(AgentError, OSError, asyncio.TimeoutError):
            slot = _slot(await self.agent.call("status"), self.spec.slot) or {}
            if slot.get("profile") == before and slot.get("state") == "ready":
                return
        await self.progress(
            force=True, state="running", profile=before, phase=f"putting {before} back", point=point
        )
        put: dict[str, Any] = {"slot": self.spec.slot, "profile": before}
        if self.stopping:  # the agent ends a stopped run within seconds: asked, not waited for
            with contextlib.suppress(AgentError, OSError, asyncio.TimeoutError):
                await self.agent.call(
                    "swap",
                    profile=before,
                    slot=self.spec.slot,
                    profiles_dirs=self.spec.profiles_dirs,
                )
                put["ok"] = None
            self.result["put_back"] = put
            self.save()
            return
        try:
            await ensure_ready(self.agent, self.spec, before)
            put["ok"] = True
        except (RunError, AgentError, OSError, asyncio.TimeoutError) as exc:
            put.update(ok=False, error=str(exc))
        self.result["put_back"] = put
        self.save()

    async def _energy(self, t0: float, metrics: dict) -> dict:
        """The point's GPU energy from the agent's power samples (none for --url runs)."""
        joules = None
        if self.agent is not None and not self.spec.url:
            from sgltui.client import AgentError

            with contextlib.suppress(AgentError, OSError, asyncio.TimeoutError, TypeError):
                reply = await self.agent.call("timeline", series="gpu.*.power_w", since=t0 - 2.0)
                total = [
                    energy.integrate(pts, t0, time.time())
                    for pts in (reply.get("series") or {}).values()
                ]
                known = [j for j in total if j is not None]
                joules = sum(known) if known else None
        return energy.energy_fields(
            joules, int(metrics.get("completed") or 0), int(metrics.get("total_output_tokens") or 0)
        )

    async def _target(self, profile: str | None) -> Target:
        if self.spec.url:
            target = Target(
                profile=None, base_url=self.spec.url, api_key=env_config.bench_api_key()
            )
        else:
            await self.progress(
                force=True, state="running", profile=profile, phase="swapping", point=self._point
            )
            from sgltui.client import AgentError

            try:
                target = await ensure_ready(self.agent, self.spec, profile)
            except (AgentError, OSError, asyncio.TimeoutError) as exc:  # one line per profile
                raise RunError(f"agent: {exc}") from None
        status, target.server_info = await probe_server_info(target)
        if self.spec.url and status in (401, 403):
            raise RunError(auth_error(self.spec.url, status, bool(target.api_key)))
        if target.server_info is None and self.spec.url:
            raise RunError(f"no SGLang server answers at {self.spec.url}/server_info; check --url")
        return target

    def _add(
        self,
        target: Target,
        concurrency: int,
        repeat: int,
        metrics: dict | None = None,
        requests_path: str | None = None,
        error: str | None = None,
    ) -> None:
        self.result["results"].append(
            {
                "profile": target.profile or "server",
                "command_hash": target.command_hash,
                "capacity": target.capacity,
                "server_version": target.server_version,
                "server_info_hash": (
                    provenance.record(target.server_info)["hash"] if target.server_info else None
                ),
                "base_url": target.base_url,
                "concurrency": concurrency,
                "repeat": repeat,
                "metrics": metrics,
                "requests_path": requests_path,
                "error": error,
            }
        )


async def run_sweep(
    spec: BenchSpec,
    out_path: Path,
    run_id: str,
    agent: Any = None,
    on_progress: Progress | None = None,
) -> dict:
    """Run a whole sweep in this process (load points still run in their own processes)."""
    runner = Runner(spec, out_path, run_id, agent, on_progress)
    loop = asyncio.get_running_loop()
    handlers = {signal.SIGTERM: runner.stop, signal.SIGINT: runner.stop}
    handlers[signal.SIGUSR1] = runner.cut_by_swap
    for sig, handler in handlers.items():
        try:
            loop.add_signal_handler(sig, handler)
        except (NotImplementedError, RuntimeError):
            pass
    return await runner.run()


def load_result(path: Path) -> dict:
    """A run file, with its comparison rebuilt from the stored results (for `bench compare`)."""
    data = json.loads(Path(path).read_text())
    spec = data.get("spec") or {}
    data["comparison"] = compare.build(
        data.get("results") or [],
        spec.get("job_completions"),
        spec.get("job_output_len"),
        spec.get("output_len"),
    )
    return data


async def _main_async(args: argparse.Namespace, spec: BenchSpec) -> int:
    out_path = Path(args.session_dir) / "bench" / f"{args.run_id}.json"
    agent = None
    if args.agent_socket:
        from sgltui.client import AgentClient

        agent = AgentClient(Path(args.agent_socket).parent, client_name=f"bench:{os.getpid()}")
        await agent.connect(autostart=False)
    try:
        result = await run_sweep(spec, out_path, args.run_id, agent)
    finally:
        if agent is not None:
            await agent.close()
    return 0 if result["state"] == "done" else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sgltui.bench.runner", description=__doc__.splitlines()[0]
    )
    p.add_argument("--agent-socket")
    p.add_argument("--url")
    p.add_argument("--session-dir", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--spec-json", required=True)
    args = p.parse_args(argv)
    try:
        data = json.loads(args.spec_json)
        if args.url:
            data["url"] = args.url
        spec = BenchSpec.from_dict(data)
    except (ValueError, TypeError, SpecError) as exc:
        print(f"sgltui bench: invalid spec: {exc}", file=sys.stderr)
        return 2
    if not spec.url and not args.agent_socket:
        print(
            "sgltui bench: give --agent-socket (swap via the agent) or --url (a running server)",
            file=sys.stderr,
        )
        return 2
    return asyncio.run(_main_async(args, spec))


if __name__ == "__main__":
    sys.exit(main())
