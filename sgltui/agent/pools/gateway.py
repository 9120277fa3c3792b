"""A pool's gateway: SGLang's model gateway (`smg launch`, PyPI smg), supervised by the agent.

One gateway per pool of two or more slots, in its own process group, bound to the pool's address
(loopback unless host.toml says otherwise). What this module owns:

- the argv: the pool's workers, health checks and worker start-up checks every second (smg's
  defaults, 60 s x 3 and 30 s, leave a dead worker looking ready for about three minutes), its
  Prometheus port on loopback, `--model-alias default=MODEL` (below);
- the keys: a control-plane key the agent generates (smg warns that without one POST /workers
  and DELETE /workers/{id} answer anyone), and the profile's API key passed through (smg then
  asks clients for it, as the server would, and sends it to the workers). Both live in a 0600
  file and reach smg through sgltui.agent.pools.gateway_launch, never through argv;
- restart: a gateway that dies is started again, with the workers the agent holds now, within
  RESTART_WITHIN_S;
- re-adoption: an agent killed -9 leaves its gateway serving; the next agent takes it over
  (adopt(): the same process by pid and start time, on the pool's port, answering the recorded
  control-plane key), so the pool's clients see nothing. One it cannot take over is ended;
- workers: add (POST /workers), remove (DELETE /workers/{id}), wait until the gateway says
  ready, and each worker's own requests in flight (its /v1/loads: smg's "draining" is a 5 s
  timer, not a count);
- metrics: requests active per worker, retries, circuit-breaker state, errors, as a typed sample.

Model names: smg routes by the request's `model` and answers 404 for a name no worker serves.
SGLang itself serves any name, and batch files often carry "default" (SGLang's own default).
The workers keep their real name (the served name stays what the profile says, so /v1/models
and the responses read the same through the pool as from the slot), and the gateway gets
`--model-alias default=<the pool's model>`, so a request for "default" reaches the pool's
workers as it reached the slot. The alias is fixed when smg starts: a pool whose model changes
(a roll to another model) restarts its gateway once the roll is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from sgltui import protocol
from sgltui.agent.children import stop_group
from sgltui.agent.pools.gateway_launch import NOT_INSTALLED as NOT_INSTALLED
from sgltui.agent.pools.gateway_launch import SMG as SMG
from sgltui.agent.telemetry.engine_parse import metric_samples
from sgltui.agent.telemetry.http_get import Answer, GetError, KeepAliveGet
from sgltui.core.files import private_dir, write_json_atomic
from sgltui.core.placement import PoolPlace
from sgltui.core.tasks import watched

log = logging.getLogger("sgltui.agent.gateway")

RESTART_WITHIN_S = 5.0
POLL_S = 0.2
CHECK_INTERVAL_S = 1  # smg health and worker start-up checks
START_TIMEOUT_S = 30.0  # smg answers in well under a second; this is for a loaded machine
DRAIN_TIMER_S = 15.0  # smg lists a removed worker as draining for 5 s; this bounds the wait
REGISTER_WAIT_S = 10.0  # at most this for the workers it starts with to be routable
STOP_AFTER_IDLE_S = 0.5  # SIGTERM to SIGKILL once nothing is in flight (smg would wait 5 s)


class GatewayError(Exception):
    """One line: what went wrong with the gateway and what to do."""


class WorkerState(msgspec.Struct, frozen=True):
    id: str
    url: str
    status: str  # smg's: pending | ready | not_ready | failed | draining


class WorkerMetrics(msgspec.Struct, frozen=True):
    url: str
    requests_active: int = 0
    cb_state: str = "closed"  # closed | open | half_open
    healthy: bool = True


class GatewaySample(msgspec.Struct, frozen=True):
    """What the pool's telemetry and the session record of the gateway, each second."""

    pool: str
    ts: float
    pid: int | None
    state: str  # running | restarting | stopped
    restarts: int
    workers: list[WorkerMetrics]
    retries_total: int
    errors_total: int
    requests_total: int


_CB_STATES = {0: "closed", 1: "open", 2: "half_open"}


# Where PyPI has smg wheels (1.13): elsewhere `pip install smg` builds it from source (Rust).
_SMG_WHEELS = {("linux", "x86_64"), ("darwin", "x86_64"), ("darwin", "arm64"), ("win32", "amd64")}


def smg_available() -> bool:
    """Looked up at each call, not once: smg installed while the agent runs is found (the
    import system's directory caches are dropped first, or a new package stays unseen)."""
    importlib.invalidate_caches()
    try:
        return importlib.util.find_spec("smg") is not None
    except (ImportError, ValueError):
        return False


