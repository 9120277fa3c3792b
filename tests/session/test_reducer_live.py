"""The one reducer (protocol.apply) against the live agent: a recorded session folded by it
says what the agent's own `status` said at the same moments (issue 14)."""

from __future__ import annotations

from pathlib import Path

from sgltui import protocol
from sgltui.session.replay import Replay

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
    moments = []

    def check() -> None:
        live = agent.wait_state(("ready", "stopped", "failed"))
        assert _folded(agent) == _fields(live), live
        moments.append((agent.events()[-1]["ts"], _fields(live)))

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
    assert [m[1]["state"] for m in moments] == ["ready", "ready", "ready", "stopped", "failed"]
    assert moments[-1][1]["cause"][0] == "oom"
    assert moments[0][1]["api_key_set"] is True

    # The replay of the session (the same reducer) agrees at each of those moments.
    replay = Replay.open(Path(agent.status()["agent"]["session_dir"]))
    for ts, live in moments:
        assert _fields(replay.status_at(ts)["slots"][0]) == live


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
    assert _fields(model.slot("0")) == _fields(live)
