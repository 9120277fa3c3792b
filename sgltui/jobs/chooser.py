"""Drives a --choose job's trial from the agent: swap to each candidate, measure, decide, watch.

The statistics and the decision are jobs/choose.py (pure); this is the sequencing, and it
reaches the agent only through `ChooseHost`, a narrow interface the agent's jobs host
implements: what the slot runs, the job's counters, and lifecycle commands (preflight, start,
swap) sent as any client would send them, so every swap goes through the agent's one path
(pause the job, drain, stop, launch, ready, resume) and is recorded like a user's.

Every change of the trial's state is saved in the job's record at once (`persist`): a restarted
agent (kill -9) finds the candidate being measured, keeps what the finished ones measured and
the requests the current one already used, and goes on from there; answers written are never
sent again (the runner resumes from the output file).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from sgltui import protocol
from sgltui.core.tasks import one_line, watched
from sgltui.jobs import choose
from sgltui.jobs.choose import Segment

log = logging.getLogger("sgltui.jobs.chooser")


class Refused(Exception):
    """A lifecycle command the agent refused, in its one line, and its code (protocol.ErrorCode:
    `busy` is waited out)."""

    def __init__(self, message: str, code: protocol.ErrorCode = "refused") -> None:
        super().__init__(message)
        self.code: protocol.ErrorCode = code


class TrialJob(Protocol):
    """What the trial reads of its job's record (agent/jobs/records.py JobRecord)."""

    @property
    def id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def hold(self) -> str | None: ...
    @property
    def choose(self) -> dict | None:
        """The trial's state (jobs/choose.py), saved with the record."""

    @property
    def segments(self) -> Sequence[Segment]: ...


J = TypeVar("J", bound=TrialJob)
J_contra = TypeVar("J_contra", bound=TrialJob, contravariant=True)


class ChooseHost(Protocol[J_contra]):
    def slot_now(self, rec: J_contra) -> tuple[str | None, str, str | None]:
        """(profile the job's slot runs, the slot's state, its launch id)."""

    def counters(self, rec: J_contra) -> tuple[int, int, float]:
        """The job's answered completions, output tokens and joules so far."""

    def remaining(self, rec: J_contra) -> int | None: ...

    def warm_first(self, rec: J_contra) -> dict | None:
        """The runner's warm-first pass (jobs/warm_first.py report), None where it makes none."""

    def concurrency_for(self, rec: J_contra) -> int | None:
        """The job's concurrency once set for the slot's current launch (auto), else None."""

    def time_scale(self, rec: J_contra) -> float:
        """Wall seconds per server second of the job's slot (the simulator's scale; real: 1)."""

    def job_tok_s(self, rec: J_contra) -> float: ...

    def power_w(self, rec: J_contra) -> float | None: ...

    async def command(self, rec: J_contra, op: str, args: protocol.PreflightArgs) -> dict:
        """An agent op on the job's slot (the host fills in the slot or pool), waited for;
        raises Refused with the agent's line."""

    def publish(self, rec: J_contra, event: protocol.JobEvent) -> None: ...

    def persist(self, rec: J_contra) -> None: ...


