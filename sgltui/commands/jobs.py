"""`sgltui job`: batch jobs run by the agent (OpenAI Batch files in and out, resumable).

sgltui job run INPUT.jsonl [-o OUTPUT.jsonl] [--slot ID] [--concurrency N|auto] [--name NAME]
               [--pin] [--no-wait] [--choose A,B,C [--objective time|energy] [--replan]
               [--trial-requests N] [--trial-minutes M]]
sgltui job status [JOB] [--json]      sgltui job list [--json]
sgltui job pause|resume|cancel [JOB]  sgltui job set [JOB] [--concurrency N|auto] [--pin|--unpin]
sgltui job verify INPUT OUTPUT [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from sgltui.commands import CliError, Subparsers
from sgltui.core import choice, units
from sgltui.core.locations import state_dir
from sgltui.protocol import JobState, JobView, to_builtins

ENDED = (JobState.DONE, JobState.CANCELLED, JobState.FAILED)


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "job",
        help="run an OpenAI batch file through a slot's server, resumable, exactly once",
        description="Batch jobs run in the agent: they outlive this command, the TUI and SSH, "
        "pause across swaps and resume after a crash from the output file.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  sgltui job run prompts.jsonl -o answers.jsonl --concurrency auto\n"
        "  sgltui job run prompts.jsonl --choose mtp,no-mtp,mtp-hicache\n"
        "  sgltui job status --json\n"
        "  sgltui job set --concurrency 64\n"
        "  sgltui job verify prompts.jsonl answers.jsonl\n"
        "`sgltui job ACTION --help` shows one action's options.",
    )
    acts = p.add_subparsers(dest="action", metavar="ACTION")
    _register_run(acts)
    st = acts.add_parser("status", help="one job's progress, rate, ETA and target")
    _job_arg(st)
    st.add_argument("--json", action="store_true", help="print JSON")
    st.set_defaults(handler=_status)
    ls = acts.add_parser("list", help="every job of this agent")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(handler=_list)
    for action, what in (
        ("pause", "stop sending its requests (those in flight finish)"),
        ("resume", "send its requests again"),
        ("cancel", "end it; its output file keeps every answer so far"),
    ):
        a = acts.add_parser(action, help=what)
        _job_arg(a)
        a.set_defaults(handler=_state_change)
    s = acts.add_parser("set", help="change a running job's concurrency or pin")
    _job_arg(s)
    s.add_argument("--concurrency", help="requests in flight: N, or auto")
    pin = s.add_mutually_exclusive_group()
    pin.add_argument("--pin", action="store_true", help="a swap of the slot must be confirmed")
    pin.add_argument("--unpin", action="store_true", help="swaps no longer ask")
    s.set_defaults(handler=_set)
    v = acts.add_parser("verify", help="check an output file against its input: every id once")
    v.add_argument("target", metavar="INPUT", nargs="?", help="the batch input file")
    v.add_argument("target2", metavar="OUTPUT", nargs="?", help="the job's output file")
    v.add_argument("--json", action="store_true", help="print JSON")
    v.set_defaults(handler=_verify)
    p.set_defaults(handler=lambda args: _usage(p))


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _job_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="JOB", nargs="?", help="id or name (default: the latest job)")


def _register_run(acts: Subparsers) -> None:
    p = acts.add_parser(
        "run",
        help="start a job from an OpenAI batch input file",
        description="Start a batch job in the agent and follow it (--no-wait: return once "
        "it is started).",
    )
    p.add_argument("target", metavar="INPUT", nargs="?", help="the batch input file (.jsonl)")
    p.add_argument("-o", "--output", help="output file (default INPUT.output.jsonl)")
    p.add_argument("--slot", default="0", help="server slot (default 0)")
    p.add_argument(
        "--pool",
        help="through this host.toml pool's endpoint (its gateway: a slot's swap does not pause it)",
    )
    p.add_argument(
        "--concurrency",
        help="requests in flight: N, or auto (the bench's best point, else the server's "
        "effective max running requests); default auto",
    )
    p.add_argument("--name", help="a name for the job (default: the input's file name)")
    p.add_argument("--pin", action="store_true", help="a swap of the slot must be confirmed")
    p.add_argument("--no-wait", action="store_true", help="return once the job is started")
    c = p.add_argument_group("choosing the profile")
    c.add_argument(
        "--choose",
        metavar="A,B,C",
        help="a trial on the job's own requests measures each profile in turn (answers kept), "
        "then the job continues on the one that finishes soonest; auto: the serving profile "
        "and `sgltui advise`'s proposals",
    )
    c.add_argument(
        "--choose-max",
        type=int,
        metavar="N",
        help="--choose auto: at most N of `sgltui advise`'s proposals beside the serving "
        "profile (default 3)",
    )
    c.add_argument(
        "--objective",
        choices=("time", "energy"),
        default="time",
        help="what --choose minimises: the job's wall time (default) or its GPU joules",
    )
    c.add_argument(
        "--replan",
        action="store_true",
        help="run the trial again when the rate stays >15%% under the projection for 5 min",
    )
    c.add_argument(
        "--trial-requests", type=int, help="cap on each candidate's trial requests (2000)"
    )
    c.add_argument("--trial-minutes", type=float, help="cap on each candidate's trial minutes (10)")
    p.set_defaults(handler=_run)


def _call(args: argparse.Namespace, op: str, autostart: bool = False, **kw: Any) -> Any:
    """A job op's typed reply (a JobView, or a list of them for job_list)."""
    from sgltui.client import AgentError, call_sync, decode_reply

    try:
        return decode_reply(op, call_sync(state_dir(args.state_dir), op, autostart=autostart, **kw))
    except AgentError as exc:
        raise CliError(str(exc)) from None