def smg_missing() -> str:
    """The one line a pool says while smg is not importable: what to install, and where."""
    import platform

    where = (sys.platform, platform.machine().lower())
    if where in _SMG_WHEELS:
        return f"{NOT_INSTALLED}; into {sys.executable}"
    return (
        f"{SMG} smg (SGLang's gateway, for pools of 2+ slots) has no wheel for {where[0]} "
        f"{where[1]}: `{sys.executable} -m pip install smg` builds it (needs a Rust toolchain); "
        "or run one slot"
    )


def require_smg() -> None:
    if not smg_available():
        raise GatewayError(smg_missing())


def port_free(host: str, port: int) -> bool:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class Gateway:
    """One pool's smg process and the agent's view of its workers."""

    def __init__(
        self,
        pool: str,
        *,
        host: str,
        port: int,
        prometheus_port: int,
        state_dir: Path,
        api_key: str | None = None,
        model: str | None = None,
        policy: str = "cache_aware",
        on_change: Callable[[protocol.PoolEvent], object] | None = None,
    ) -> None:
        self.pool = pool
        self.host = host
        self.port = port
        self.prometheus_port = prometheus_port
        self.state_dir = state_dir
        self.api_key = api_key
        self.model = model
        self.policy = policy
        self.on_change = on_change or (lambda event: None)
        self.urls: list[str] = []  # the workers the agent wants routed, in order
        # A worker of another host requires its own key (agent/pools/exposure.py there): smg takes it
        # per worker in POST /workers and sends it to that worker; never in argv.
        self.keys: dict[str, str] = {}
        self.proc: subprocess.Popen[bytes] | Adopted | None = None
        self.restarts = 0
        self.state = "stopped"
        self.key_path = state_dir / "secrets" / f"gateway-{pool}.json"
        self.log_path = state_dir / "gateways" / f"{pool}.log"
        # Its pid (and start time, ports, model), for the next agent: one killed -9 leaves its
        # gateway serving on the pool's port, and the next one re-adopts it or ends it.
        self.pid_path = state_dir / "gateways" / f"{pool}.pid"
        self._control_key = secrets.token_urlsafe(24)
        # url -> when it was last POSTed: smg registers it in the background, so GET /workers
        # may not list it yet (agent/pools/reconcile.py does not add it twice meanwhile)
        self.posted: dict[str, float] = {}
        self._watch: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        # The GETs of the agent's once-a-second poll (its workers, its metrics), each over one
        # kept connection (telemetry/http_get.py: httpx cost several times the request).
        self._gets: dict[str, KeepAliveGet] = {}
        self._stopping = False

    # --- the process ------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def argv(self) -> list[str]:
        """The command line (no key in it: gateway_launch adds them from the 0600 file)."""
        args = [
            "--host", self.host,
            "--port", str(self.port),
            "--policy", self.policy,
            "--health-check-interval-secs", str(CHECK_INTERVAL_S),
            "--health-failure-threshold", "2",
            "--health-success-threshold", "1",
            "--worker-startup-check-interval", str(CHECK_INTERVAL_S),
            "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(self.prometheus_port),
        ]  # fmt: skip
        plain = [u for u in self.urls if u not in self.keys]  # keyed ones: POSTed at start
        if plain:
            args += ["--worker-urls", *plain]
        if self.model and self.model != "default":
            args += ["--model-alias", f"default={self.model}"]
        return [
            sys.executable,
            "-m",
            "sgltui.agent.pools.gateway_launch",
            str(self.key_path),
            "--",
            *args,
        ]

    def _write_keys(self) -> None:
        private_dir(self.key_path.parent)
        keys = {"control_plane_key": self._control_key}
        if self.api_key:
            keys["api_key"] = self.api_key
        write_json_atomic(self.key_path, keys)  # 0600 (core.files' default)

    def _spawn(self) -> None:
        private_dir(self.log_path.parent)
        self._write_keys()
        with open(self.log_path, "ab") as fh:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as one
                close_fds=True,
            )
        log.info("gateway %s: smg pid %s on %s", self.pool, self.proc.pid, self.endpoint)
        with contextlib.suppress(OSError):
            write_json_atomic(
                self.pid_path,
                {
                    "pid": self.proc.pid,
                    "created": _created(self.proc.pid),
                    "port": self.port,
                    "prometheus_port": self.prometheus_port,
                    "model": self.model,
                },
            )

    async def adopt(self) -> bool:
        """Take over the gateway an earlier agent of this state dir left running (killed -9):
        True when it now serves under this agent. One that is ours (pid and start time) but
        cannot be taken over (another port, its keys gone, its control plane refusing) is
        ended, and agent.log says which and why; the caller starts a new one when it can."""
        rec = _read_json(self.pid_path)
        keys = _read_json(self.key_path)
        try:
            pid, created = int(rec["pid"]), float(rec["created"])
        except (KeyError, TypeError, ValueError):
            return False
        if _created(pid) != created:
            with contextlib.suppress(OSError):
                self.pid_path.unlink()  # gone, or its pid reused: not ours
            return False
        control = keys.get("control_plane_key") if isinstance(keys, dict) else None
        why = None
        if rec.get("port") != self.port:
            why = f"it listens on port {rec.get('port')}, the pool's port is now {self.port}"
        elif not isinstance(control, str):
            why = f"its keys are gone ({self.key_path})"
        else:
            self._control_key = control
            status, body = await self._request("GET", "/workers", timeout=2.0)
            if status != 200 or not isinstance(body, dict):
                why = f"its control plane answered {status or 'nothing'}"
        if why is not None:
            log.warning(
                "gateway %s: ending smg pid %s left by an earlier agent (%s); starting a new one",
                self.pool, pid, why,
            )  # fmt: skip
            await asyncio.to_thread(self._end_leftover)
            return False
        self.proc = Adopted(pid)
        self.prometheus_port = int(rec.get("prometheus_port") or self.prometheus_port)
        self.model = rec.get("model")
        self.api_key = keys.get("api_key")
        ws = await self.workers() or []
        self.urls = [w.url for w in ws if w.status != "draining"]
        self._stopping = False
        self.state = "running"
        self._watch = watched(
            asyncio.get_running_loop().create_task(self._supervise()), f"gateway {self.pool}"
        )
        log.info(
            "gateway %s: re-adopted smg pid %s on %s (left by an earlier agent; workers: %s)",
            self.pool, pid, self.endpoint, ", ".join(self.urls) or "none",
        )  # fmt: skip
        return True

    async def start(self, urls: list[str] | None = None) -> None:
        """Start smg with `urls` as workers and wait until it answers its control plane.
        Raises GatewayError (smg missing, port taken, smg exits)."""
        require_smg()
        await asyncio.to_thread(self._end_leftover)
        if not port_free(self.host, self.port):
            raise GatewayError(
                f"pool {self.pool}: port {self.port} on {self.host} is taken; "
                "stop what holds it or give the pool another port in host.toml"
            )
        if urls is not None:
            self.urls = list(urls)
        self._stopping = False
        await self._launch()
        self.state = "running"
        if self._watch is None or self._watch.done():
            self._watch = watched(
                asyncio.get_running_loop().create_task(self._supervise()), f"gateway {self.pool}"
            )

    def _end_leftover(self) -> None:
        """Blocking: end the gateway an earlier agent of this state dir left (killed -9), if
        the pid it recorded is still that gateway (its argv names our launcher and pool)."""
        try:
            rec = json.loads(self.pid_path.read_text())
            pid, created = int(rec["pid"]), rec.get("created")
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            pid, created = 0, None
            self._end_lost()  # no pid to trust: found by its open log
        # The same process (pid and start time), not a later one that reused the pid.
        ours = created is not None and _created(pid) == created
        if ours and (self.proc is None or self.proc.pid != pid):
            log.warning("gateway %s: ending pid %s, left by an earlier agent", self.pool, pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not port_free(self.host, self.port):
                time.sleep(0.05)
        with contextlib.suppress(OSError):
            self.pid_path.unlink()

    def _end_lost(self) -> None:
        """Blocking: end gateways of this pool and state dir whose pid file is lost or unreadable,
        found by their stdout, this pool's log (agent/slot/recover.py)."""
        from sgltui.agent.slot.recover import find_by_stdout

        for pid in find_by_stdout(self.log_path):
            if self.proc is not None and self.proc.pid == pid:
                continue
            log.warning(
                "gateway %s: ending pid %s, left by an earlier agent (its pid file was "
                "unreadable: found by its open log)",
                self.pool, pid,
            )  # fmt: skip
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not port_free(self.host, self.port):
                time.sleep(0.05)

    async def _launch(self) -> None:
        self._spawn()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise GatewayError(
                    f"pool {self.pool}: smg exited with code {self.proc.returncode} at start; "
                    f"see {self.log_path}"
                )
            status, _ = await self._request("GET", "/workers", timeout=1.0)
            if status == 200:
                break
            if time.monotonic() >= deadline:
                raise GatewayError(
                    f"pool {self.pool}: smg did not answer within {START_TIMEOUT_S:.0f} s; "
                    f"see {self.log_path}"
                )
            await asyncio.sleep(POLL_S / 2)
        for url in self.urls:
            if url in self.keys:
                await self._post_worker(url)
        # --worker-urls are registered in the background: answer once they are routable (a
        # worker that is down holds the gateway back no longer than the bound).
        deadline = time.monotonic() + REGISTER_WAIT_S
        while time.monotonic() < deadline:
            ws = await self.workers()
            ready = {w.url for w in ws or [] if w.status == "ready"}
            if all(u in ready for u in self.urls):
                return
            await asyncio.sleep(POLL_S / 2)

    async def _supervise(self) -> None:
        """Restart a gateway that died, with the workers held now (within RESTART_WITHIN_S)."""
        while not self._stopping:
            await asyncio.sleep(POLL_S)
            proc = self.proc
            if self._stopping or proc is None or proc.poll() is None:
                continue
            code = proc.returncode
            self.state = "restarting"
            self.on_change(protocol.GatewayDied(pool=self.pool, code=code))
            log.warning("gateway %s: smg exited (%s); restarting", self.pool, code)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever it left in its group
            while not self._stopping:
                if not port_free(self.host, self.port):
                    await asyncio.sleep(POLL_S)  # the dead one's socket, or a squatter
                    continue
                try:
                    await self._launch()
                except GatewayError as exc:
                    log.warning("%s", exc)
                    await asyncio.sleep(1.0)
                    continue
                break
            if self._stopping:
                return
            self.restarts += 1
            self.state = "running"
            self.on_change(protocol.GatewayRestarted(pool=self.pool, pid=self.pid))

    async def stop(self, grace: float = 5.0) -> None:
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        proc = self.proc
        if proc is not None:
            # smg's own graceful stop keeps serving for 5 s (for load balancers to notice; not
            # a flag in smg 1.13) before it drains, so every pool stop and every restart for a
            # new model waited that long. Nobody but this agent routes here: it waits for what
            # is in flight through the gateway (at most `grace`), then ends it.
            await self._wait_idle(grace)
            await asyncio.to_thread(stop_group, proc, STOP_AFTER_IDLE_S)
        self.proc = None
        self.state = "stopped"
        with contextlib.suppress(OSError):
            self.pid_path.unlink()
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        for get in self._gets.values():
            get.close()
        self._gets.clear()
        with contextlib.suppress(OSError):
            self.key_path.unlink()

    # --- the control plane ------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(trust_env=False)
        return self._client

    async def _request(
        self, method: str, path: str, body: Any = None, timeout: float = 2.0
    ) -> tuple[int, Any]:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = "::1" if host == "::" else host
        host = f"[{host}]" if ":" in host else host
        url = f"http://{host}:{self.port}{path}"
        headers = {"Authorization": f"Bearer {self._control_key}"}
        r: httpx.Response | Answer | None
        if method == "GET" and body is None:
            r = await self._get(f"http://{host}:{self.port}", path, headers, timeout)
            if r is None:
                return 0, None
        else:
            try:
                r = await asyncio.wait_for(
                    self._http().request(method, url, json=body, headers=headers, timeout=timeout),
                    timeout,
                )
            except (httpx.HTTPError, asyncio.TimeoutError):
                return 0, None
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text

    async def _get(
        self, base: str, path: str, headers: dict[str, str], timeout: float
    ) -> Answer | None:
        """A GET over the kept connection to `base`; None when nothing answered."""
        get = self._gets.get(base)
        if get is None:
            get = self._gets[base] = KeepAliveGet(base, timeout)
        elif get.busy:  # another GET of this gateway is out (a roll's wait and the poll):
            get = KeepAliveGet(base, timeout)  # this one on a connection of its own
        try:
            return await get.get(path, headers, timeout)
        except (GetError, OSError):
            return None
        finally:
            if get is not self._gets.get(base):
                get.close()

    async def workers(self) -> list[WorkerState] | None:
        """The gateway's workers, or None when it does not answer."""
        status, body = await self._request("GET", "/workers")
        if status != 200 or not isinstance(body, dict):
            return None
        out = []
        for w in body.get("workers") or []:
            if isinstance(w, dict) and isinstance(w.get("id"), str):
                out.append(WorkerState(w["id"], str(w.get("url")), str(w.get("status"))))
        return out

    async def add_worker(self, url: str, api_key: str | None = None) -> None:
        """Route to `url` (the agent keeps it across gateway restarts), sending it `api_key`
        when it requires one. A worker the gateway already has (409) is fine."""
        if url not in self.urls:
            self.urls.append(url)
        if api_key:
            self.keys[url] = api_key
        # A worker removed a moment ago is still listed while smg's drain timer runs (5 s), and
        # a POST for it then answers 409 and adds nothing: wait for that entry to go first.
        ws = await self.workers() or []
        if any(w.url == url and w.status == "draining" for w in ws):
            await self.wait_gone(url, timeout=DRAIN_TIMER_S)
        elif any(w.url == url for w in ws):
            return
        await self._post_worker(url)

    async def _post_worker(self, url: str) -> None:
        body: dict[str, Any] = {"url": url}
        if url in self.keys:
            body["api_key"] = self.keys[url]
        status, answer = await self._request("POST", "/workers", body)
        log.info("gateway %s: POST /workers %s -> %s", self.pool, url, status)
        if status in (200, 201, 202):
            self.posted[url] = time.monotonic()  # listed by GET /workers a moment later
        if status not in (200, 201, 202, 409):
            raise GatewayError(f"pool {self.pool}: the gateway refused worker {url}: {answer}")

    async def remove_worker(self, url: str) -> bool:
        """Stop routing new requests to `url`; False when the gateway did not have it."""
        if url in self.urls:
            self.urls.remove(url)
        self.keys.pop(url, None)
        self.posted.pop(url, None)
        found = [w for w in (await self.workers() or []) if w.url == url]
        for w in found:
            status, body = await self._request("DELETE", f"/workers/{w.id}")
            log.info(
                "gateway %s: DELETE worker %s (%s, was %s) -> %s",
                self.pool,
                w.id,
                url,
                w.status,
                status,
            )
            if status not in (200, 202, 204, 404):
                raise GatewayError(f"pool {self.pool}: the gateway kept worker {url}: {body}")
        return bool(found)

    async def wait_ready(self, url: str, timeout: float) -> bool:
        """Until the gateway reports `url` ready (routable), at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            ws = await self.workers()
            if ws is not None and any(w.url == url and w.status == "ready" for w in ws):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_S)

    async def wait_gone(self, url: str, timeout: float) -> bool:
        """Until the gateway no longer lists `url` (its drain timer is over)."""
        deadline = time.monotonic() + timeout
        while True:
            ws = await self.workers()
            if ws is not None and not any(w.url == url for w in ws):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL_S)

    async def routable(self) -> int:
        """Workers the gateway would send a new request to now."""
        return sum(w.status == "ready" for w in (await self.workers() or []))

    # --- metrics ----------------------------------------------------------------------------

    async def _wait_idle(self, timeout: float) -> None:
        """Until the gateway proxies no request (its metrics say so), at most `timeout` s;
        at once when its metrics do not answer (nothing to wait for that can be known)."""
        deadline = time.monotonic() + timeout
        while True:
            sample = await self._metrics(1.0)
            if sample is None or not any(w.requests_active for w in sample.workers):
                return
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(POLL_S)

    async def sample(self) -> GatewaySample:
        """The gateway's metrics now; no workers and zero counts when they do not answer."""
        sample = await self._metrics(2.0)
        return sample if sample is not None else self._parsed("")

    async def _metrics(self, timeout: float) -> GatewaySample | None:
        r = await self._get(f"http://127.0.0.1:{self.prometheus_port}", "/metrics", {}, timeout)
        if r is None or r.status_code != 200:
            return None
        return self._parsed(r.text)

    def _parsed(self, text: str) -> GatewaySample:
        return parse_metrics(
            text, pool=self.pool, pid=self.pid, state=self.state, restarts=self.restarts
        )


def for_pool(
    place: PoolPlace, state_dir: Path, on_change: Callable[[protocol.PoolEvent], object]
) -> Gateway:
    """The gateway of a pool (host.toml's or fleet.toml's), its metrics on a free loopback port."""
    return Gateway(
        place.name,
        host=place.host,
        port=place.port,
        prometheus_port=free_port(),
        state_dir=state_dir,
        policy=place.policy,
        on_change=on_change,
    )


def free_port() -> int:
    """The gateway's metrics port, on loopback: any free one (the agent scrapes it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def stop_gateways(poll: asyncio.Task[None] | None, gateways: Iterable[Gateway]) -> None:
    """A pool keeper's close (local pools and fleet.toml's alike): the poll that reads the
    gateways ends first, so it never asks a gateway that is stopping, then each gateway stops."""
    if poll is not None:
        poll.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poll
    for gw in gateways:
        await gw.stop()


# The sample names parse_metrics reads (the gateway's other lines are dropped unparsed).
_GATEWAY_METRICS = (
    "smg_worker_requests_active",
    "smg_worker_cb_state",
    "smg_worker_health",
    "smg_worker_retries_total",
    "smg_router_request_errors_total",
    "smg_router_requests_total",
)


def parse_metrics(
    text: str, *, pool: str, pid: int | None, state: str, restarts: int
) -> GatewaySample:
    active: dict[str, float] = {}
    cb: dict[str, str] = {}
    health: dict[str, bool] = {}
    retries = errors = requests = 0.0
    try:
        samples = metric_samples(text, _GATEWAY_METRICS)
    except ValueError:
        samples = []  # a torn scrape: next second's will do
    for s in samples:
        worker = s.labels.get("worker") or s.labels.get("worker_url")
        if s.name == "smg_worker_requests_active" and worker:
            active[worker] = active.get(worker, 0.0) + s.value
        elif s.name == "smg_worker_cb_state" and worker:
            cb[worker] = _CB_STATES.get(int(s.value), str(s.value))
        elif s.name == "smg_worker_health" and worker:
            health[worker] = s.value >= 1
        elif s.name == "smg_worker_retries_total":
            retries += s.value
        elif s.name == "smg_router_request_errors_total":
            errors += s.value
        elif s.name == "smg_router_requests_total":
            requests += s.value
    urls = sorted(set(active) | set(cb) | set(health))
    return GatewaySample(
        pool=pool,
        ts=time.time(),
        pid=pid,
        state=state,
        restarts=restarts,
        workers=[
            WorkerMetrics(u, int(active.get(u, 0)), cb.get(u, "closed"), health.get(u, True))
            for u in urls
        ],
        retries_total=int(retries),
        errors_total=int(errors),
        requests_total=int(requests),
    )


async def worker_in_flight(
    url: str, api_key: str | None = None, timeout: float = 2.0
) -> int | None:
    """Requests running or waiting on one worker (its /v1/loads), None when it does not answer.
    This, not smg's draining state (a 5 s timer), says when a removed worker is done."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            r = await asyncio.wait_for(
                client.get(f"{url}/v1/loads", headers=headers, timeout=timeout), timeout
            )
    except (httpx.HTTPError, asyncio.TimeoutError):
        return None
    if r.status_code != 200:
        return None
    try:
        loads = r.json().get("loads") or []
    except (ValueError, AttributeError):
        return None
    return int(
        sum(
            int(x.get("num_running_reqs") or 0) + int(x.get("num_waiting_reqs") or 0)
            for x in loads
            if isinstance(x, dict)
        )
    )


