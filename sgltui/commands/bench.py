"""`sgltui bench`: run a sweep (via the agent, or straight at --url), re-print or export a run,
list and stop runs.

    sgltui bench [--profile P ...] --concurrency 1,4,16,64 --input-len L --output-len L
                 (--requests N | --duration S) [--repeat K] [--workload random|shared-prefix|FILE.jsonl]
                 [--url URL] [--job-completions N --job-output-len L] [--export-md F] [--export-csv F]
    sgltui bench compare RUN.json [--export-md F] [--export-csv F]
    sgltui bench list | sgltui bench stop RUN_ID
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from sgltui.commands import CliError, Subparsers
from sgltui.core import config as env_config
from sgltui.core.locations import state_dir
from sgltui.protocol import BenchState

# sgltui.bench.loadgen.API_KEY_ENV, from core/config.py (the CLI starts without the bench stack).
API_KEY_ENV = env_config.BENCH_API_KEY_ENV


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "bench",
        help="benchmark profiles: sweep concurrency, compare, time to finish a job",
        description="Benchmark one or more profiles (swapped in through the agent) or a running server (--url), "
        "then compare them. `sgltui bench compare RUN.json` re-prints a stored run.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  sgltui bench --profile demo-mtp --profile demo-no-mtp --concurrency 1,4,16 \\\n"
        "      --input-len 512 --output-len 256 --requests 200 --job-completions 902087 --job-output-len 1000\n"
        "  sgltui bench --url http://127.0.0.1:30000 --concurrency 8 --duration 60\n"
        "  sgltui bench compare ~/.local/state/sgltui/sessions/.../bench/RUN.json --export-md cmp.md\n"
        "`sgltui bench ACTION --help` shows one action's options; a bare `sgltui bench` is `run`.",
    )
    _run_options(p)
    p.set_defaults(handler=handle)
    acts = p.add_subparsers(dest="action", metavar="ACTION")
    run = acts.add_parser(
        "run",
        help="sweep concurrency on each profile (the default action)",
        description="Benchmark one or more profiles (swapped in through the agent), a pool, "
        "or a running server (--url).",
    )
    # The defaults live on `bench` itself (a bare `sgltui bench` runs): here they are left out,
    # so `sgltui bench --requests 4 run` keeps the 4.
    for option in _run_options(run):
        option.default = argparse.SUPPRESS
    run.set_defaults(handler=handle)
    cmp = acts.add_parser("compare", help="re-print a stored run, or export it")
    cmp.add_argument(
        "target", metavar="RUN.json", nargs="?", help="a run file (bench/ of a session)"
    )
    cmp.add_argument(
        "other", metavar="OTHER.json", nargs="?", help="a second run: the flags that differ"
    )
    _export_options(cmp)
    cmp.set_defaults(handler=_compare)
    ls = acts.add_parser("list", help="this agent's bench runs")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(handler=_list)
    stop = acts.add_parser("stop", help="stop a run; the points measured so far are kept")
    stop.add_argument("target", metavar="RUN_ID", nargs="?", help="see `sgltui bench list`")
    stop.set_defaults(handler=_stop)


def _export_options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        p.add_argument("--export-md", metavar="F", help="write the comparison as Markdown to F"),
        p.add_argument("--export-csv", metavar="F", help="write the comparison as CSV to F"),
        p.add_argument(
            "--json", action="store_true", help="print the result file's JSON instead of tables"
        ),
    ]


def _run_options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options of a run (on `bench` and on `bench run`); returns them."""
    opts: list[argparse.Action] = []

    def add(*names: str, **kw: Any) -> None:
        opts.append(p.add_argument(*names, **kw))

    add(
        "--profile",
        action="append",
        default=[],
        metavar="P",
        help="profile to swap in and measure (repeatable); default: what slot 0 serves now",
    )
    add("--slot", default=None, help="server slot to use (default: the agent's only slot, else 0)")
    add(
        "--pool",
        help="bench a host.toml pool through its endpoint (its gateway), as it serves now",
    )
    add(
        "--url",
        help="bench an already-running server at URL directly, without the agent; its API key "
        f"comes from ${API_KEY_ENV} or --api-key-file",
    )
    add(
        "--api-key-file",
        metavar="FILE",
        help=f"with --url: read the server's API key from FILE (or set ${API_KEY_ENV}); there is "
        "no --api-key flag because every user can read a process's flags with ps",
    )
    add(
        "--concurrency",
        default="1,4,16,64",
        help="comma-separated concurrency levels (default 1,4,16,64)",
    )
    add("--input-len", type=int, default=1024, metavar="L", help="prompt length in words (~tokens)")
    add("--output-len", type=int, default=1024, metavar="L", help="output tokens per request")
    g = p.add_mutually_exclusive_group()
    opts.append(
        g.add_argument(
            "--requests",
            type=int,
            metavar="N",
            help="measured requests per point (use >= 10x concurrency)",
        )
    )
    opts.append(
        g.add_argument("--duration", type=float, metavar="S", help="seconds of load per point")
    )
    add(
        "--repeat", type=int, default=1, metavar="K", help="repeats per point; >= 3 gives a 95%% CI"
    )
    add(
        "--warmup",
        type=int,
        metavar="N",
        help="unmeasured warmup requests (default: the concurrency)",
    )
    add("--workload", default="random", help="random, shared-prefix, or a FILE.jsonl of prompts")
    add(
        "--api",
        default="completions",
        choices=("completions", "chat", "generate"),
        help="/v1/completions (default), /v1/chat/completions or native /generate",
    )
    add("--seed", type=int, default=42)
    add(
        "--no-ignore-eos",
        action="store_true",
        help="let requests stop at EOS (use with real prompts for speculative decoding)",
    )
    add("--no-flush-cache", action="store_true", help="keep the prefix cache between points")
    add(
        "--job-completions", type=int, metavar="N", help="estimate the time to finish N completions"
    )
    add("--job-output-len", type=int, metavar="L", help="output tokens per job completion")
    add("--detach", action="store_true", help="start the run in the agent and return at once")
    opts += _export_options(p)
    return opts


