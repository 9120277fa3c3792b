"""jobs/chooser.py's sequencing against a scripted host: preflight, swaps, measurement windows
that restart across a pause, the decision and the swap to the winner, the watch and --replan."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from sgltui import protocol
from sgltui.jobs import choose
from sgltui.jobs.chooser import Chooser, Refused


@dataclass
class Rec:
    """The part of a job's record the trial reads (agent/jobs/records.py JobRecord)."""

    id: str
    state: str
    choose: dict
    hold: str | None = None
    segments: list = field(default_factory=list)


class FakeHost:
    """A slot that swaps at once and a job whose counters the test moves."""

    def __init__(self, running: str, rates: dict[str, float], bad: tuple[str, ...] = ()) -> None:
        self.running = running
        self.rates = rates  # tok/s per profile
        self.bad = bad
        self.done, self.out, self.joules = 0, 0, 0.0
        self.total = 100_000
        self.events: list[tuple[str, dict]] = []
        self.commands: list[tuple[str, dict]] = []
        self.tok_s = 0.0
        self.state = "ready"

    def slot_now(self, rec: Rec) -> tuple[str | None, str, str | None]:
        return self.running, self.state, f"launch-{self.running}"

    def counters(self, rec: Rec) -> tuple[int, int, float]:
        return self.done, self.out, self.joules

    def warm_first(self, rec: Rec) -> dict | None:
        return None

    def remaining(self, rec: Rec) -> int | None:
        return self.total - self.done

    def concurrency_for(self, rec: Rec) -> int | None:
        return 4

    def time_scale(self, rec: Rec) -> float:
        return 1.0

    def job_tok_s(self, rec: Rec) -> float:
        return self.tok_s

    def power_w(self, rec: Rec) -> float | None:
        return 300.0

    async def command(self, rec: Rec, op: str, args: protocol.PreflightArgs) -> dict:
        # The Struct the agent would take: the op's own (a start takes no confirm).
        assert isinstance(args, protocol.OPS[op].args), (op, args)
        self.commands.append((op, protocol.args_dict(args)))
        if args.profile in self.bad:
            raise Refused(f"no profile {args.profile!r}")
        if op == "preflight":
            return {"ok": True}
        self.running, self.state = args.profile, "ready"
        return {"slot": {"state": "ready", "profile": self.running}, "result": {"ok": True}}

    def publish(self, rec: Rec, event: protocol.JobEvent) -> None:
        fields = protocol.event_dict(event)  # the event as recorded
        self.events.append((fields.pop("type"), fields))

    def persist(self, rec: Rec) -> None:
        pass

    def advance(self, seconds: float) -> None:
        """The job runs `seconds` on what the slot runs (16 tokens a completion, 50 J/s)."""
        toks = self.rates[self.running] * seconds
        self.out += int(toks)
        self.done = self.out // 16
        self.joules += 50.0 * seconds


async def _run(ch: Chooser, host: FakeHost, rec: Rec, seconds: float, step: float = 0.25) -> None:
    """Ticks and progress readings on a fake clock (the measurement reads time.monotonic)."""
    for _ in range(int(seconds / step)):
        host.advance(step)
        ch.on_progress()
        ch.tick()
        if ch.task is not None:
            await ch.task
        await asyncio.sleep(0)


@pytest.fixture
def fake_clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr("sgltui.jobs.chooser.time.monotonic", lambda: now[0])

    def tick(dt: float) -> None:
        now[0] += dt

    return tick


async def test_trial_measures_each_skips_the_bad_one_and_continues_on_the_winner(fake_clock):
    host = FakeHost("a", {"a": 1000.0, "b": 2000.0, "c": 1500.0}, bad=("x",))
    rec = Rec(id="j", state="running", choose=choose.new_trial(["a", "b", "x", "c"]))
    ch = Chooser(host, rec)
    orig = host.advance

    def advance(dt: float) -> None:
        fake_clock(dt)
        orig(dt)

    host.advance = advance  # type: ignore[method-assign]
    await _run(ch, host, rec, 120.0)
    d = choose.view(rec.choose)
    assert d["phase"] == "decided" and d["winner"] == "b", d
    states = {c["name"]: c["state"] for c in d["candidates"]}
    assert states == {"a": "measured", "b": "measured", "x": "skipped", "c": "measured"}
    assert host.running == "b"  # swapped back to the winner after c was measured
    swaps = [a["profile"] for op, a in host.commands if op == "swap"]
    assert swaps == ["b", "c", "b"]  # a ran already: measured first, no swap to it
    for c in d["candidates"]:
        if c["state"] == "measured":
            assert c["tok_s"] == pytest.approx(host.rates[c["name"]], rel=0.05)
    assert [e for e in host.events if e[0] == "job.decision"][0][1]["winner"] == "b"


async def test_a_pause_restarts_the_window_and_the_watch_replans(fake_clock, monkeypatch):
    host = FakeHost("a", {"a": 1000.0, "b": 500.0})
    rec = Rec(id="j", state="running", choose=choose.new_trial(["a", "b"], replan=True))
    ch = Chooser(host, rec, watch_s=5.0)
    orig = host.advance

    def advance(dt: float) -> None:
        fake_clock(dt)
        if rec.state == "running":
            orig(dt)

    host.advance = advance  # type: ignore[method-assign]
    await _run(ch, host, rec, 2.0)
    a = choose.get(rec.choose, "a")
    assert a["state"] == "measuring" and a["points"]
    rec.state = "paused"  # no answers for 30 s: not the server's speed
    await _run(ch, host, rec, 30.0)
    rec.state = "running"
    await _run(ch, host, rec, 60.0)
    d = choose.view(rec.choose)
    assert d["winner"] == "a"
    assert choose.get(rec.choose, "a")["tok_s"] == pytest.approx(1000.0, rel=0.05)
    # the rate falls to half of the projection: after the watch's window, said and replanned
    host.tok_s = 500.0
    await _run(ch, host, rec, 8.0)
    types = [t for t, _ in host.events]
    assert "job.watch" in types and "job.replan" in types
    assert rec.choose["round"] == 2 and rec.choose["phase"] == "trial"