def _status(args: argparse.Namespace) -> int:
    view = _call(args, "job_status", job=args.target)
    if args.json:
        print(json.dumps(to_builtins(view), indent=1))
    else:
        print(render_status(view))
    return 0


def _set(args: argparse.Namespace) -> int:
    kw: dict[str, Any] = {}
    if args.concurrency:
        kw["concurrency"] = args.concurrency
    if args.pin or args.unpin:
        kw["pinned"] = bool(args.pin)
    if not kw:
        raise CliError("job set needs --concurrency N|auto, --pin or --unpin")
    view = _call(args, "job_set", job=args.target, **kw)
    print(f"job {view.id}: concurrency {view.concurrency}, pinned {view.pinned}")
    return 0


def _state_change(args: argparse.Namespace) -> int:
    view = _call(args, f"job_{args.action}", job=args.target)
    print(f"job {view.id} ({view.name}): {view.state}")
    return 0


def _run(args: argparse.Namespace) -> int:
    if not args.target:
        raise CliError("job run needs INPUT.jsonl (an OpenAI batch input file)")
    inp = Path(args.target).expanduser().resolve()
    kw: dict[str, Any] = {"input": str(inp), "slot": args.slot, "pinned": bool(args.pin)}
    if getattr(args, "pool", None):
        kw["pool"], kw["slot"] = args.pool, None
    if args.output:
        kw["output"] = str(Path(args.output).expanduser().resolve())
    if args.concurrency:
        kw["concurrency"] = args.concurrency
    if args.name:
        kw["name"] = args.name
    if args.choose:
        if args.concurrency:
            raise CliError(
                "--choose measures each profile at its automatic concurrency; drop --concurrency"
            )
        kw.update(choose=args.choose, objective=args.objective, replan=bool(args.replan))
        if args.choose.strip() == "auto":
            from sgltui.commands import choose_auto

            auto = choose_auto.resolve(args)
            kw["choose"], kw["choose_deltas"], kw["choose_advice"], kw["choose_warmup"] = auto
            print(f"--choose auto: {kw['choose'].replace(',', ', ')}", flush=True)
        if args.trial_requests is not None:
            if args.trial_requests < 1:
                raise CliError("--trial-requests must be at least 1")
            kw["trial_requests"] = args.trial_requests
        if args.trial_minutes is not None:
            if args.trial_minutes <= 0:
                raise CliError("--trial-minutes must be more than 0")
            kw["trial_minutes"] = args.trial_minutes
    elif args.choose_max is not None:
        raise CliError("--choose-max goes with --choose auto")
    elif args.replan or args.trial_requests or args.trial_minutes or args.objective != "time":
        raise CliError("--objective, --replan and --trial-* go with --choose A,B,C")
    view = _call(args, "job_run", autostart=True, **kw)
    print(
        f"job {view.id} ({view.name}): {view.total or 0:,} requests checked; "
        f"{view.answered:,} already answered in {view.output}; "
        f"concurrency {view.concurrency} ({view.concurrency_mode})"
    )
    if args.no_wait:
        print(f"it runs in the agent: `sgltui job status {view.id}`")
        return 0
    return watch(args, view.id)


