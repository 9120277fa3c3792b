"""The catalog of SGLang server flags that profiles are checked against.

Two sources, same shape: the catalogs bundled with sgltui (one per SGLang release, generated from
that release's own parser by tools/gen_flag_catalog.py) and a live one read from the interpreter
that will run a profile (cached per SGLang version, because importing SGLang takes seconds).

Which one: the interpreter's SGLang version is read from its package metadata (no import). A
version with a bundled catalog uses it; another version is read live; when that fails, the
nearest bundled release stands in and the Catalog says so (`note`), so a validation report can
name exactly which SGLang it checked against.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from sgltui.core.files import write_json_atomic

_HERE = Path(__file__).resolve().parent
BUNDLED_VERSION = "0.5.23"  # the newest bundled catalog: the default for the simulator and import
BUNDLED_PATH = _HERE / "catalog_sglang_0_5_23.json"
_BUNDLED_FILE = re.compile(r"catalog_sglang_(\d+(?:_\d+)*)\.json")
EXTRACTOR_PATH = _HERE / "flag_extract.py"

# Flags that older SGLang releases accepted and 0.5.23's parser rejects, with the flag that took
# their place. Argparse only says "unrecognized arguments", so this is the one
# piece of version history sgltui keeps itself. Applied to any catalog that lacks the old name.
RENAMED: dict[str, tuple[str, str]] = {
    "mamba-scheduler-strategy": ("mamba-radix-cache-strategy", "renamed after 0.5.12"),
    "cuda-graph-max-bs": (
        "cuda-graph-max-bs-decode",
        "split per phase after 0.5.12 (there is also cuda-graph-max-bs-prefill)",
    ),
    "enable-mixed-priority-backend": ("", "no SGLang release has this flag"),
}

# Flags of sgltui's simulator (`python -m sgltui.sim`), valid only in profiles with launcher "sim".
SIM_GPU_PRESETS = ("h100-80gb", "h200-141gb", "rtx-pro-6000-96gb", "a100-80gb", "l40s-48gb")
_SIM_FLAGS: dict[str, dict[str, Any]] = {
    "sim-gpu": {"type": "str", "choices": list(SIM_GPU_PRESETS)},
    "sim-time-scale": {"type": "float"},
    "sim-seed": {"type": "int"},
    "sim-fail-at-start": {
        "type": "str",
        "choices": ["oom", "port", "model-not-found", "cuda", "flag", "memory-saver"],
    },
    "sim-crash-after": {"type": "float"},
    "sim-hang-in": {"type": "str", "choices": ["weights", "kv", "graphs", "warmup"]},
    "sim-slow-start": {"type": "float"},
    "sim-host-memory-gb": {"type": "float"},
    "sim-pinned-bandwidth-gbs": {"type": "float"},
    "sim-pin-s-per-gib": {"type": "float"},
    "sim-release-fails": {"type": "int", "nargs": "?", "const": 1},
    "sim-resume-fails": {"type": "int", "nargs": "?", "const": 1},
    "sim-accept-decay": {"type": "float"},
    "sim-bad-resume-draft": {"action": "store_true", "type": "bool"},
}


@dataclass(frozen=True)
class FlagSpec:
    """One server flag. `name` is the first long option without the leading dashes."""

    name: str
    options: tuple[str, ...]
    dest: str
    action: str = "store"  # store | store_true | store_false | store_const | boolean_optional | append | count
    type: str | None = "str"  # str | int | float | human_int | json | json_list | None (no value)
    nargs: int | str | None = None
    choices: tuple[Any, ...] | None = None
    default: Any = None
    const: Any = None
    deprecated: bool = False
    replacement: str | None = None  # what SGLang says to use instead, for deprecated flags
    sim_only: bool = False

    @property
    def aliases(self) -> tuple[str, ...]:
        """Other spellings of the flag (without dashes), e.g. model for model-path."""
        negated = {f"no-{self.name}"} if self.action == "boolean_optional" else set()
        return tuple(
            o.lstrip("-")
            for o in self.options
            if o.lstrip("-") != self.name and o.lstrip("-") not in negated
        )

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0 and self.action not in (
            "store_true",
            "store_false",
            "store_const",
            "boolean_optional",
            "count",
        )

    @property
    def is_list(self) -> bool:
        return self.nargs in ("+", "*") or (isinstance(self.nargs, int) and self.nargs > 1)

    @classmethod
    def from_json(cls, name: str, d: dict[str, Any], sim_only: bool = False) -> FlagSpec:
        return cls(
            name=name,
            options=tuple(d.get("options") or (f"--{name}",)),
            dest=d.get("dest") or name.replace("-", "_"),
            action=d.get("action", "store"),
            type=d.get("type", "str"),
            nargs=d.get("nargs"),
            choices=tuple(d["choices"]) if d.get("choices") is not None else None,
            default=d.get("default"),
            const=d.get("const"),
            deprecated=bool(d.get("deprecated", False)),
            replacement=d.get("replacement"),
            sim_only=sim_only,
        )


SIM_FLAGS: dict[str, FlagSpec] = {
    n: FlagSpec.from_json(n, d, sim_only=True) for n, d in _SIM_FLAGS.items()
}


_SUFFIXED = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")


def human_int(text: str) -> int:
    """SGLang's integer syntax for sizes: 32768, 32k (= 32000, SI) or 32Ki (= 32768, IEC)."""
    text = str(text).strip()
    m = _SUFFIXED.fullmatch(text)
    if m:
        number, suffix = m.groups()
        if suffix.endswith("i"):
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"decimals are not allowed with IEC suffix {suffix!r}"
                )
            return int(number) * int(1024 ** ("KMGT".index(suffix[0]) + 1))
        return int(float(number) * 1000 ** ("kMGT".index(suffix) + 1))
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid integer value: {text!r} (use 32768, 32k or 32Ki)"
        ) from None


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid JSON: {text!r}") from None


