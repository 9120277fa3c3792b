"""The agent endpoint's decisions, pure: which profile a request's `model` names, what a request
for a profile needs (route, wake a standby, start on a free slot, evict the least recently used
profile, or wait), when a slot may switch away from the profile it serves (collation), and when
a profile has been idle long enough to be put away. No I/O and no clock of its own: the
endpoint (agent/endpoint/endpoint.py) gives it what the agent looks like now, so each rule is a unit test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal


@dataclass
class EndpointConfig:
    """agent.toml's [endpoint] (agent/config.py; docs/agent-config.md has each one's why)."""

    port: int | None = 30070  # the one OpenAI endpoint of the agent; None ("off"): none
    host: str = "127.0.0.1"
    queue_max: int = 256  # requests waiting for one profile; more get 503 at once
    wait_s: float = 300.0  # a request waits this long for its profile to wake or start, then 503
    lease_wait_s: float = 30.0  # ... this long when only leased profiles could make room
    collate_s: float = 5.0  # another profile's requests wait at most this long while one serves
    settle_s: float = 0.3  # the serving profile counts as done after this long with no request
    idle_s: float = 0.0  # a profile with no request this long is stopped (0: never; per profile)
    retry_after_s: int = 5  # the Retry-After of the endpoint's 503s


# ---- which profile a request names ------------------------------------------------------------


@dataclass(frozen=True)
class Routable:
    """A profile as the endpoint routes to it: the names a request may give for it."""

    name: str
    served: str | None = None  # its served-model-name (or model-path: what SGLang answers as)
    aliases: tuple[str, ...] = ()
    api_key: str | None = None
    idle_s: float | None = None  # its own idle time (None: agent.toml's [endpoint] idle_s)


def names_table(profiles: Iterable[Routable]) -> dict[str, list[str]]:
    """Every name a request may give -> the profiles it names, best first: a profile's own name
    wins over an alias, an alias over a served-model-name (two profiles of one model share
    that one)."""
    ranked: dict[str, list[tuple[int, str]]] = {}
    for p in profiles:
        for rank, key in [(0, p.name), *((1, a) for a in p.aliases), (2, p.served)]:
            if key:
                ranked.setdefault(key, []).append((rank, p.name))
    return {k: [n for _, n in sorted(set(v))] for k, v in ranked.items()}


def resolve(model: str, table: Mapping[str, list[str]], serving: Iterable[str] = ()) -> str | None:
    """The profile `model` names; of several (one served-model-name), the one serving now."""
    found = table.get(model)
    if not found:
        return None
    up = set(serving)
    return next((n for n in found if n in up), found[0])


# ---- what a request needs ------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotLook:
    """A slot as the policy sees it."""

    id: str
    profile: str | None = None  # what it serves (ready) or is moving to
    ready: bool = False  # its server serves `profile` and nothing is changing it
    busy: bool = False  # a launch, swap, stop or standby add runs on it (or the endpoint's own)
    asleep: tuple[str, ...] = ()  # profiles kept warm on it
    pooled: bool = False  # a host.toml pool's: its gateway routes, the endpoint never swaps it
    has_server: bool = False  # a server runs (ready or not)


Kind = Literal["route", "wait", "wake", "start", "evict", "blocked", "none"]


@dataclass(frozen=True)
class Action:
    kind: Kind
    slot: str | None = None
    victim: str | None = None  # the profile the slot serves now and gives up
    reason: str = ""


def plan(
    target: str,
    slots: Iterable[SlotLook],
    leased: Mapping[str, str],
    last_used: Mapping[str, float],
) -> Action:
    """What a request for `target` needs now. `leased`: profile -> who holds its lease;
    `last_used`: profile -> when a request last came for it (LRU)."""
    looks = list(slots)
    for s in looks:
        if s.ready and s.profile == target:
            return Action("route", s.id)
    if any(s.busy and s.profile == target for s in looks):
        return Action("wait", reason=f"{target} is being started")
    own = [s for s in looks if not s.pooled]
    held: list[str] = []

    def lru(s: SlotLook) -> float:
        return last_used.get(s.profile or "", 0.0)

    wakes = [s for s in own if target in s.asleep and not s.busy]
    for s in sorted(wakes, key=lru):
        if s.profile and s.has_server and s.profile in leased:
            held.append(f"{s.profile} on slot {s.id} is leased by {leased[s.profile]}")
            continue
        return Action("wake", s.id, s.profile if s.has_server else None, f"{target} is asleep")
    free = [s for s in own if not s.busy and not s.has_server]
    if free:
        return Action(
            "start", free[0].id, reason=f"{target} is not loaded; slot {free[0].id} is free"
        )
    victims = [s for s in own if not s.busy and s.ready and s.profile]
    for s in sorted(victims, key=lru):
        if s.profile in leased:
            held.append(f"{s.profile} on slot {s.id} is leased by {leased[s.profile or '']}")
            continue
        return Action("evict", s.id, s.profile, f"{s.profile} is the least recently used")
    if held:
        return Action("blocked", reason="; ".join(held))
    if any(s.busy for s in own):
        return Action("wait", reason="every slot is busy with a launch or a swap")
    return Action("none", reason="no slot of this agent can run it (each is in a pool)")


# ---- collation and idle --------------------------------------------------------------------------


@dataclass
class Traffic:
    """What the endpoint saw of one profile's requests (monotonic seconds)."""

    waiting: int = 0  # requests queued for it now
    waiting_since: float | None = None  # when the oldest of those came
    in_flight: int = 0  # passed through and not finished
    last_request: float = 0.0  # when one last came (or finished)
    extra: dict[str, float] = field(default_factory=dict)


def switch_due(serving: Traffic, waiter: Traffic, now: float, cfg: EndpointConfig) -> bool:
    """May a slot serving one profile switch to another that has requests waiting? When the
    serving one's queue is empty (nothing in flight or waiting, and no request for `settle_s`),
    or when the waiting one's oldest request has waited `collate_s`: ABAB arrivals become one
    switch per window (AABB), not one per request."""
    if serving.waiting == 0 and serving.in_flight == 0:
        if now - serving.last_request >= cfg.settle_s:
            return True
    since = waiter.waiting_since
    return since is not None and now - since >= cfg.collate_s


def idle_due(t: Traffic, idle_s: float | None, now: float) -> bool:
    """A serving profile with no request for `idle_s` (None or 0: never) is put away."""
    if not idle_s:
        return False
    return t.waiting == 0 and t.in_flight == 0 and now - t.last_request >= idle_s