async def wait_in_flight_zero(
    url: str, timeout: float, api_key: str | None = None
) -> tuple[bool, int | None]:
    """(drained, last count): until the worker has nothing in flight, at most `timeout` s."""
    deadline = time.monotonic() + timeout
    last: int | None = None
    while True:
        last = await worker_in_flight(url, api_key)
        if last == 0:
            return True, 0
        if time.monotonic() >= deadline:
            return False, last
        await asyncio.sleep(POLL_S)


class Adopted:
    """A gateway started by an earlier agent: not this agent's child, so watched through psutil
    (exited, or a zombie of whoever reaps it now) with the part of Popen the gateway uses."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.pid = pid
        self.returncode: int | None = None
        self._proc = psutil.Process(pid)

    def poll(self) -> int | None:
        import psutil

        if self.returncode is None:
            try:
                gone = self._proc.status() == psutil.STATUS_ZOMBIE
            except psutil.Error:
                gone = True
            if gone:
                self.returncode = -1  # not our child: its exit status is not ours to read
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return {}


def _created(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def describe(gw: Gateway) -> dict[str, Any]:
    """The `gateway` object of a pool in `status --json`."""
    return {"pid": gw.pid, "state": gw.state, "endpoint": gw.endpoint, "restarts": gw.restarts}