_CONVERTERS = {
    "str": str,
    "int": int,
    "float": float,
    "human_int": human_int,
    "json": _json_value,
    "json_list": _json_value,
}


@dataclass
class Catalog:
    version: str
    source: str  # "bundled", or "live" (read from `python`), or "cached" (live, from the cache)
    flags: dict[str, FlagSpec]
    values: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # value lists argparse does not enforce
    python: str | None = None
    path: Path | None = None
    note: str | None = None  # why a live catalog was not used, when it was asked for
    installed: str | None = (
        None  # the SGLang version really installed, when another catalog stands in
    )
    _index: dict[str, FlagSpec] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for spec in self.flags.values():
            for opt in spec.options:
                self._index.setdefault(opt.lstrip("-"), spec)
        for spec in self.flags.values():
            self._index[spec.name] = spec

    def lookup(self, name: str, sim: bool = False) -> FlagSpec | None:
        """The flag called `name` (with or without dashes, canonical name or alias). Sim flags only if sim."""
        key = name.lstrip("-")
        spec = self._index.get(key)
        if spec is None and sim:
            spec = SIM_FLAGS.get(key)
        return spec

    def is_negation(self, name: str) -> bool:
        """True for --no-X of a boolean_optional flag X."""
        key = name.lstrip("-")
        spec = self._index.get(key)
        return bool(spec and spec.action == "boolean_optional" and key == f"no-{spec.name}")

    def prefix_matches(self, name: str) -> list[FlagSpec]:
        """Flags argparse would accept `--name` as an abbreviation of (it allows unique prefixes)."""
        key = name.lstrip("-")
        seen: dict[str, FlagSpec] = {}
        for opt, spec in self._index.items():
            if opt.startswith(key):
                seen.setdefault(spec.name, spec)
        return list(seen.values())

    def nearest(self, name: str, n: int = 3, sim: bool = False) -> list[str]:
        key = name.lstrip("-").replace("_", "-").lower()
        names = list(self._index) + (list(SIM_FLAGS) if sim else [])
        return difflib.get_close_matches(key, names, n=n, cutoff=0.6)

    def renamed(self, name: str) -> tuple[str, str] | None:
        key = name.lstrip("-")
        if key in self._index:
            return None
        return RENAMED.get(key)

    @property
    def label(self) -> str:
        """How validation messages name the SGLang they checked against."""
        if self.installed and self.installed != self.version:
            return f"SGLang {self.installed} (checked with the {self.version} catalog)"
        return f"SGLang {self.version}"

    def describe(self) -> str:
        if self.source == "bundled":
            where = f" for {self.python}" if self.python and not self.note else ""
            return f"SGLang {self.version} flag catalog bundled with sgltui{where}" + (
                f" ({self.note})" if self.note else ""
            )
        where = f" from {self.python}" if self.python else ""
        return f"SGLang {self.version} flag catalog read live{where}" + (
            " (cached)" if self.source == "cached" else ""
        )

    def add_to_argparse(self, parser: argparse.ArgumentParser, include_sim: bool = False) -> None:
        """Add every flag with SGLang's nargs/type/choices/action, so `parser` accepts what SGLang accepts."""
        specs = list(self.flags.values()) + (list(SIM_FLAGS.values()) if include_sim else [])
        for spec in specs:
            kwargs: dict[str, Any] = {"dest": spec.dest, "default": spec.default}
            if spec.action == "boolean_optional":
                kwargs["action"] = argparse.BooleanOptionalAction
                options = [o for o in spec.options if not o.startswith("--no-")]
            elif spec.action in ("store_true", "store_false"):
                kwargs["action"] = spec.action
                options = list(spec.options)
            elif spec.action == "store_const" or spec.nargs == 0:
                kwargs.update(
                    action="store_const", const=spec.const if spec.const is not None else True
                )
                options = list(spec.options)
            elif spec.action == "count":
                kwargs["action"] = "count"
                options = list(spec.options)
            else:
                kwargs["action"] = "append" if spec.action == "append" else "store"
                kwargs["type"] = _CONVERTERS.get(spec.type or "str", str)
                if spec.nargs is not None:
                    kwargs["nargs"] = spec.nargs
                if spec.choices is not None:
                    kwargs["choices"] = list(spec.choices)
                options = list(spec.options)
            parser.add_argument(*options, **kwargs)


