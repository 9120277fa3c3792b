"""agent/profile_rows.py: a profile is validated once per change of its files, not per listing."""

from __future__ import annotations

import os

from sgltui.agent.profile_rows import ProfileRows
from sgltui.core.profiles import scan_profiles


def _write(path, mfs):
    path.write_text(
        'name = "p"\nlauncher = "sim"\n[server]\nmodel-path = "Qwen/Qwen3-32B"\n'
        f"mem-fraction-static = {mfs}\n"
    )


def _rows(rows: ProfileRows, folder):
    found = scan_profiles([folder])
    profiles = {n: found.resolve(n) for n in found.names()}
    return rows.rows(profiles, {}, {})


def test_validated_once_until_the_file_changes(tmp_path):
    path = tmp_path / "p.toml"
    _write(path, 0.8)
    rows = ProfileRows()
    first = _rows(rows, tmp_path)
    assert [r["valid"] for r in first if r["name"] == "p"] == [True]
    for _ in range(5):
        _rows(rows, tmp_path)
    assert rows.validations == len(first)
    _write(path, '"lots"')
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    again = [r for r in _rows(rows, tmp_path) if r["name"] == "p"]
    assert again[0]["valid"] is False and "mem-fraction-static" in again[0]["problem"]
    assert rows.validations == len(first) + 1


def test_a_real_profile_sized_by_ratio_is_judged_from_the_gpu_and_its_weights(
    tmp_path, monkeypatch
):
    """Real SGLang, --hicache-ratio: the device pool is the smallest target GPU's static share
    less the weights' files per rank (no NVML here: the GPU's size is given)."""
    from sgltui.agent import gpu
    from sgltui.agent.swap import preflight
    from sgltui.core.profiles import Profile
    from sgltui.core.units import GIB

    model = tmp_path / "model"
    model.mkdir()
    with open(model / "model-00001.safetensors", "wb") as f:
        f.truncate(40 * GIB)  # sparse: 40 GiB of weights, no disk used
    monkeypatch.setattr(gpu, "smallest_total_bytes", lambda visible: 96 * GIB)
    server = {
        "model-path": str(model),
        "mem-fraction-static": 0.9,
        "enable-hierarchical-cache": True,
        "hicache-ratio": 100.0,
    }
    p = Profile(name="real", launcher="sglang", server=server)
    device = preflight.device_pool_of(p)
    assert device is not None and abs(device - ((96 - 0.6) * 0.9 - 40) * GIB) < GIB / 100
    fit = preflight.host_pool_fit(p)
    assert fit.pool is not None and fit.ram == "host RAM"
    assert fit.problem and fit.problem.startswith("host pool 4586 GiB > ")
    # No weights to measure (a hub id not in the cache): nothing is claimed before the start.
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    p2 = Profile(name="hub", launcher="sglang", server={**server, "model-path": "org/none"})
    assert preflight.host_pool_fit(p2).pool is None


def _fake_python(path, found: bool):
    """An interpreter that answers the probe (agent/swap/preflight.py) as a host with or without
    SGLang would."""
    answer = (
        '{"found": true, "error": null}'
        if found
        else ('{"found": false, "error": "ModuleNotFoundError: No module named \'sglang\'"}')
    )
    path.write_text(f"#!/bin/sh\necho '{answer}'\n")
    path.chmod(0o755)
    return path


def test_a_real_profile_on_a_host_without_sglang_reads_cannot_start(tmp_path):
    """Issue 51 item 11: after `sgltui demo`, plain `sgltui` listed the real-GPU profiles with
    ✓ on a host without SGLang. Their rows say what a key press would find."""
    from sgltui import protocol
    from sgltui.tui.views import profile_mark, profile_option

    folder = tmp_path / "profiles"
    folder.mkdir()
    for name, found in (("without", False), ("with", True)):
        python = _fake_python(tmp_path / f"python-{name}", found)
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\nlauncher = "sglang"\npython = "{python}"\n'
            '[server]\nmodel-path = "Qwen/Qwen3-32B"\n'
        )
    rows = {r["name"]: r for r in _rows(ProfileRows(), folder)}
    assert rows["with"]["valid"] is True
    row = rows["without"]
    assert row["valid"] is False and "cannot import sglang" in row["problem"]
    assert "install SGLang" in row["problem"]
    shown = protocol.ProfileRow(**row)
    assert profile_mark(shown) == "[$error]✗[/]"
    assert "✗" in profile_option(shown, []) and "✓" not in profile_option(shown, [])
