"""Engine readings for one managed server: /metrics, else /v1/loads, plus batch log lines.

The polls go over one kept connection per server (telemetry/http_get.py: httpx cost several
times the request, every second for every slot); /server_info, once a launch, goes by agent/slot/info_fetch.py (bounded, coerced).

Order of preference (issue #5): /metrics when the server runs with --enable-metrics, else
/v1/loads (cheap, always there), and the Prefill/Decode batch lines as a third source that also
fills what the others lack (e.g. accept length without metrics). The start-up lines and one
/server_info call build the launch's capacity card.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sgltui.agent.slot import info_fetch
from sgltui.agent.telemetry import http_get
from sgltui.agent.telemetry.engine_parse import (
    empty_engine,
    engine_from_loads,
    engine_from_metrics,
    merge_engine,
)
from sgltui.agent.telemetry.http_get import KeepAliveGet
from sgltui.core.capacity import CapacityBuilder
from sgltui.core.loglines import parse_batch_line


class LogEngineState:
    """Latest batch-line figures per DP rank (each DP group's rank 0 prints its own lines)."""

    def __init__(self) -> None:
        self._ranks: dict[int, dict[str, Any]] = {}
        self.updated = 0.0  # time.time() of the last batch line

    def feed(self, line: str, now: float) -> bool:
        b = parse_batch_line(line)
        if b is None:
            return False
        r = self._ranks.setdefault(b.dp_rank, {})
        for key, val in (
            ("num_running_reqs", b.num_running_reqs),
            ("num_queue_reqs", b.num_queue_reqs),
            ("token_usage", b.token_usage),
        ):
            if val is not None:
                r[key] = val
        if b.kind == "decode":
            r["gen_throughput"] = b.gen_throughput
            r["accept_length"] = b.accept_length
            r["accept_rate"] = b.accept_rate
        else:
            if b.cache_hit_rate is not None:
                r["cache_hit_rate"] = b.cache_hit_rate
            r["input_throughput"] = b.input_throughput
        self.updated = now
        return True

    @property
    def busy(self) -> bool:
        """The last batch lines had requests running or queued."""
        return any(
            r.get("num_running_reqs") or r.get("num_queue_reqs") for r in self._ranks.values()
        )

    def engine(self) -> dict[str, Any] | None:
        if not self._ranks:
            return None
        e = empty_engine("log", self.updated)
        ranks = list(self._ranks.values())

        def col(key: str) -> list[float]:
            return [r[key] for r in ranks if r.get(key) is not None]

        for key, how in (
            ("num_running_reqs", sum),
            ("num_queue_reqs", sum),
            ("gen_throughput", sum),
            ("token_usage", max),
            ("input_throughput", sum),
        ):
            v = col(key)
            e[key] = how(v) if v else None
        for key in ("cache_hit_rate", "accept_length", "accept_rate"):
            v = col(key)
            e[key] = sum(v) / len(v) if v else None
        return e


class SlotWatch:
    """Everything telemetry knows about one attached server."""

    SERVER_INFO_RETRY_S = 10.0

    def __init__(
        self, slot_id: str, pid: int, base_url: str, api_key: str | None, tp_size: int = 1
    ) -> None:
        self.slot_id = slot_id
        self.pid = pid
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.tp_size = tp_size
        self.mode: str | None = None  # "metrics" | "loads" once known
        self.polled: dict[str, Any] | None = None
        self.polled_at = 0.0  # monotonic time of the last good poll
        self.answered_at = 0.0  # monotonic time of the last HTTP answer, whatever its status
        self.error: str | None = None
        self.log = LogEngineState()
        self.capacity = CapacityBuilder()
        self.server_info_done = False
        self._server_info_tried = 0.0
        self.log_seq = 0  # bumps on every batch line (new data for the timeline)
        self._polled_seq = -1  # log_seq at the last good poll
        self._news_key: tuple[object, int] | None = None
        self._http: KeepAliveGet | None = None  # the polls' kept connection

    def poll_due(self, now: float, idle_every: float) -> bool:
        """Whether this tick should poll: always, unless the last good poll found the server
        idle, its batch lines since say nothing runs or waits either, and that poll is younger
        than `idle_every`. (An idle server still prints a batch line for each health check,
        the gateway's every second: those are no work.)"""
        last = self.polled
        if last is None or self.error is not None:
            return True
        idle = not last.get("num_running_reqs") and not last.get("num_queue_reqs")
        if self.log_seq != self._polled_seq and self.log.busy:
            idle = False
        return not idle or now - self.polled_at >= idle_every

    def news(self) -> bool:
        """New data since the last call: a new poll or a new batch line."""
        key = (self.polled["ts"] if self.polled else None, self.log_seq)
        if key == self._news_key:
            return False
        self._news_key = key
        return True

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def poll(self, now_wall: float, timeout: float = 3.0) -> None:
        """One engine poll; never raises (errors are kept as a one-line state)."""
        if self._http is None:
            try:
                self._http = KeepAliveGet(self.base_url, timeout)
            except ValueError as exc:
                self.error = f"engine poll failed: {exc}"
                return
        http = self._http
        try:
            if self.mode in (None, "metrics"):
                r = await http.get("/metrics", self.headers)
                self.answered_at = time.monotonic()
                if r.status_code == 200:
                    self.mode = "metrics"
                    self._ok(engine_from_metrics(r.text, now_wall))
                    return
                if r.status_code != 404 or self.mode == "metrics":
                    self.error = f"/metrics answered HTTP {r.status_code}"
                    return
                self.mode = "loads"  # 404: the server runs without --enable-metrics
            r = await http.get("/v1/loads", self.headers)
            self.answered_at = time.monotonic()
            if r.status_code == 200:
                self._ok(engine_from_loads(r.json(), now_wall))
            else:
                self.error = f"/v1/loads answered HTTP {r.status_code}"
        except http_get.ConnectFailed:
            self.error = "server not answering yet (connection refused)"
        except http_get.Timeout:
            self.error = "server did not answer within the poll timeout"
        except (http_get.GetError, OSError, ValueError) as exc:
            self.error = f"engine poll failed: {type(exc).__name__}: {exc}".splitlines()[0]

    def close(self) -> None:
        """Its poll connection closed (the watch is dropped: detached, or telemetry stops)."""
        if self._http is not None:
            self._http.close()
            self._http = None

    def _ok(self, engine: dict[str, Any]) -> None:
        self._polled_seq = self.log_seq
        self.polled = engine
        self.polled_at = time.monotonic()
        self.error = None

    async def fetch_server_info(self, timeout: float = 10.0) -> bool:
        """GET /server_info once the server answers (it round-trips to every scheduler: rarely)."""
        if self.server_info_done or self.polled is None:
            return False
        now = time.monotonic()
        if now - self._server_info_tried < self.SERVER_INFO_RETRY_S:
            return False
        self._server_info_tried = now
        try:  # bounded in time and size, coerced: a server may be one sgltui did not start
            info = await info_fetch.fetch(self.base_url, self.api_key, deadline_s=timeout)
        except info_fetch.FetchError:
            return False
        self.capacity.feed_server_info(info)
        self.server_info_done = True
        return True

    def engine(self, stale_after: float) -> dict[str, Any] | None:
        fresh = (
            self.polled
            if self.polled is not None and time.monotonic() - self.polled_at <= stale_after
            else None
        )
        merged = merge_engine(fresh, [self.log.engine()])
        if merged is None:
            return None
        card = self.capacity.card()
        if card:
            if merged.get("max_running_requests") is None:
                merged["max_running_requests"] = card.get("max_running_requests")
            if merged.get("max_total_num_tokens") is None:
                merged["max_total_num_tokens"] = card.get("kv_pool_tokens")
        merged["error"] = self.error
        return merged


OnCapacity = Callable[[str, dict], None]