def watch(args: argparse.Namespace, jid: str) -> int:
    """A progress line until the job ends; Ctrl-C only stops watching."""
    tty = sys.stdout.isatty()
    last = ""
    try:
        while True:
            view = _call(args, "job_status", job=jid)
            line = progress_line(view)
            if tty:
                sys.stdout.write("\r" + line.ljust(len(last)))
                sys.stdout.flush()
            elif line != last:
                print(line, flush=True)
            last = line
            if view.state in ENDED:
                break
            time.sleep(1.0)
    except KeyboardInterrupt:
        if tty:
            print()
        print(f"stopped watching; the job goes on in the agent (`sgltui job status {jid}`)")
        return 0
    if tty:
        print()
    print(render_status(view))
    return 0 if view.state == JobState.DONE and not view.failed else 1


def progress_line(v: JobView) -> str:
    total = v.total or 0
    done = v.answered + v.failed
    frac = done / total if total else 0.0
    width = 24
    filled = int(frac * width)
    bar = "#" * filled + "-" * (width - filled)
    state = str(v.state)
    if v.hold:
        state = f"held ({v.hold})"
    elif v.stalled:
        state = v.stalled
    elif v.state == JobState.WAITING and v.waiting_for:
        state = v.waiting_for
    return (
        f"[{bar}] {done:,}/{total:,} {frac:6.1%}  {v.completions_s:.1f} compl/s  "
        f"{units.tok_s(v.tok_s)}  ETA {units.estimate(v.eta_s)}  {state}"
        + (f"  failed {v.failed:,}" if v.failed else "")
        + (f"  [{choice.summary(to_builtins(v.decision))}]" if v.decision else "")
    )


def where(v: JobView) -> str:
    """Where the job sends: its pool (whose gateway picks the slot), or its slot."""
    return str(v.where())


def render_status(v: JobView) -> str:
    lines = [
        f"job {v.id} ({v.name}): {v.state}"
        + (f", held for a {v.hold}" if v.hold else "")
        + (" [pinned]" if v.pinned else ""),
        f"  input  {v.input}",
        f"  output {v.output}  (failures: {v.errors_output})",
        f"  {where(v)}, concurrency {v.concurrency} ({v.concurrency_mode}), "
        f"in flight {v.in_flight}",
        "  " + progress_line(v),
    ]
    if v.waiting_for:
        lines.append(f"  {v.waiting_for}")
    if v.stalled:
        lines.append(f"  {v.stalled}")
    if v.error:
        lines.append(f"  error: {v.error}")
    if v.joules:
        lines.append("  energy " + units.energy(v.joules, v.answered, v.out_tokens))
    for s in v.segments:
        secs = max(0.0, s.last - s.started)
        # under a second (answers that came at once): a rate over it would read millions
        rate = f" ({units.tok_s(s.out_tokens / secs)})" if secs >= 1.0 else ""
        took = units.duration(secs) if secs >= 1.0 else "under 1s"
        lines.append(
            f"  segment {s.profile} ({s.launch_id}): {s.completions:,} completions, "
            f"{s.out_tokens:,} tokens in {took}{rate}"
            + (f", {s.failed} failed" if s.failed else "")
            + (f", {units.energy(s.joules, s.completions, s.out_tokens)}" if s.joules else "")
        )
    if v.decision:
        d = to_builtins(v.decision)
        lines.append("  " + choice.summary(d))
        lines += ["    " + row for row in choice.table(d)]
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    views: list[JobView] = _call(args, "job_list")
    if args.json:
        print(json.dumps(to_builtins(views), indent=1))
        return 0
    if not views:
        print("no jobs; start one with `sgltui job run INPUT.jsonl`")
        return 0
    for v in views:
        print(
            f"{v.id}  {(v.name or '')[:24]:24}  {v.state:9}  "
            f"{v.answered:,}/{v.total or 0:,} answered  {v.failed:,} failed  {where(v)}"
        )
    return 0


def _verify(args: argparse.Namespace) -> int:
    from sgltui.jobs.batchfile import InputError
    from sgltui.jobs.verify import render, verify

    if not args.target or not args.target2:
        raise CliError("job verify needs INPUT and OUTPUT")
    inp, out = Path(args.target).expanduser(), Path(args.target2).expanduser()
    if not out.exists():
        raise CliError(f"{out} does not exist; check the output path")
    try:
        verdict = verify(inp, out)
    except InputError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(verdict.to_json(), indent=1))
    else:
        print(render(verdict, inp, out))
    return 0 if verdict.ok else 1
