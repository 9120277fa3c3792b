"""`sgltui profiles list` and `validate` with many profiles, against the same commands with few.

    python bench/bench_profiles.py [--profiles 1000] [--runs 3]

Generates profiles in a temporary folder (a third simulator profiles, a third real-SGLang
profiles each with its own `python`, a third in `extends` chains 32 deep)
and times the real command (`python -m sgltui --profiles DIR profiles list|validate`, the best
of --runs) with 10 of them and with all of them. The interpreters are links to this Python
(no SGLang there), so validate runs each one as it runs a real one (issue 29 F12: 754 profiles
listed in 9.8 s and validated in 91 s).

Prints each time, the ratio many/few, and the cost per extra profile. Budget: 1,000 profiles
list in under 2 s (on an idle machine; the ratio to 10 profiles says how much is per profile
and how much is the command's start-up).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHAIN = 32  # the deepest `extends` allowed (core/profiles.py MAX_EXTENDS_DEPTH)


def write_profiles(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    bins = folder.parent / "bin"
    bins.mkdir(exist_ok=True)
    for i in range(count):
        third = i % 3
        if third == 0:
            text = (
                f'name = "sim-{i}"\nlauncher = "sim"\ndescription = "simulated {i}"\n'
                f'[server]\nmodel-path = "meta-llama/Llama-3.1-8B-Instruct"\nport = {31000 + i}\n'
                f"max-running-requests = {i % 64 + 1}\n"
            )
        elif third == 1:
            # Each its own interpreter, as a profile folder gathered from several people has:
            # a link to this Python, which runs the probe as any interpreter without SGLang.
            python = bins / f"python-{i}"
            python.symlink_to(sys.executable)
            text = (
                f'name = "real-{i}"\npython = "{python}"\n[server]\n'
                f'model-path = "Qwen/Qwen3.6-27B"\ntp-size = 1\ncontext-length = 32768\n'
                f'port = {31000 + i}\n[env]\nHF_HOME = "/data/hf"\n'
            )
        else:
            k = i // 3
            parent = f'extends = "chain-{k - 1}"\n' if k % CHAIN else ""
            flags = "".join(f"sim-flag-{n} = {n}\n" for n in range(20)) if not parent else ""
            text = (
                f'name = "chain-{k}"\n{parent}launcher = "sim"\n[server]\n'
                f'model-path = "m"\nmax-running-requests = {k % 50 + 1}\nport = {32000 + k}\n'
                f"{flags}"
            )
            (folder / f"chain-{k}.toml").write_text(text)
            continue
        (folder / f"p{i}.toml").write_text(text)


def timed(folder: Path, action: str, runs: int, env: dict[str, str]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "sgltui", "--profiles", str(folder), "profiles", action],
            capture_output=True,
            text=True,
            env=env,
            start_new_session=True,
            timeout=600,
        )
        took = time.perf_counter() - started
        if "Traceback" in proc.stderr:
            raise SystemExit(f"profiles {action} failed:\n{proc.stderr[-2000:]}")
        best = min(best, took)
    return best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profiles", type=int, default=1000)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="sgltui-bench-profiles-") as tmp:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "XDG_CONFIG_HOME": str(Path(tmp) / "config"),  # no user profiles in the count
            "XDG_CACHE_HOME": str(Path(tmp) / "cache"),
        }
        few, many = Path(tmp) / "few" / "profiles", Path(tmp) / "many" / "profiles"
        write_profiles(few, 10)
        write_profiles(many, args.profiles)
        print(
            f"{'':10} {'10 profiles':>12} {f'{args.profiles} profiles':>16} {'ratio':>7} {'per extra':>10}"
        )
        for action in ("list", "validate"):
            runs = args.runs if action == "list" else 1  # validate runs hundreds of interpreters
            t_few = timed(few, action, runs, env)
            t_many = timed(many, action, runs, env)
            per = (t_many - t_few) / (args.profiles - 10) * 1000
            print(
                f"{action:10} {t_few:>10.2f} s {t_many:>14.2f} s {t_many / t_few:>6.1f}x "
                f"{per:>7.2f} ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