def handle(args: argparse.Namespace) -> int:
    if getattr(args, "pool", None):
        _pool_url(args)
    spec = _spec(args)
    if spec.url:
        return _run_direct(args, spec)
    if getattr(args, "api_key_file", None):
        raise CliError(
            "--api-key-file goes with --url; through the agent the key comes from the profile"
        )
    return _run_agent(args, spec)


def _spec(args: argparse.Namespace):
    from sgltui.bench.spec import BenchSpec, SpecError

    try:
        levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    except ValueError:
        raise CliError(
            f"--concurrency {args.concurrency!r}: give comma-separated integers, e.g. 1,4,16,64"
        ) from None
    if args.requests is None and args.duration is None:
        raise CliError("give --requests N or --duration S (how much load per point)")
    if args.workload not in ("random", "shared-prefix"):
        path = Path(args.workload).expanduser()
        if not path.is_file():
            raise CliError(
                f"--workload {args.workload}: no such file; use random, shared-prefix or a FILE.jsonl"
            )
        args.workload = str(path.resolve())
    try:
        return BenchSpec.from_dict(
            {
                "profiles": list(args.profile),
                "slot": str(args.slot or "0"),
                "concurrency": levels,
                "input_len": args.input_len,
                "output_len": args.output_len,
                "requests": args.requests,
                "duration": args.duration,
                "repeat": args.repeat,
                "workload": args.workload,
                "api": args.api,
                "url": args.url,
                "warmup": args.warmup,
                "seed": args.seed,
                "ignore_eos": not args.no_ignore_eos,
                "flush_cache": not args.no_flush_cache,
                "job_completions": args.job_completions,
                "job_output_len": args.job_output_len,
                "profiles_dirs": [
                    str(Path(d).expanduser().resolve()) for d in (args.profiles or [])
                ],
            }
        )
    except SpecError as exc:
        raise CliError(str(exc)) from None


