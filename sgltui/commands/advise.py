"""`sgltui advise`: the profiles nobody wrote, proposed from what the serving one measured.

Computed here, from the agent's status (the slot's capacity card and live reading, the host and
its GPUs, the job), by core/advice.py; nothing is started or written unless `--accept NAME`
writes that proposal as a profile that `extends` the serving one (then `sgltui swap NAME`, or
`sgltui standby add NAME` to keep it warm first).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from sgltui import protocol
from sgltui.client import AgentError, call_sync, decode_reply
from sgltui.commands import CliError, Subparsers
from sgltui.commands.server import profile_dirs_of, state_of
from sgltui.core import advice, advice_inputs, job_input, locations
from sgltui.core.profiles import Profile, ProfileError, get_profile
from sgltui.core.validate import catalog_for


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "advise",
        help="propose profiles the serving one's measurements point to (hicache, max running, ...)",
    )
    p.add_argument("--slot", help="slot name (default: the agent's only, or first serving, slot)")
    p.add_argument("--job", help="the job whose prompts and concurrency to advise for")
    p.add_argument("--json", action="store_true", help='{"serving", "proposals": [...]}')
    p.add_argument("--prompt-tokens", type=float, help="the job's mean prompt length (by hand)")
    p.add_argument("--output-tokens", type=float, help="the job's mean output length (by hand)")
    p.add_argument("--concurrency", type=int, help="the concurrency the job runs at (by hand)")
    p.add_argument(
        "--input",
        metavar="FILE",
        help="a batch input not yet run: its prompt and output lengths, and how much its "
        "prompts share prefixes, from its first lines",
    )
    p.add_argument(
        "--accept",
        metavar="NAME",
        help="write proposal NAME as a profile (it extends the serving one) in your profiles",
    )
    p.set_defaults(handler=cmd_advise)


def _status(args: argparse.Namespace) -> protocol.StatusReply:
    try:
        reply: protocol.StatusReply = decode_reply(
            "status", call_sync(state_of(args), "status", autostart=False)
        )
    except AgentError as exc:
        raise CliError(f"{exc}; start a profile first (`sgltui start PROFILE`)") from None
    return reply


def _slot(st: protocol.StatusReply, name: str | None) -> protocol.SlotStatus:
    if name:
        slot = next((s for s in st.slots if s.id == name), None)
        if slot is None:
            have = ", ".join(s.id for s in st.slots) or "none"
            raise CliError(f"no slot {name!r} (slots: {have})")
        return slot
    serving = [s for s in st.slots if s.profile and s.capacity is not None]
    if not serving:
        raise CliError("no slot serves a profile yet: start one (`sgltui start PROFILE`)")
    return serving[0]


# The card is built from the start-up log first and completed from /server_info a moment after
# ready; what bounds the server (the flag it was given, above all) is known only then.
CARD_WAIT_S = 10.0


def _status_with_card(
    args: argparse.Namespace, slot_name: str | None
) -> tuple[protocol.StatusReply, protocol.SlotStatus]:
    deadline = time.monotonic() + CARD_WAIT_S
    while True:
        st = _status(args)
        try:
            slot = _slot(st, slot_name)
        except CliError:
            if time.monotonic() < deadline and any(s.state == "ready" for s in st.slots):
                time.sleep(0.2)  # ready, its card not yet built from the start-up log
                continue
            raise
        card = slot.capacity
        complete = card is not None and "server_info" in card.sources
        if complete or slot.state != "ready" or time.monotonic() >= deadline:
            return st, slot
        time.sleep(0.2)


def build(args: argparse.Namespace) -> tuple[advice.Advice, Profile]:
    overrides: dict[str, Any] = {
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "concurrency": args.concurrency,
    }
    if getattr(args, "input", None):
        path = Path(args.input).expanduser()
        if not path.is_file():
            raise CliError(f"--input {args.input}: no such file")
        first = job_input.sample(path)
        overrides["prefix"] = first.prefix
        for key, value in (
            ("prompt_tokens", first.prompt_tokens),
            ("output_tokens", first.output_tokens),
        ):
            if overrides[key] is None:
                overrides[key] = value  # given by hand wins
    return advise_for(args, args.slot, args.job, overrides)


def advise_for(
    args: argparse.Namespace, slot_name: str | None, job_id: str | None, overrides: dict[str, Any]
) -> tuple[advice.Advice, Profile]:
    """The proposals for the profile `slot_name` serves (`job run --choose auto` asks too)."""
    st, slot = _status_with_card(args, slot_name)
    if not slot.profile or slot.capacity is None:
        raise CliError(
            f"slot {slot.id} serves nothing measured yet: wait until it is ready "
            "(`sgltui status`), then ask again"
        )
    try:
        profile = get_profile(slot.profile, profile_dirs_of(args))
    except ProfileError as exc:
        raise CliError(f"the serving profile cannot be read: {exc}") from None
    job = advice_inputs.job_for(slot.id, st.jobs, job_id)
    if job_id and job is None:
        raise CliError(f"no job {job_id!r}: `sgltui job list` names them")
    s = advice_inputs.situation(profile, slot, st.telemetry, job, overrides=overrides)
    catalog = catalog_for(profile)
    return (
        advice.advise(
            s, advice.profile_check(profile, catalog), lambda n: catalog.lookup(n) is not None
        ),
        profile,
    )


def cmd_advise(args: argparse.Namespace) -> int:
    result, profile = build(args)
    if args.accept:
        return _accept(result, args.accept)
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
        return 0
    if not result.proposals:
        print(f"{profile.name}: nothing to propose from what it measured")
    for i, p in enumerate(result.proposals, 1):
        delta = " ".join(f"{k}={json.dumps(v)}" for k, v in p.delta.items())
        print(f"{i}. {p.name}  [{delta}]")
        print(f"   why: {p.reason}")
        print(f"   figure: {p.figure}")
        print(f"   cost: {p.cost['text']}")
    for r in result.refused:
        print(f"refused {r['name']}: {r['why']}")
    for note in result.notes:
        print(f"note: {note}")
    if result.proposals:
        print(f"`sgltui advise --accept {result.proposals[0].name}` writes the first as a profile")
    return 0


def _accept(result: advice.Advice, name: str) -> int:
    chosen = next((p for p in result.proposals if p.name == name), None)
    if chosen is None:
        have = ", ".join(p.name for p in result.proposals) or "none now"
        raise CliError(f"no proposal {name!r} (proposals: {have})")
    path = advice.write_accepted(result.serving, chosen, locations.config_dir() / "profiles")
    print(
        f"wrote {path} (extends {result.serving}); `sgltui swap {name}` serves it, "
        f"`sgltui standby add {name}` keeps it warm first"
    )
    return 0
