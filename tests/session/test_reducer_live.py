"""The one reducer (protocol.apply) against the live agent: a recorded session folded by it
says what the agent's own `status` said at the same moments (issue 14)."""

from __future__ import annotations

from pathlib import Path

from sgltui import protocol
from sgltui.session.reader import load_session
from sgltui.session.replay import Replay
from sgltui.session.report import build_report

# What events determine; pids, uptime and capacity are the live agent's (processes, telemetry).
FIELDS = (
    "id",
    "profile",
    "state",
    "phase",
    "progress",
    "eta_s",
    "host",
    "port",
    "pid",
    "launch_id",
    "log_path",
    "command",
    "command_hash",
    "swap",
    "api_key_set",
)


def _fields(slot: dict) -> dict:
    out = {k: slot.get(k) for k in FIELDS}
    cause = slot.get("cause")
    out["cause"] = (cause or {}).get("kind"), (cause or {}).get("summary")
    last = dict(slot.get("last_swap") or {})
    last.pop("finished_at", None)  # the agent's clock at the end vs the event's stamp
    if last.get("cause"):
        last["cause"] = last["cause"]["kind"], last["cause"]["summary"]
    out["last_swap"] = last
    return out


def _folded(agent) -> dict:
    state = protocol.fold(agent.events())
    return _fields(protocol.slot_dict(state.slots["0"]))


def test_recorded_events_fold_to_the_live_status(agent):
    a = agent.write_profile("r-a", api_key="sk-reducer-1234")
    b = agent.write_profile("r-b")
    bad = agent.write_profile("r-oom", sim_fail_at_start="oom")
    # The crash time counts from the simulator's start: room for a slow start-up under load.
    crash = agent.write_profile("r-crash", sim_crash_after=8)
    moments = []

    def check(states=("ready", "stopped", "failed")) -> dict:
        live = agent.wait_state(states, timeout=60)
        assert _folded(agent) == _fields(live), live
        moments.append((agent.events()[-1]["ts"], _fields(live)))
        return live

    agent.call("start", profile=a, wait=True)
    check()
    agent.call("swap", profile=b, wait=True)
    check()
    agent.call("swap", profile=bad, wait=True)  # fails, rolls back to r-b
    check()
    agent.call("stop", wait=True)
    check()
    agent.call("start", profile=bad, wait=True)  # fails: a cause
    check()
    agent.call("start", profile=crash, wait=True)
    check()
    check(("crashed",))  # a server that dies after it was ready
    assert [m[1]["state"] for m in moments] == [
        "ready",
        "ready",
        "ready",
        "stopped",
        "failed",
        "ready",
        "crashed",
    ]
    assert moments[4][1]["cause"][0] == "oom" and moments[6][1]["cause"][1]
    assert moments[0][1]["api_key_set"] is True

    # The replay of the session (the same reducer) agrees at each of those moments.
    session_dir = Path(agent.status()["agent"]["session_dir"])
    replay = Replay.open(session_dir)
    for ts, live in moments:
        assert _fields(replay.status_at(ts)["slots"][0]) == live

    # ...and at its end, field by field, with the agent that recorded it.
    status = agent.status()
    final = replay.status_at(replay.end)
    assert _fields(final["slots"][0]) == _fields(status["slots"][0])
    for key in ("pid", "version", "session_dir"):
        assert final["agent"][key] == status["agent"][key], key
    assert final["agent"]["disk"]["ok"] is True and final["bench"] is None
    # The profiles it ran, with their launcher (a replay showed the simulator's as real SGLang).
    live_launcher = {p["name"]: p.get("launcher") for p in status["profiles"]}
    replayed = {p["name"]: p["launcher"] for p in final["profiles"]}
    assert replayed == {n: live_launcher[n] for n in replayed} and set(replayed) == {
        a,
        b,
        bad,
        crash,
    }

    # The history the report's tables come from: each launch the live agent ran, with the
    # outcome it showed, and each failure with its cause.
    state = protocol.fold(agent.events())
    shown = {m["launch_id"]: m["state"] for _ts, m in moments if m["state"] != "stopped"}
    outcome = {x.launch_id: x.outcome for x in state.launches}
    assert {k: outcome[k] for k in shown} == shown, outcome
    failed = [(x.launch_id, x.state, x.cause.kind if x.cause else None) for x in state.failures]
    assert (moments[4][1]["launch_id"], "failed", "oom") in failed
    assert failed[-1] == (moments[6][1]["launch_id"], "crashed", moments[6][1]["cause"][0])
    assert [x["outcome"] for x in build_report(load_session(session_dir))["launches"]] == [
        x.outcome for x in state.launches
    ]


async def test_the_tui_model_folds_pushes_to_the_live_status(agent):
    """The TUI model, given one STATUS and then only the pushes, ends where the agent's status is
    (the same reducer as replay; before, its own fold kept a phase and a swap the agent had not)."""
    from sgltui.tui.model import TuiModel

    a, b = agent.write_profile("m-a"), agent.write_profile("m-b")
    model = TuiModel()
    async with agent.client("viewer") as viewer, agent.client("driver") as driver:
        model.apply_status(await viewer.call("status"))
        await viewer.call("subscribe")
        await driver.call("start", profile=a, wait=True)
        await driver.call("swap", profile=b, wait=True)
        live = next(s for s in (await driver.call("status"))["slots"] if s["id"] == "0")
        assert live["state"] == "ready" and live["profile"] == b
        seen = 0
        async for push in viewer.pushes():
            model.apply_push(push)
            if push["push"] == "event":
                seen += 1
                data = push["data"]
                if data["type"] == "swap.done" and data.get("to") == b:
                    break
    assert seen > 5
    assert _fields(protocol.to_builtins(model.slot("0"))) == _fields(live)
