"""The simulator's command line: SGLang's own flags (from the bundled catalog) plus --sim-*.

argparse runs with prog "sglang serve" so that a bad flag fails exactly as SGLang does
(`sglang serve: error: unrecognized arguments: ...`, exit code 2) and the agent's cause
detection sees the same text it would see from a real server.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sgltui.core import config as env_config
from sgltui.core.config import SIM_GPU_ENV, SIM_HOST_ENV
from sgltui.sim.hardware import DEFAULT_GPU, GPU_PRESETS

FAIL_CAUSES = ("oom", "port", "model-not-found", "cuda", "flag", "memory-saver")
HANG_PHASES = ("weights", "kv", "graphs", "warmup")


def _add_fallback_flags(p: argparse.ArgumentParser) -> None:
    """The flags the simulator acts on, used only until the bundled catalog is importable."""
    add = p.add_argument
    add("--model-path", "--model", type=str, default=None)
    add("--served-model-name", type=str, default=None)
    add("--tokenizer-path", type=str, default=None)
    add("--host", type=str, default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--tp-size", "--tensor-parallel-size", type=int, default=1)
    add("--dp-size", "--data-parallel-size", type=int, default=1)
    add("--pp-size", type=int, default=1)
    add("--mem-fraction-static", type=float, default=None)
    add("--max-running-requests", type=int, default=None)
    add("--max-total-tokens", type=int, default=None)
    add("--max-prefill-tokens", type=int, default=16384)
    add("--context-length", type=str, default=None)
    add("--chunked-prefill-size", type=int, default=None)
    add("--cuda-graph-max-bs-decode", type=int, default=None)
    add("--page-size", type=int, default=None)
    add("--kv-cache-dtype", type=str, default="auto")
    add("--dtype", type=str, default="auto")
    add("--trust-remote-code", action="store_true")
    add("--speculative-algorithm", type=str, default=None)
    add("--speculative-draft-model-path", "--speculative-draft-model", type=str, default=None)
    add("--speculative-num-steps", type=int, default=None)
    add("--speculative-eagle-topk", type=int, default=None)
    add("--speculative-num-draft-tokens", type=int, default=None)
    add("--enable-hierarchical-cache", "--enable-hicache", action="store_true")
    add("--hicache-ratio", type=float, default=None)
    add("--hicache-size", type=int, default=0)
    add(
        "--hicache-write-policy",
        type=str,
        default="write_through",
        choices=["write_back", "write_through", "write_through_selective"],
    )
    add("--max-mamba-cache-size", type=int, default=None)
    add("--mamba-ssm-dtype", type=str, default=None, choices=["float32", "bfloat16", "float16"])
    add("--mamba-full-memory-ratio", type=float, default=None)
    add(
        "--mamba-radix-cache-strategy",
        type=str,
        default="auto",
        choices=["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"],
    )
    add("--disable-radix-cache", action="store_true")
    add("--enable-metrics", action="store_true")
    add("--decode-log-interval", type=int, default=40)
    add("--api-key", type=str, default=None)
    add("--admin-api-key", type=str, default=None)
    add("--incremental-streaming-output", action="store_true")
    add("--enable-cache-report", action="store_true")
    add("--stream-interval", type=int, default=1)
    add("--skip-server-warmup", action="store_true")
    add("--log-level", type=str, default="info")
    add("--log-level-http", type=str, default=None)
    add("--uvicorn-access-log-exclude-prefixes", type=str, nargs="*", default=[])
    add("--stream-response-default-include-usage", action="store_true")
    add("--language-only", action="store_true")
    add("--schedule-conservativeness", type=float, default=1.0)
    add("--max-queued-requests", type=int, default=None)
    add("--watchdog-timeout", type=float, default=300)
    add("--enable-memory-saver", action="store_true")
    add("--enable-weights-cpu-backup", action="store_true")


def _add_sim_flags(p: argparse.ArgumentParser) -> None:
    # A catalog may already carry some --sim-* flags: ours replace them (our defaults and
    # choices win), through argparse's documented conflict handler.
    g = p.add_argument_group("simulator (sgltui)", conflict_handler="resolve")
    preset = env_config.sim_gpu()
    g.add_argument(
        "--sim-gpu",
        default=preset if preset in GPU_PRESETS else DEFAULT_GPU,
        choices=sorted(GPU_PRESETS),
        help=f"simulated GPU preset (default ${SIM_GPU_ENV} or {DEFAULT_GPU})",
    )
    host = env_config.simulated_gpus()
    g.add_argument(
        "--simulated-gpus",
        type=int,
        default=int(host) if host.isdigit() and int(host) > 0 else None,
        metavar="N",
        help=(
            "a simulated host of N GPUs of the preset: memory is published on the GPUs "
            f"CUDA_VISIBLE_DEVICES names (default ${SIM_HOST_ENV}; sgltui sets it per slot)"
        ),
    )
    g.add_argument(
        "--sim-time-scale",
        type=float,
        default=1.0,
        help="multiply start-up and token timing by this; 0 = no delays at all",
    )
    g.add_argument("--sim-seed", type=int, default=0, help="seed of the generated text")
    g.add_argument(
        "--sim-fail-at-start",
        choices=FAIL_CAUSES,
        default=None,
        help="fail during start-up with this cause (memory-saver: torch_memory_saver cannot be "
        "imported, so only a launch with --enable-memory-saver fails)",
    )
    g.add_argument(
        "--sim-crash-after",
        type=float,
        default=None,
        help="scheduler crashes this many (wall) seconds after the process started",
    )
    g.add_argument(
        "--sim-hang-in",
        choices=HANG_PHASES,
        default=None,
        help="stop making progress in this start-up phase",
    )
    g.add_argument(
        "--sim-slow-start",
        type=float,
        default=1.0,
        help="multiply start-up phase durations by this",
    )
    g.add_argument(
        "--sim-host-memory-gb",
        type=float,
        default=512.0,
        help="simulated host RAM (HiCache host pool limit, the standbys' pinned weights)",
    )
    g.add_argument(
        "--sim-pinned-bandwidth-gbs",
        type=float,
        default=54.0,
        help="pinned host <-> GPU copy speed in GB/s, for release/resume (H100 PCIe Gen5: 54)",
    )
    g.add_argument(
        "--sim-pin-s-per-gib",
        type=float,
        default=0.5,
        help="seconds a GiB for a release that pins its host backup (the first one; every one "
        "without TMS_RETAIN_CPU_BACKUP=1), at time scale 1 (H100 host: 0.43-0.52)",
    )
    g.add_argument(
        "--sim-accept-decay",
        type=float,
        default=0.0,
        help="draft acceptance falls by this share per doubling of the running batch (0, the "
        "default: as in SGLang, it does not depend on the batch; 0.08 gives the seed's 234 "
        "tok/s for Qwen3.6-27B MTP at 4 running, not 264)",
    )
    g.add_argument(
        "--sim-release-fails",
        type=int,
        nargs="?",
        const=1,
        default=None,
        metavar="N",
        help="the Nth release (1 when bare) and every later one answer 200 null and free "
        "nothing; the server counts as released all the same (resume it)",
    )
    g.add_argument(
        "--sim-resume-fails",
        type=int,
        nargs="?",
        const=1,
        default=None,
        metavar="N",
        help="the Nth resume (1 when bare) and every later one die in torch-memory-saver "
        "(CUDA out of memory mapping the memory back): the server goes down",
    )
    g.add_argument(
        "--sim-bad-resume-draft",
        action="store_true",
        help="the MTP draft comes back wrong after a resume (accept length ~1.0)",
    )


def _catalog_available(p: argparse.ArgumentParser) -> bool:
    from sgltui.core.flags import load_bundled_catalog

    try:
        load_bundled_catalog().add_to_argparse(p)
    except (OSError, ValueError, KeyError, TypeError, argparse.ArgumentError):
        return False  # a damaged catalog file: the simulator still takes the common flags
    return True


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang serve", add_help=True)
    if not _catalog_available(p):
        p = argparse.ArgumentParser(prog="sglang serve", add_help=True)
        _add_fallback_flags(p)
    _add_sim_flags(p)
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    if "--config" in argv:
        argv = merge_config(parser, list(argv))
    args = parser.parse_args(argv)
    # Catalog parsers may lack a flag the fallback has; give every attribute the simulator reads
    # a default so a thin catalog cannot crash it.
    fallback = argparse.ArgumentParser(add_help=False)
    _add_fallback_flags(fallback)
    for dest, default in vars(fallback.parse_args([])).items():
        if dest not in vars(args):
            setattr(args, dest, default)
    return args


# --- --config FILE.yaml, read as SGLang 0.5.23 reads it --------------------------------------
# server_args_config_parser.ConfigArgumentMerger: one --config only; the file must end in .yaml
# or .yml and hold a mapping; each key becomes --key (true -> bare flag for store_true flags,
# false -> left out; lists -> --key v1 v2; tables -> JSON); the file's flags go before the
# command line's, so the command line wins. sgltui passes API keys this way (never in argv).


def merge_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """argv with `--config FILE` replaced by the file's flags, placed first. Errors exit 2 the
    way argparse does (SGLang raises ValueError there; the message is the same)."""
    where = [i for i, a in enumerate(argv) if a == "--config"]
    if len(where) > 1:
        parser.error("Multiple config files specified! Only one allowed.")
    index = where[0]
    if index == len(argv) - 1:
        parser.error("No config file specified after --config flag!")
    path = Path(argv[index + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        parser.error(f"Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        parser.error(f"Config file not found: {path}")
    try:
        data = read_yaml_mapping(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        parser.error(f"Failed to read config file {path}: {exc}")
    flags: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool):
            if _is_store_true(key):
                if value:
                    flags.append(f"--{key}")
            else:
                flags.extend([f"--{key}", str(value).lower()])
        elif isinstance(value, list):
            if value:
                flags.append(f"--{key}")
                flags.extend(str(v) for v in value)
        elif isinstance(value, dict):
            flags.extend([f"--{key}", json.dumps(value)])
        else:
            flags.extend([f"--{key}", str(value)])
    return flags + argv[:index] + argv[index + 2 :]


def _is_store_true(key: str) -> bool:
    from sgltui.core.flags import load_bundled_catalog

    spec = load_bundled_catalog().lookup(key.replace("_", "-"), sim=True)
    return spec is None or spec.action == "store_true"


def read_yaml_mapping(text: str) -> dict[str, Any]:
    """The top-level mapping of a YAML file. PyYAML's safe_load when it is installed (SGLang's own
    reader); else the flat subset sgltui writes: `key: value` lines whose value is a JSON scalar
    or list, or a bare word."""
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(str(exc).splitlines()[0]) from None
    else:
        data = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, raw = line.partition(":")
            if not sep or not key.strip():
                raise ValueError(f"line {number}: expected `key: value`")
            raw = raw.strip()
            try:
                data[key.strip()] = json.loads(raw) if raw else None
            except ValueError:
                data[key.strip()] = raw
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")
    return {str(k): v for k, v in data.items()}