class Chooser(Generic[J]):
    """One --choose job's driver (in memory); its state is rec.choose (saved)."""

    def __init__(self, host: ChooseHost[J], rec: J, watch_s: float = choose.WATCH_FOR_S) -> None:
        self.host = host
        self.watch_s = watch_s  # [jobs] choose_watch_s
        self.rec = rec
        self.task: asyncio.Task | None = None  # a preflight or swap under way
        self.measuring: str | None = None  # the candidate whose window began in this agent
        self.watch: choose.Watch | None = None
        self.checked = bool(self.trial.get("prechecked"))

    @property
    def trial(self) -> dict:
        trial = self.rec.choose
        assert trial is not None, "a Chooser is made for a --choose job only"
        return trial

    def busy(self) -> bool:
        return self.task is not None and not self.task.done()

    def close(self) -> None:
        if self.busy():
            assert self.task is not None
            self.task.cancel()

    # ---- the job's progress -------------------------------------------------------------------

    def on_progress(self) -> None:
        """A progress reading: the measured candidate takes it."""
        trial = self.trial
        name = trial.get("current")
        if trial["phase"] != "trial":
            return
        c = choose.get(trial, name) if name is not None else None
        if c is None or c["state"] != "measuring":
            # the trial's next step (the preflight, the first window, a swap, the window after
            # it) at the reading, not up to a second later: the trial's share of the job's time
            self.tick()
            return
        done, out, joules = self.host.counters(self.rec)
        if self.measuring == name and self._sending():
            _, _, launch = self.host.slot_now(self.rec)
            choose.warm_first(c, self.host.warm_first(self.rec), launch, done)
            choose.observe(c, time.monotonic(), done, out, joules)
            if not self.busy():
                self._trial_step()  # a stop is seen at the reading, not up to a second later
        else:
            choose.count(c, done, out, joules)  # resumed: counted before its new window begins

    def reading_s(self) -> float | None:
        """How often the runner reads the job's progress while the trial runs (the server's
        0.25 s: jobs/choose.py reading_s), or None when no trial runs (the runner's own pace)."""
        if self.trial["phase"] != "trial":
            return None
        return choose.reading_s(self.host.time_scale(self.rec))

    def on_finished(self) -> None:
        """The job ended (every request answered): a trial still running ends with it."""
        trial = self.trial
        if trial["phase"] != "trial":
            return
        cur = trial.get("current")
        if cur is not None:
            c = choose.get(trial, cur)
            if c["state"] == "measuring" and c["tok_s"]:
                choose.finish(c, "the job ended")
        done, _, _ = self.host.counters(self.rec)
        self._decide(f"the job ({done:,} requests) finished during the trial", ended=True)

    # ---- each second --------------------------------------------------------------------------

    def tick(self) -> None:
        if self.busy():
            return
        if not self.checked:
            self._start(self._preflight())
            return
        trial = self.trial
        if trial["phase"] == "trial":
            self._trial_step()
        elif trial["phase"] == "decided":
            self._watch_step()

    def _start(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.task = watched(task, f"job {self.rec.id}: --choose trial", self._failed)

    def _failed(self, exc: BaseException) -> None:
        """A step of the trial failed inside the agent: the trial ends with the reason (the job
        goes on with what the slot runs), never a trial left 'swapping' for ever."""
        trial = self.trial
        reason = f"the trial stopped: {one_line(exc)} (see agent.log)"
        cur = trial.get("current")
        if cur is not None:
            c = choose.get(trial, cur)
            if c["state"] in ("pending", "swapping", "measuring"):
                choose.skip(trial, cur, reason)
                self.host.publish(
                    self.rec, protocol.JobTrial(profile=cur, state="failed", reason=reason)
                )
        trial["current"] = None
        trial["phase"], trial["winner"] = "decided", None
        trial["note"] = f"{reason}; the job runs on what the slot runs"
        trial["prechecked"] = True
        self.checked = True
        self.measuring = None
        self._emit_decision()
        self.host.persist(self.rec)

    async def _preflight(self) -> None:
        """Candidates that would not launch are skipped with the reason, before any swap."""
        trial = self.trial
        for c in trial["candidates"]:
            if c["state"] != "pending":
                continue
            reason: str | None
            try:
                check = protocol.PreflightArgs(profile=c["name"])
                res = await self.host.command(self.rec, "preflight", check)
            except Refused as exc:
                reason = str(exc)
            else:
                reason = None if res.get("ok") else str(res.get("error") or "preflight failed")
            if reason is not None:
                choose.skip(trial, c["name"], f"preflight: {reason}")
                self.host.publish(
                    self.rec, protocol.JobTrial(profile=c["name"], state="skipped", reason=reason)
                )
        trial["prechecked"] = True
        self.checked = True
        usable = [c for c in trial["candidates"] if c["state"] != "skipped"]
        if trial["phase"] == "trial" and len(usable) == 1:
            # one candidate left: nothing to compare, no trial
            trial["phase"], trial["winner"] = "decided", usable[0]["name"]
            trial["note"] = "one candidate passed preflight: no trial"
            self._emit_decision()
            await self._go_to(usable[0]["name"], final=True)
        elif trial["phase"] == "decided" and trial.get("winner") and usable:
            await self._go_to(trial["winner"], final=True)  # the single candidate, no trial
        elif not usable:
            trial["phase"], trial["winner"] = "decided", None
            trial["note"] = "every candidate failed preflight; the job runs on what the slot runs"
            self._emit_decision()
        self.host.persist(self.rec)

    def _trial_step(self) -> None:
        trial = self.trial
        running, state, _launch = self.host.slot_now(self.rec)
        cur = trial.get("current")
        c = choose.get(trial, cur) if cur else None
        if c is not None and c["state"] == "measuring":
            if not self._sending():
                # paused, held or waiting: the time without answers is not the server's speed;
                # the measurement goes on in a new window (and a new warm-up) when it sends again
                self.measuring = None
                return
            if self.measuring != cur:
                # this agent has not seen it begin (a restart during the trial): a new window
                if running == cur and state == "ready":
                    self._begin(c)
                return
            why = choose.enough(c, trial)
            if why is not None:
                choose.finish(c, why)
                if why.startswith(choose.CLEAR_BEST):
                    choose.skip_rest(trial, c)  # advise expects less of the rest: decided
                self.measuring = None
                # the measured ones' projected finish, shown while the others are measured
                done, out, _ = self.host.counters(self.rec)
                choose.project(
                    trial,
                    self.host.remaining(self.rec) or 0,
                    out / done if done else 0.0,
                    running,
                    self.host.power_w(self.rec),
                )
                self.host.publish(
                    self.rec,
                    protocol.JobTrial(
                        profile=c["name"],
                        state="measured",
                        reason=why,
                        tok_s=c["tok_s"],
                        completions=c["requests"],
                    ),
                )
                self.host.persist(self.rec)
                if choose.next_candidate(trial, None) is None:
                    self._decide(None)  # the last one: decided now, not at the next second
            return
        if c is not None and c["state"] == "swapping" and running == cur and state == "ready":
            self._begin(c)  # the swap finished (perhaps in an agent that was killed since)
            return
        nxt = choose.next_candidate(trial, running if state == "ready" else None)
        if nxt is None:
            self._decide(None)
            return
        trial["current"] = nxt["name"]
        if running == nxt["name"] and state == "ready":
            if nxt["swap_s"] is None:
                nxt["swap_s"], nxt["swap_j"] = 0.0, 0.0  # it already ran: no swap to it
            self._begin(nxt)
        elif state in ("ready", "stopped", "failed", "crashed"):
            nxt["state"] = "swapping"
            self.host.persist(self.rec)
            self.host.publish(self.rec, protocol.JobTrial(profile=nxt["name"], state="swapping"))
            self._start(self._swap_for_trial(nxt))
        # else: the slot is busy (launching, stopping): wait for it

    def _sending(self) -> bool:
        return self.rec.state == "running" and not self.rec.hold

    def _begin(self, c: dict) -> None:
        if not self._sending():
            return  # it begins once the job sends to it (after the swap's hold, a pause)
        conc = self.host.concurrency_for(self.rec)
        if conc is None:
            return  # the job's automatic concurrency for this launch is not known yet
        done, out, joules = self.host.counters(self.rec)
        # the job's answers from this launch so far warmed its prefix cache (the serving
        # profile's, from the job's start): its cache warm-up counts them
        _, _, launch = self.host.slot_now(self.rec)
        here = sum(
            int(s.completions)
            for s in self.rec.segments
            if launch is not None and s.launch_id == launch
        )
        scale = self.host.time_scale(self.rec)
        choose.begin(c, done, out, joules, conc, scale, answered_here=here)
        self.measuring = c["name"]
        self.host.publish(
            self.rec, protocol.JobTrial(profile=c["name"], state="measuring", concurrency=conc)
        )
        self.host.persist(self.rec)

    async def _swap_for_trial(self, c: dict) -> None:
        t0 = time.monotonic()
        _, _, j0 = self.host.counters(self.rec)
        reason = await self._go_to(c["name"], final=False)
        if reason is not None:
            choose.skip(self.trial, c["name"], reason)
            self.trial["current"] = None
            self.host.publish(
                self.rec, protocol.JobTrial(profile=c["name"], state="skipped", reason=reason)
            )
        else:
            _, _, j1 = self.host.counters(self.rec)
            c["swap_s"] = round(time.monotonic() - t0, 2)
            c["swap_j"] = round(max(0.0, j1 - j0), 1)
        self.host.persist(self.rec)

    async def _go_to(self, name: str, final: bool) -> str | None:
        """Swap (or start) the job's slot to `name`; None when it runs, else why not."""
        for _ in range(600):  # another client's command on the slot: wait for it (bounded)
            running, state, _ = self.host.slot_now(self.rec)
            if running == name and state == "ready":
                return None
            op = "start" if state in ("stopped", "failed", "crashed") else "swap"
            try:
                # confirm: the job asking is the one pinned to the slot (a start takes none)
                args = (
                    protocol.StartArgs(profile=name, wait=True)
                    if op == "start"
                    else protocol.SwapArgs(profile=name, wait=True, confirm=True)
                )
                res = await self.host.command(self.rec, op, args)
            except Refused as exc:
                if exc.code == "busy":  # another client's command on the slot: wait for it
                    await asyncio.sleep(1.0)
                    continue
                return str(exc)
            slot = res.get("slot") or {}
            if slot.get("state") == "ready" and slot.get("profile") == name:
                return None
            result = res.get("result") or {}
            why = result.get("error") or result.get("cause") or slot.get("cause")
            if isinstance(why, dict):  # a classified failure: its one line
                why = why.get("summary") or why.get("message") or why.get("kind")
            back = " (rolled back)" if result.get("rolled_back") else ""
            return f"{op} to {name} failed{back}: {why or slot.get('state')}"
        return f"slot stayed busy; {name} was not tried"

    def _decide(self, note: str | None, ended: bool = False) -> None:
        trial = self.trial
        running, state, _ = self.host.slot_now(self.rec)
        remaining = self.host.remaining(self.rec) or 0
        done, out, _ = self.host.counters(self.rec)
        mean_out = out / done if done else 0.0
        if ended:
            # nothing is left to run: the verdict is for a job like this one from the start,
            # swaps left out (what the user would want to know for the next one)
            choose.project(trial, done, mean_out, None, self.host.power_w(self.rec))
            for c in trial["candidates"]:
                if c["projected_s"] is not None and c["swap_s"]:
                    c["projected_s"] = round(c["projected_s"] - float(c["swap_s"]), 1)
        else:
            choose.project(trial, remaining, mean_out, running, self.host.power_w(self.rec))
        winner = choose.decide(trial, note)
        trial["current"] = None
        self.measuring = None
        self._emit_decision()
        self.host.persist(self.rec)
        if winner is not None and remaining > 0 and not (running == winner and state == "ready"):
            self._start(self._to_winner(winner))

    async def _to_winner(self, winner: str) -> None:
        reason = await self._go_to(winner, final=True)
        if reason is not None:
            self.trial["note"] = f"could not swap to the winner {winner}: {reason}"
            self.host.publish(
                self.rec, protocol.JobTrial(profile=winner, state="failed", reason=reason)
            )
            self.host.persist(self.rec)

    def _emit_decision(self) -> None:
        v = choose.view(self.trial, self.rec.segments)
        self.host.publish(
            self.rec,
            protocol.JobDecisionEvent(
                winner=v["winner"],
                objective=v["objective"],
                round=v["round"],
                note=v["note"],
                candidates=msgspec.convert(v["candidates"], list[protocol.JobCandidate]),
                advice=v["advice"],
            ),
        )

    def _watch_step(self) -> None:
        trial = self.trial
        winner, projected = trial.get("winner"), trial.get("projected_tok_s")
        running, state, _ = self.host.slot_now(self.rec)
        if not winner or not projected or running != winner or state != "ready":
            return
        if self.watch is None or self.watch.projected != projected:
            self.watch = choose.Watch(float(projected), self.watch_s)
        msg = self.watch.update(time.monotonic(), self.host.job_tok_s(self.rec))
        if msg is None or trial.get("watch") == msg:
            return
        if trial.get("watch") is None:
            trial["watch"] = msg
            self.host.publish(self.rec, protocol.JobWatch(profile=winner, message=msg))
            if trial.get("replan"):
                self.host.publish(self.rec, protocol.JobReplan(profile=winner, message=msg))
                choose.restart(trial, running)
                self.watch = None
            self.host.persist(self.rec)