async def test_a_step_failing_inside_the_agent_ends_the_trial_with_its_reason():
    """An op that fails unexpectedly (not a refusal) fails the trial with its reason at once:
    the trial once stayed 'swapping' for ever, its task's exception never retrieved."""

    class Broken(FakeHost):
        async def command(self, rec: Rec, op: str, args: protocol.PreflightArgs) -> dict:
            if op == "swap":
                raise RuntimeError("the op fell over")
            return await super().command(rec, op, args)

    host = Broken("a", {"a": 1000.0, "b": 2000.0})
    rec = Rec(id="j", state="running", choose=choose.new_trial(["b", "a"]))
    rec.choose["candidates"][1]["state"] = "measured"  # a is done: next is b, a swap
    rec.choose["candidates"][1]["tok_s"] = 1000.0
    ch = Chooser(host, rec)
    ch.checked = True
    ch.tick()
    assert ch.task is not None
    with pytest.raises(RuntimeError):
        await ch.task
    await asyncio.sleep(0)  # the done callback
    d = choose.view(rec.choose)
    assert d["phase"] == "decided" and "the op fell over" in d["note"], d
    b = choose.get(rec.choose, "b")
    assert b["state"] == "skipped" and "the op fell over" in b["reason"]
    failed = [f for t, f in host.events if t == "job.trial" and f["state"] == "failed"]
    assert failed and "the op fell over" in failed[0]["reason"]
    assert any(t == "job.decision" for t, _ in host.events)
    ch.tick()
    assert ch.task is None or ch.task.done()  # nothing more is tried


async def test_a_stopped_slot_is_started_with_a_start_and_swapped_with_confirm(fake_clock):
    """The trial's own commands are the ops' Structs: a start of a stopped slot takes no
    `confirm` (a dict with one was refused by the agent at run time, and the trial hung)."""
    host = FakeHost("a", {"a": 1000.0, "b": 2000.0})
    host.state = "stopped"
    rec = Rec(id="j", state="running", choose=choose.new_trial(["a", "b"]))
    ch = Chooser(host, rec)
    orig = host.advance

    def advance(dt: float) -> None:
        fake_clock(dt)
        orig(dt)

    host.advance = advance  # type: ignore[method-assign]
    await _run(ch, host, rec, 60.0)
    ops = [(op, a) for op, a in host.commands if op != "preflight"]
    assert ops[0][0] == "start" and "confirm" not in ops[0][1] and ops[0][1]["wait"]
    assert all(a["confirm"] for op, a in ops[1:] if op == "swap")


async def test_the_next_swap_and_window_follow_the_readings_not_the_second(fake_clock):
    """After a candidate is measured, the swap to the next one and its window begin at the
    progress readings, with no tick of the second between: a second's wait per step would be
    trial time on a fast (simulated) server. The trial reads the job at the server's pace
    while it runs, and the runner's own pace after the decision."""
    host = FakeHost("a", {"a": 1000.0, "b": 2000.0})
    rec = Rec(id="j", state="running", choose=choose.new_trial(["a", "b"]))
    ch = Chooser(host, rec)
    ch.tick()  # the preflight
    assert ch.task is not None
    await ch.task
    ch.tick()  # a runs already: its window begins
    assert ch.reading_s() == choose.READING_S  # a real server's scale: 0.25 s
    for _ in range(400):  # readings only from here
        fake_clock(0.25)
        host.advance(0.25)
        ch.on_progress()
        if ch.task is not None:
            await ch.task
        if rec.choose["phase"] == "decided":
            break
    d = choose.view(rec.choose)
    assert d["winner"] == "b", d
    assert [c["state"] for c in d["candidates"]] == ["measured", "measured"]
    assert ch.reading_s() is None


@dataclass
class Seg:
    profile: str | None
    launch_id: str | None
    completions: int
    info_hash: str | None = None


async def test_the_serving_profiles_cache_warm_up_counts_the_jobs_answers_before_the_trial():
    """The job ran on the serving profile's launch before its window began (the preflight, the
    first readings): those answers warmed its prefix cache, so its cold part is shorter by
    them; another launch's answers (an earlier server) do not count."""
    host = FakeHost("a", {"a": 1000.0, "b": 2000.0})
    host.done = 90
    trial = choose.new_trial(["a", "b"])
    choose.get(trial, "a")["warmup"] = 122
    segs = [Seg("a", "launch-old", 500), Seg("a", "launch-a", 90)]
    rec = Rec(id="j", state="running", choose=trial, segments=segs)  # type: ignore[arg-type]
    ch = Chooser(host, rec)
    ch.tick()  # the preflight
    assert ch.task is not None
    await ch.task
    ch.tick()  # a runs already: its window begins
    a = choose.get(trial, "a")
    assert a["state"] == "measuring"
    assert a["warm_until"] == 94 and a["cold_until"] == 90 + 32, a