class _Printer:
    """Progress as one line per phase change (a live line on a terminal), with the run's
    estimate first and a running ETA (bench/eta.py)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from sgltui.bench.eta import RunClock, opening_line

        self.last_key: Any = None
        self.tty = sys.stderr.isatty()
        self.live = False
        self.clock = RunClock(spec)
        self.told_total = bool(spec.get("duration"))  # the opening line said it
        self._line(opening_line(spec), final=True)

    def __call__(self, msg: dict) -> None:
        from sgltui.core import units

        now = time.monotonic()
        self.clock.observe(msg, now)
        whole = self.clock.total()
        if not self.told_total and whole is not None:
            self.told_total = True
            self._line(f"estimated run time: about {units.estimate(whole)}", final=True)
        left = self.clock.remaining(now)
        eta = f" · ETA {units.estimate(left)}" if left is not None else ""
        if msg.get("error"):
            self._line(f"! {msg.get('profile') or 'server'}: {msg['error']}", final=True)
            return
        if msg.get("state") in ("done", "stopped", "failed"):
            self._line(f"run {msg.get('run_id')} {msg['state']}", final=True)
            return
        if not msg.get("phase") and msg.get("concurrency") is None:
            return  # the run's opening message: nothing to show yet
        where = f"[{msg.get('point', 0)}/{msg.get('points', '?')}] {msg.get('profile') or 'server'}"
        if msg.get("concurrency") is not None:
            where += f" c={msg['concurrency']} r{msg.get('repeat', 0)}"
        phase = msg.get("phase") or ""
        key = (where, phase)
        if phase in ("warmup", "measure"):
            total = msg.get("total") or "?"
            text = (
                f"{where}: {phase} {msg.get('done', 0)}/{total} done, {msg.get('failed', 0)} failed, "
                f"{msg.get('in_flight', 0)} in flight"
            )
        else:
            text = f"{where}: {phase or 'starting'}"
        text += eta
        if self.tty:
            self._line(text, final=False)
        elif key != self.last_key:
            self._line(text, final=True)
        self.last_key = key

    def _line(self, text: str, final: bool) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _api_key_from_file(path: str) -> str:
    try:
        key = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(
            f"--api-key-file {path}: cannot read it ({getattr(exc, 'strerror', None) or exc}); "
            "give a file that holds the key"
        ) from None
    if not key or len(key.splitlines()) > 1:
        raise CliError(f"--api-key-file {path}: the file must hold the key on one line")
    return key


def _pool_url(args: argparse.Namespace) -> None:
    """--pool NAME: the pool's endpoint becomes --url (its API key, the profile's, through the
    environment as with --url). The pool is measured as it serves: no swap, no cache flush
    (the gateway's /flush_cache is its control plane, which only the agent may call)."""
    from sgltui.client import AgentError, call_sync

    if args.url or args.profile:
        raise CliError(
            "--pool measures what the pool serves now: no --url or --profile with it; "
            f"swap it first with `sgltui swap PROFILE --pool {args.pool}`"
        )
    try:
        st = call_sync(state_dir(args.state_dir), "status", autostart=False)
    except AgentError as exc:
        raise CliError(f"--pool {args.pool}: no agent answers ({exc})") from None
    pool = next((p for p in st.get("pools") or [] if p.get("name") == args.pool), None)
    if pool is None:
        names = ", ".join(p.get("name") for p in st.get("pools") or []) or "none"
        raise CliError(f"no pool {args.pool!r}; pools: {names} (sgltui host show)")
    if pool.get("error"):
        raise CliError(f"pool {args.pool}: {pool['error']}")
    slots = [s for s in st.get("slots") or [] if s.get("id") in (pool.get("slots") or [])]
    if not any(s.get("state") == "ready" for s in slots):
        raise CliError(
            f"pool {args.pool}: no slot is ready; `sgltui start PROFILE --pool {args.pool}`"
        )
    args.url = pool["endpoint"]
    args.no_flush_cache = True
    first = next((s for s in slots if s.get("api_key_set") and s.get("profile")), None)
    if first is not None and not env_config.bench_api_key():
        from sgltui.core.profiles import get_profile

        key = get_profile(first["profile"], args.profiles or []).api_key
        if key:
            os.environ[API_KEY_ENV] = key


def _run_direct(args: argparse.Namespace, spec) -> int:
    from sgltui.bench.runner import run_sweep

    if getattr(args, "api_key_file", None):
        # The runner and its load generators take the key from the environment (only this user
        # can read a process's environment; everyone can read its argv).
        os.environ[API_KEY_ENV] = _api_key_from_file(args.api_key_file)

    run_id = time.strftime("%Y%m%d-%H%M%S") + "-url"
    out_path = state_dir(args.state_dir) / "bench" / f"{run_id}.json"
    printer = _Printer(spec.to_dict())
    result = asyncio.run(run_sweep(spec, out_path, run_id, None, printer))
    printer.done()
    return _show(args, out_path, result)


def default_slot(slot_ids: list[str]) -> str:
    """The slot a bench without --slot uses: the agent's only one, whatever its name (a demo's
    own host names it "a"; the sweep failed with "no slot '0'"), else "0"."""
    return slot_ids[0] if len(slot_ids) == 1 else "0"


def _run_agent(args: argparse.Namespace, spec) -> int:
    from sgltui.client import AgentClient, AgentError, decode_reply

    async def go() -> tuple[str, str | None]:
        client = AgentClient(state_dir(args.state_dir), "cli")
        await client.connect(autostart=True, profiles_dirs=spec.profiles_dirs)
        try:
            if args.slot is None:  # a demo on a busy host runs its one slot as "a", not "0"
                status = await client.call("status")
                spec.slot = default_slot([str(s.get("id")) for s in status.get("slots") or []])
            await client.call("subscribe")  # before starting, so no event of the run is missed
            run = decode_reply("bench_start", await client.call("bench_start", spec=spec.to_dict()))
            run_id = run.run_id
            print(f"bench run {run_id} started in the agent", file=sys.stderr)
            if args.detach:
                return run_id, None
            return run_id, await _follow(client, run_id, spec.to_dict())
        finally:
            await client.close()

    try:
        run_id, path = asyncio.run(go())
    except AgentError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        print(
            "\nthe run goes on in the agent; `sgltui bench stop RUN_ID` stops it, "
            "`sgltui bench list` shows it",
            file=sys.stderr,
        )
        return 130
    if path is None:
        print(run_id)
        return 0
    return _show(args, Path(path), None)


async def _follow(client: Any, run_id: str, spec: dict[str, Any]) -> str | None:
    from sgltui.client import decode_reply

    printer = _Printer(spec)
    path: str | None = None
    pushes = client.subscribe()
    while True:
        try:
            push = await asyncio.wait_for(pushes.__anext__(), timeout=3.0)
        except asyncio.TimeoutError:
            # a missed bench.done (e.g. the agent restarted): ask for the run's state
            listed = decode_reply("bench_list", await client.call("bench_list"))
            run = next((r for r in listed if r.run_id == run_id), None)
            if run is None or run.state != BenchState.RUNNING:
                printer.done()
                return run.path if run else None
            continue
        except StopAsyncIteration:
            raise CliError(
                "lost the connection to the agent; the run goes on: `sgltui bench list`"
            ) from None
        if push.get("push") != "event":
            continue
        ev = push.get("data") or {}
        if ev.get("run_id") != run_id:
            continue
        if ev.get("type") == "bench.progress":
            printer(ev)
            path = ev.get("path") or path
        elif ev.get("type") == "bench.done":
            printer.done()
            if ev.get("state") == "failed" and not Path(ev.get("path") or "").exists():
                raise CliError(
                    f"bench run {run_id} failed (exit code {ev.get('exit_code')}); "
                    f"see its log next to {ev.get('path')}"
                )
            return ev.get("path") or path


def _show(args: argparse.Namespace, path: Path, result: dict | None) -> int:
    from sgltui.bench import compare
    from sgltui.bench.report import format_point
    from sgltui.bench.runner import load_result

    try:
        data = load_result(path)
    except FileNotFoundError:
        raise CliError(
            f"no result file at {path}; the run wrote nothing (see the bench log beside it)"
        ) from None
    except (ValueError, RecursionError):
        raise CliError(f"{path} is not a bench result file (JSON)") from None
    if args.json:
        from sgltui.bench.metrics import clean_json

        print(json.dumps(clean_json(data), indent=1, default=str))
    else:
        measured = [r for r in data.get("results", []) if r.get("metrics")]
        if len(measured) == 1:
            print(
                format_point(measured[0]["metrics"], backend=f"sgltui {measured[0].get('profile')}")
            )
            print()
        print(compare.render_text(data["comparison"]))
        _print_flag_diff(data.get("server_info") or {})
        if data.get("put_back"):
            from sgltui.bench.report import put_back_line

            print(f"\n{put_back_line(data['put_back'])}")
        if isinstance(data.get("cut"), dict):
            from sgltui.core.bench_cut import cut_line

            print(f"\n{cut_line(data['cut'])}")
        print(f"\nresult: {path}")
    _export(args, data)
    ok = any(r.get("metrics") and r["metrics"].get("completed") for r in data.get("results", []))
    return 0 if ok else 1


def _export(args: argparse.Namespace, data: dict) -> None:
    from sgltui.bench import compare

    if args.export_md:
        title = f"Benchmark {data.get('run_id', '')}".strip()
        _write(args.export_md, compare.render_markdown(data["comparison"], title) + "\n")
    if args.export_csv:
        rows = compare.csv_rows(data["comparison"])
        try:
            with open(Path(args.export_csv).expanduser(), "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=compare.CSV_COLUMNS)
                w.writeheader()
                w.writerows(rows)
        except OSError as exc:
            raise CliError(
                f"cannot write {args.export_csv}: {exc.strerror}; choose a writable path"
            ) from None


def _write(path: str, text: str) -> None:
    try:
        Path(path).expanduser().write_text(text)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}; choose a writable path") from None


def _print_flag_diff(infos: dict) -> None:
    """The flags in which the runs' servers differ, as they resolved them (issue 38)."""
    from sgltui.core import provenance

    lines = provenance.flag_diff_lines(infos)
    if lines:
        print("\nserver flags (resolved, from /server_info):")
        print("\n".join(f"  {line}" for line in lines))


def _compare(args: argparse.Namespace) -> int:
    if not args.target:
        raise CliError("give the run file: sgltui bench compare RUN.json [OTHER.json]")
    path = Path(args.target).expanduser()
    if not path.is_file():
        raise CliError(f"no such run file: {path}; run files are under the session's bench/ folder")
    other = getattr(args, "other", None)
    if not other:
        return _show(args, path, None)
    return _compare_two(args, path, Path(other).expanduser())


def _compare_two(args: argparse.Namespace, a: Path, b: Path) -> int:
    """Two stored runs: each one's table, then the flags in which their servers differ."""
    from sgltui.bench.runner import load_result

    infos: dict = {}
    rc = 0
    for path in (a, b):
        if not path.is_file():
            raise CliError(f"no such run file: {path}")
        print(f"== {path.name}")
        rc |= _show(args, path, None)
        try:
            data = load_result(path)
        except ValueError:
            raise CliError(f"{path} is not a bench result file (JSON)") from None
        for name, info in (data.get("server_info") or {}).items():
            infos[f"{path.stem}:{name}"] = info
    if not args.json:
        _print_flag_diff(infos)
    return rc


def _list(args: argparse.Namespace) -> int:
    from sgltui.client import AgentError, call_sync, decode_reply

    try:
        raw = call_sync(state_dir(args.state_dir), "bench_list", autostart=False)
        runs = decode_reply("bench_list", raw)
    except AgentError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(raw, indent=1, default=str))
        return 0
    if not runs:
        print("no bench runs in this agent's session")
    for r in runs:
        point, points = (r.progress.point, r.progress.points) if r.progress else (None, None)
        print(f"{r.run_id}  {r.state:<8} point {point or 0}/{points or '?'}  {r.path}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from sgltui.client import AgentError, call_sync, decode_reply

    if not args.target:
        raise CliError("give the run id: sgltui bench stop RUN_ID (see `sgltui bench list`)")
    try:
        raw = call_sync(
            state_dir(args.state_dir), "bench_stop", autostart=False, run_id=args.target
        )
        run = decode_reply("bench_stop", raw)
    except AgentError as exc:
        raise CliError(str(exc)) from None
    print(f"bench run {run.run_id} {run.state}; partial results: {run.path}")
    return 0
