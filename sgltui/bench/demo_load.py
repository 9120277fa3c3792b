"""Light background load for the demo, so the panes have something to show.

    python -m sgltui.bench.demo_load --agent-socket S [--streams 3] [--max-output 96]

The agent spawns this for `demo_load {on: true}`. A few streaming requests with short outputs go
to the demo pool's endpoint, or to the host's first slot (`--slot`), while it is ready; the
agent's status is re-read every few seconds (swaps move the load along), the load pauses while
nothing is ready, and the process exits when the agent's socket goes away. Its requests are
ordinary client traffic.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
from pathlib import Path

import httpx

from sgltui.bench.apis import request_body
from sgltui.bench.workload import RandomWorkload

POLL_S = 3.0


class DemoLoad:
    def __init__(
        self, state_dir: Path, streams: int, max_output: int, slot: str | None = None
    ) -> None:
        self.state_dir = state_dir
        self.streams = streams
        self.max_output = max_output
        self.slot = slot
        self.base_url: str | None = None  # None = no ready server: workers pause
        self.api_key: str | None = None
        self.ready = asyncio.Event()
        self.rng = random.Random(os.getpid())
        self.workload = RandomWorkload(input_len=48, output_len=max_output, seed=7, pool=16)
        self.sent = 0

    async def watch_agent(self) -> None:
        """Follow slot 0; return when the agent is gone."""
        from sgltui.client import AgentClient, AgentError

        client = AgentClient(self.state_dir, client_name="demo-load")
        try:
            await client.connect(autostart=False)
        except AgentError:
            return
        try:
            while True:
                try:
                    status = await client.call("status")
                except AgentError:
                    return
                self._update(status)
                await asyncio.sleep(POLL_S)
        finally:
            await client.close()

    def _update(self, status: dict) -> None:
        slots = status.get("slots") or []
        # the slot asked for, else the host's first (the demo's host names its slots a, b, ...)
        slot = next(
            (s for s in slots if self.slot is not None and str(s.get("id")) == self.slot), None
        )
        slot = slot or (slots[0] if self.slot is None and slots else None)
        # A bench run measures the server alone: background traffic would skew its numbers.
        benching = (status.get("bench") or {}).get("state") == "running"
        # A pool's endpoint that serves (`sgltui demo`: pool 'all' behind the gateway, or behind
        # the agent's front where it has one member) takes the load while a member is ready.
        ready = {str(s.get("id")) for s in slots if s.get("state") == "ready"}
        pool = next((p for p in status.get("pools") or [] if _serves(p, ready)), None)
        if pool and pool.get("endpoint") and not benching:
            url = str(pool["endpoint"])
            if url != self.base_url:
                self.base_url = url
                first = next((s for s in status.get("slots") or [] if s.get("profile")), None)
                self.api_key = _api_key(first) if first else None
            self.ready.set()
        elif slot and slot.get("state") == "ready" and not slot.get("swap") and not benching:
            url = f"http://{slot.get('host') or '127.0.0.1'}:{slot.get('port') or 30000}"
            if url != self.base_url:
                self.base_url = url
                self.api_key = _api_key(slot)
            self.ready.set()
        else:
            self.base_url = None
            self.ready.clear()

    async def worker(self, client: httpx.AsyncClient, k: int) -> None:
        # Stagger the streams so they do not start and end in lockstep.
        await asyncio.sleep(k * 0.3)
        while True:
            await self.ready.wait()
            url = self.base_url
            if url is None:
                continue
            i = self.sent
            self.sent += 1
            out = self.rng.randint(max(8, self.max_output // 4), self.max_output)
            body = request_body(
                "completions", self.workload.item(i).prompt, out, None, ignore_eos=True
            )
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            try:
                async with client.stream(
                    "POST", url + "/v1/completions", content=body, headers=headers
                ) as resp:
                    async for _ in resp.aiter_raw():
                        if self.base_url != url:
                            break  # the slot changed under us: drop this stream
            except (httpx.HTTPError, OSError):
                await asyncio.sleep(
                    1.0
                )  # server going down or swapping: back off, the watcher will tell
            await asyncio.sleep(self.rng.uniform(0.1, 0.8))

    async def run(self) -> None:
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=5.0),
            limits=httpx.Limits(max_connections=self.streams + 2),
        ) as client:
            workers = [asyncio.create_task(self.worker(client, k)) for k in range(self.streams)]
            try:
                await self.watch_agent()
            finally:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)


def _serves(pool: dict, ready: set[str]) -> bool:
    """The pool's endpoint answers: a running gateway, or the agent's front for a pool of one,
    with a member ready (a pool whose members all load or swap pauses the load)."""
    gateway = pool.get("gateway") or {}
    up = bool(gateway.get("pid")) or gateway.get("state") == "front"
    return up and any(str(m) in ready for m in pool.get("slots") or [])


def _api_key(slot: dict) -> str | None:
    if not slot.get("api_key_set") or not slot.get("profile"):
        return None
    from sgltui.core.profiles import ProfileError, get_profile

    try:
        return get_profile(slot["profile"]).api_key
    except ProfileError:  # without the key the server refuses; the load just idles
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sgltui.bench.demo_load", description=__doc__.splitlines()[0]
    )
    p.add_argument("--agent-socket", required=True)
    p.add_argument(
        "--streams", type=int, default=3, help="concurrent streaming requests (default 3)"
    )
    p.add_argument(
        "--max-output", type=int, default=96, help="longest output per request (default 96)"
    )
    p.add_argument("--slot", default=None, help="the slot to load (default: the host's first)")
    args = p.parse_args(argv)
    if args.streams < 1 or args.max_output < 8:
        print("demo load: --streams must be >= 1 and --max-output >= 8", file=sys.stderr)
        return 2
    try:
        asyncio.run(
            DemoLoad(Path(args.agent_socket).parent, args.streams, args.max_output, args.slot).run()
        )
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