def _catalog_from_json(
    data: dict[str, Any], source: str, python: str | None = None, path: Path | None = None
) -> Catalog:
    flags = {name: FlagSpec.from_json(name, d) for name, d in data["flags"].items()}
    return Catalog(
        version=str(data.get("sglang_version", "unknown")),
        source=source,
        flags=flags,
        values=dict(data.get("values") or {}),
        python=python,
        path=path,
    )


def version_key(version: str) -> tuple[int, ...]:
    """ "0.5.23" -> (0, 5, 23); "0.5.23.post1" / "0.5.24rc1" -> their release numbers (0, 5, 23) / (0, 5, 24)."""
    parts: list[int] = []
    for piece in version.split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.end() != len(piece):
            break
    return tuple(parts)


@lru_cache(maxsize=1)
def bundled_versions() -> tuple[str, ...]:
    """SGLang releases with a catalog shipped in sgltui, oldest first."""
    found = []
    for path in _HERE.glob("catalog_sglang_*.json"):
        m = _BUNDLED_FILE.fullmatch(path.name)
        if m:
            found.append(m.group(1).replace("_", "."))
    return tuple(sorted(found, key=version_key))


def nearest_bundled_version(version: str) -> str:
    """The bundled release closest to `version`: the newest one not after it (a newer SGLang
    mostly keeps the flags of the one before), else the oldest bundled one."""
    versions = bundled_versions()
    key = version_key(version)
    older = [v for v in versions if version_key(v) <= key]
    return older[-1] if older else versions[0]


@lru_cache(maxsize=8)
def load_bundled_catalog(version: str | None = None) -> Catalog:
    """The bundled catalog of SGLang `version` (default: the newest bundled). ValueError when
    that release has no bundled catalog (see nearest_bundled_version)."""
    version = version or BUNDLED_VERSION
    if version not in bundled_versions():
        raise ValueError(
            f"no bundled catalog for SGLang {version} (bundled: {', '.join(bundled_versions())})"
        )
    path = _HERE / f"catalog_sglang_{version.replace('.', '_')}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return _catalog_from_json(data, "bundled", path=path)


