"""Each class of validation finding: where it points (file:line), the key, the message and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgltui.core.flags import load_bundled_catalog
from sgltui.core.profiles import get_profile, load_profiles
from sgltui.core.validate import check_profile, check_profile_set, key_clashes
from tests.core.helpers import line_of, write

CATALOG = load_bundled_catalog()


def findings(tmp_path: Path, server: str, launcher: str = "sglang", model: bool = True):
    """Validate a one-file profile; -> (path, [str(issue)...], issues)."""
    body = (
        f'name = "t"\nlauncher = "{launcher}"\n[server]\n'
        + ('model-path = "org/m"\n' if model else "")
        + server
    )
    path = write(tmp_path, "t.toml", body)
    issues = check_profile(get_profile(str(path)), CATALOG)
    return path, [str(i) for i in issues], issues


def only(tmp_path, server, **kw) -> str:
    path, texts, issues = findings(tmp_path, server, **kw)
    assert len(texts) == 1, texts
    return texts[0]


# One row per class of finding: TOML under [server], the expected text (after "t.toml:LINE: ").
CASES = [
    (
        "unknown flag, nearest names",
        "mem-fraction-statc = 0.8\n",
        "mem-fraction-statc: unknown flag for SGLang 0.5.23; did you mean mem-fraction-static",
    ),
    (
        "renamed: mamba strategy",
        'mamba-scheduler-strategy = "no_buffer"\n',
        'mamba-scheduler-strategy: not accepted by SGLang 0.5.23: renamed after 0.5.12; write mamba-radix-cache-strategy = "no_buffer"',
    ),
    (
        "renamed: cuda graph max bs",
        "cuda-graph-max-bs = 16\n",
        "cuda-graph-max-bs: not accepted by SGLang 0.5.23: split per phase after 0.5.12 (there is also cuda-graph-max-bs-prefill); "
        "write cuda-graph-max-bs-decode = 16",
    ),
    (
        "never existed",
        "enable-mixed-priority-backend = true\n",
        "enable-mixed-priority-backend: not accepted by SGLang 0.5.23: no SGLang release has this flag; remove this line",
    ),
    (
        "bad choice lists the choices",
        'schedule-policy = "fastest"\n',
        "schedule-policy: invalid value 'fastest'; choose one of: lpm, random, fcfs, dfs-weight, lof, priority, routing-key, hrrn, shortest-prefill-first",
    ),
    (
        "bad choice, wrong case",
        'mamba-radix-cache-strategy = "EXTRA_BUFFER"\n',
        "mamba-radix-cache-strategy: invalid value 'EXTRA_BUFFER'; did you mean \"extra_buffer\"? choose one of: auto, no_buffer, extra_buffer, extra_buffer_lazy",
    ),
    (
        "MTP is not an algorithm",
        'speculative-algorithm = "MTP"\nspeculative-num-steps = 3\nspeculative-eagle-topk = 1\nspeculative-num-draft-tokens = 4\nmax-running-requests = 4\n',
        'speculative-algorithm: "MTP" is not a speculative algorithm name in SGLang; '
        'for the MTP layers shipped in the checkpoint write speculative-algorithm = "NEXTN"',
    ),
    (
        "unknown algorithm lists the builtins",
        'speculative-algorithm = "MEDUSA"\nmax-running-requests = 4\n',
        "speculative-algorithm: invalid value 'MEDUSA' (SGLang fails at start-up); choose one of: DFLASH, UNO, DSPARK, EAGLE, EAGLE3, STANDALONE, NGRAM, NEXTN",
    ),
    (
        "bad type: int",
        'tp-size = "two"\n',
        "tp-size: takes an integer, not 'two'; write tp-size = 1",
    ),
    (
        "bad type: float",
        'mem-fraction-static = "most"\n',
        "mem-fraction-static: takes a number, not 'most'",
    ),
    (
        "bad type: on/off flag",
        'enable-metrics = "yes"\n',
        "enable-metrics: is an on/off flag, not 'yes'; write enable-metrics = true (or false to leave it off)",
    ),
    (
        "bad type: value flag given true",
        "max-running-requests = true\n",
        "max-running-requests: needs a value (true only suits on/off flags); write max-running-requests = 1",
    ),
    (
        "bad type: list for a single value",
        "port = [1, 2]\n",
        "port: takes one value, not a list; write port = 1",
    ),
    (
        "suffix trap: 32k is 32000",
        'context-length = "32k"\n',
        "context-length: warning: '32k' means 32000 to SGLang (k, M, G are powers of 1000), not 32768; "
        'write context-length = 32768 (or "32Ki"), or 32000 to keep it',
    ),
    (
        "suffix: wrong case is rejected by SGLang",
        'context-length = "32K"\n',
        "context-length: SGLang does not accept '32K' (suffixes are case-sensitive",
    ),
    (
        "suffix on a plain-int flag",
        'max-running-requests = "1k"\n',
        "max-running-requests: --max-running-requests takes a plain integer; SGLang rejects '1k'; write max-running-requests = 1000",
    ),
    (
        "underscores",
        "max_running_requests = 4\n",
        "max_running_requests: SGLang flag names use dashes; write max-running-requests = 4",
    ),
    (
        "sim flag on real SGLang",
        "sim-time-scale = 0.1\n",
        'sim-time-scale: is a simulator flag; real SGLang rejects it; set launcher = "sim" or remove this line',
    ),
    (
        "deprecated flag",
        "disable-cuda-graph = true\n",
        'disable-cuda-graph: warning: deprecated in SGLang 0.5.23 (still accepted, with a warning); write cuda-graph-backend-decode = "disabled" and cuda-graph-backend-prefill = "disabled" instead (`sgltui profiles migrate` rewrites it)',
    ),
    (
        "abbreviation",
        "mem-frac = 0.8\n",
        "mem-frac: warning: abbreviation of --mem-fraction-static",
    ),
    (
        "alias and name both set",
        'model = "other"\n',
        "model: sets the same flag as `model-path` (--model-path); keep only one of `model-path` and `model`",
    ),
    (
        "hicache with radix cache disabled",
        "enable-hierarchical-cache = true\ndisable-radix-cache = true\n",
        "disable-radix-cache: cannot be combined with enable-hierarchical-cache (SGLang: the two are mutually exclusive)",
    ),
    (
        "hicache settings without hicache",
        "hicache-ratio = 2.0\n",
        "hicache-ratio: warning: has no effect without enable-hierarchical-cache",
    ),
    (
        "hicache buffer_only without storage",
        'enable-hierarchical-cache = true\nhicache-host-memory-mode = "buffer_only"\n',
        "hicache-host-memory-mode: buffer_only needs a storage backend",
    ),
    (
        "speculative trio set in part",
        'speculative-algorithm = "NEXTN"\nspeculative-eagle-topk = 1\nmax-running-requests = 4\n',
        "speculative-eagle-topk: speculative-num-steps, speculative-eagle-topk, speculative-num-draft-tokens must be set all three or none "
        "(SGLang fails with a bare AssertionError); also set speculative-num-steps and speculative-num-draft-tokens, or remove speculative-eagle-topk",
    ),
    (
        "speculative without max-running-requests",
        'speculative-algorithm = "NEXTN"\n',
        "speculative-algorithm: warning: without max-running-requests SGLang silently caps running requests at 48 for speculative decoding",
    ),
    (
        "topk 1 forces draft tokens",
        'speculative-algorithm = "NEXTN"\nspeculative-num-steps = 3\nspeculative-eagle-topk = 1\nspeculative-num-draft-tokens = 8\nmax-running-requests = 4\n',
        "speculative-num-draft-tokens: warning: SGLang changes it to speculative-num-steps + 1 = 4 when speculative-eagle-topk is 1",
    ),
    (
        "DFLASH needs a draft model",
        'speculative-algorithm = "DFLASH"\nmax-running-requests = 4\n',
        "speculative-algorithm: DFLASH requires a draft model; set speculative-draft-model-path",
    ),
    (
        "mamba no_buffer needs overlap off",
        'mamba-radix-cache-strategy = "no_buffer"\n',
        'mamba-radix-cache-strategy: no_buffer does not support overlap scheduling (SGLang asserts at start-up); add disable-overlap-schedule = true, or use "auto"',
    ),
    ("port range", "port = 70000\n", "port: port 70000 is out of range"),
]


@pytest.mark.parametrize("label, server, expected", CASES, ids=[c[0] for c in CASES])
def test_each_finding_names_file_line_key_and_fix(tmp_path, label, server, expected):
    path, texts, issues = findings(tmp_path, server)
    matching = [t for t in texts if expected in t]
    assert matching, f"{label}: {expected!r} not in {texts}"
    issue = issues[texts.index(matching[0])]
    assert issue.path == path
    key = expected.split(":")[0]
    assert issue.line == line_of(path, f"{key} ="), "points at the line the key is written on"
    assert matching[0].startswith(f"{path}:{issue.line}: {key}: ")
    assert "\n" not in matching[0]


def test_missing_model_path(tmp_path):
    text = only(tmp_path, "port = 30000\n", model=False)
    assert text == (
        f"{tmp_path / 't.toml'}: model-path: no model: SGLang requires --model-path; "
        'add model-path = "org/model" (a Hugging Face id or a local folder) to [server]'
    )


def test_sim_flags_are_valid_with_the_sim_launcher(tmp_path):
    path, texts, _ = findings(
        tmp_path,
        'sim-gpu = "h200-141gb"\nsim-time-scale = 0.1\nsim-fail-at-start = "oom"\n',
        launcher="sim",
    )
    assert texts == []
    text = only(tmp_path, 'sim-gpu = "b200"\n', launcher="sim")
    assert (
        "sim-gpu: invalid value 'b200'; choose one of: h100-80gb, h200-141gb, rtx-pro-6000-96gb, a100-80gb, l40s-48gb"
        in text
    )


def test_inherited_value_is_reported_in_the_parent_file(tmp_path):
    parent = write(
        tmp_path, "p.toml", 'name = "p"\n[server]\nmodel-path = "m"\nschedule-policy = "FCFS"\n'
    )
    write(tmp_path, "c.toml", 'name = "c"\nextends = "p"\n[server]\nport = 30001\n')
    issues = check_profile(get_profile("c", [tmp_path]), CATALOG)
    assert [str(i) for i in issues] == [
        f"{parent}:4: schedule-policy: invalid value 'FCFS'; did you mean \"fcfs\"? choose one of: "
        "lpm, random, fcfs, dfs-weight, lof, priority, routing-key, hrrn, shortest-prefill-first"
    ]


def test_clean_profile_has_no_findings(tmp_path):
    _, texts, _ = findings(
        tmp_path,
        'speculative-algorithm = "nextn"\nspeculative-num-steps = 3\nspeculative-eagle-topk = 1\n'
        'speculative-num-draft-tokens = 4\nmax-running-requests = 4\ncontext-length = "32Ki"\n'
        "enable-hierarchical-cache = true\nhicache-ratio = 2\ndllm-fdfo = false\n",
    )
    assert texts == []


def test_duplicate_hot_swap_keys_across_launchers(tmp_path):
    write(tmp_path, "a.toml", 'name = "a"\nkey = "7"\n[server]\nmodel-path = "m"\n')
    b = write(tmp_path, "b.toml", 'name = "b"\nkey = "7"\n[server]\nmodel-path = "m"\n')
    c = write(
        tmp_path, "c.toml", 'name = "c"\nkey = "7"\nlauncher = "sim"\n[server]\nmodel-path = "m"\n'
    )
    profiles = [get_profile(n, [tmp_path]) for n in "abc"]
    fix = "give each profile its own key (the key does nothing until then)"
    assert [str(i) for i in check_profile_set(profiles)] == [
        f'{b}:2: key: hot-swap key "7" is also used by profile a; {fix}',
        f'{c}:2: key: hot-swap key "7" is also used by profile a; {fix}',
    ]
    assert key_clashes(profiles) == {"7": ["a", "b", "c"]}


def test_every_bundled_profile_validates_cleanly():
    profiles = load_profiles()
    names = set(profiles)
    expected = {"base", "no-mtp", "mtp", "mtp-hicache", "no-mtp-hicache"}
    assert expected | {f"demo-{n}" for n in expected} <= names
    for profile in profiles.values():
        assert check_profile(profile, CATALOG) == [], profile.name
    assert check_profile_set(profiles.values()) == []


def test_bundled_scenario_shape():
    p = load_profiles()
    for name in ("base", "no-mtp", "mtp", "mtp-hicache", "no-mtp-hicache"):
        real, demo = p[name], p[f"demo-{name}"]
        assert real.launcher == "sglang" and demo.launcher == "sim"
        assert real.server["model-path"] == "Qwen/Qwen3.6-27B" and real.port == 30000
        assert real.server.get("enable-metrics") is True
        # The demo is the same profile plus the simulator's knobs.
        sim_keys = {k for k in demo.server if k.startswith("sim-")}
        assert {k: v for k, v in demo.server.items() if k not in sim_keys} == real.server
        assert (
            demo.server["sim-gpu"] == "rtx-pro-6000-96gb"
            and 0 < demo.server["sim-time-scale"] <= 0.2
        )
        assert "sped up" in demo.description.lower() and demo.key != real.key
    # The demo's keys and the real profiles' keys never clash (issue 12: after `sgltui demo` a
    # plain `sgltui` shows both sets, and a press must start what the user meant).
    assert sorted(
        p[f"demo-{n}"].key for n in ("base", "no-mtp", "mtp", "mtp-hicache", "no-mtp-hicache")
    ) == list("12345")
    assert [p[n].key for n in ("base", "no-mtp", "mtp", "mtp-hicache", "no-mtp-hicache")] == list(
        "!@#$%"
    )
    assert (
        p["mtp"].server["speculative-algorithm"] == "NEXTN"
        and p["mtp"].server["max-running-requests"] == 4
    )
    for name in ("mtp-hicache", "no-mtp-hicache"):
        assert p[name].server["enable-hierarchical-cache"] is True
    assert (
        "speculative-algorithm" not in p["no-mtp"].server
        and "speculative-algorithm" not in p["no-mtp-hicache"].server
    )