def nearest_bundled_catalog(version: str, why: str | None = None) -> Catalog:
    """The bundled catalog for `version`, or the nearest one with a note that says so."""
    if version in bundled_versions():
        return load_bundled_catalog(version)
    near = nearest_bundled_version(version)
    note = f"SGLang {version} is installed; no catalog for it, using the nearest ({near})"
    return replace(
        load_bundled_catalog(near),
        note=f"{note}: {why}" if why else note,
        installed=version,
        _index={},
    )


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sgltui" / "flag-catalogs"


_VERSION_CODE = "import importlib.metadata as m; print(m.version('sglang'))"
# A profile's `python` is run to read its SGLang version (a profile from a shared folder runs
# code: README says so). It answers in well under a second; one that takes longer than this is
# given up on, and its flags are checked against the bundled catalog.
PROBE_TIMEOUT_S = 10.0


def sglang_version(python: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """The SGLang version installed for `python`, without importing SGLang (that takes seconds)."""
    return probe_version(python, timeout)[0]


def probe_version(python: str, timeout: float = PROBE_TIMEOUT_S) -> tuple[str | None, str | None]:
    """(the SGLang version installed for `python` or None, why there is none when it is because
    `python` did not answer within `timeout`)."""
    try:
        out = subprocess.run(
            [python, "-c", _VERSION_CODE],
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return (
            None,
            f"{python} did not answer within {timeout:.0f} s (asked for its SGLang version)",
        )
    except OSError:
        return None, None
    version = (
        out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else ""
    )
    return (version if re.fullmatch(r"[0-9A-Za-z.+_-]+", version or "") else None), None


def _cache_file(version: str) -> Path:
    return cache_dir() / f"sglang-{version}.json"


def extract_live(python: str, timeout: float = 180.0) -> dict[str, Any]:
    """Run flag_extract.py in `python` and return its catalog. Raises RuntimeError with one line."""
    with tempfile.TemporaryDirectory(prefix="sgltui-catalog-") as tmp:
        out = Path(tmp) / "catalog.json"
        try:
            proc = subprocess.run(
                [python, str(EXTRACTOR_PATH), str(out)],
                capture_output=True,
                text=True,
                timeout=timeout,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"reading SGLang's flags with {python} took over {timeout:.0f} s"
            ) from None
        except OSError as exc:
            raise RuntimeError(f"cannot run {python}: {exc.strerror or exc}") from None
        if proc.returncode != 0 or not out.exists():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"reading SGLang's flags with {python} failed: {last}")
        data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return data


def load_live_catalog(
    python: str | None = None, refresh: bool = False, timeout: float | None = None
) -> Catalog:
    """The catalog of the SGLang installed for `python`.

    Its version comes from package metadata. A bundled release is used as is (no import);
    another version is read live (cached per version); if that fails, the nearest bundled
    catalog stands in, its note saying so. The Catalog's `source` says which: "bundled", "live"
    or "cached". `refresh` reads live even for a bundled version.

    `timeout` bounds each run of `python` (default: PROBE_TIMEOUT_S for the version, 180 s to read
    the flags live); one that runs out leaves the bundled catalog, its note saying so.
    """
    python = os.path.expanduser(python) if python else sys.executable
    version, slow = probe_version(python, PROBE_TIMEOUT_S if timeout is None else timeout)
    if version is None:
        note = slow or f"SGLang is not importable by {python}"
        return replace(load_bundled_catalog(), note=note, _index={})
    if version in bundled_versions() and not refresh:
        return replace(load_bundled_catalog(version), python=python, _index={})
    cached = _cache_file(version)
    if cached.exists() and not refresh:
        try:
            return _catalog_from_json(
                json.loads(cached.read_text(encoding="utf-8")), "cached", python, cached
            )
        except (OSError, ValueError, KeyError, RecursionError):
            pass  # a damaged cache entry is rebuilt below
    try:
        data = extract_live(python) if timeout is None else extract_live(python, timeout)
    except (RuntimeError, ValueError) as exc:
        return nearest_bundled_catalog(version, why=str(exc))
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(cached, data, indent=None, mode=0o644)  # a cache of public facts
    except OSError:
        pass  # an unwritable cache only costs time on the next run
    return _catalog_from_json(data, "live", python, cached)
