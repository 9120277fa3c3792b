"""agent/swap/saver_check.py: what makes a profile unable to sleep on a real SGLang, asked of the
profile's own interpreter (torch_memory_saver >= 0.0.10) and settings."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from sgltui.agent.swap import saver_check


def fake_site(tmp_path, version: str):
    site = tmp_path / f"site-{version}"
    (site / "torch_memory_saver").mkdir(parents=True)
    (site / "torch_memory_saver" / "__init__.py").write_text("")
    meta = site / f"torch_memory_saver-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch_memory_saver\nVersion: {version}\n"
    )
    return {"PYTHONPATH": str(site)}


def target(launcher="sglang", server=None, env=None):
    return SimpleNamespace(
        name="t",
        launcher=launcher,
        server=server or {},
        env=env or {},
        argv=lambda: [sys.executable, "-m", "sglang.launch_server"],
    )


def test_the_profiles_python_needs_torch_memory_saver_0_0_10(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    missing = saver_check.problem(target(env={"PYTHONPATH": str(tmp_path)}))
    assert missing and "has no torch_memory_saver" in missing and "pip install" in missing
    old = saver_check.problem(target(env=fake_site(tmp_path, "0.0.9.post1")))
    assert old and "0.0.9.post1" in old and "TMS_RETAIN_CPU_BACKUP" in old
    assert saver_check.problem(target(env=fake_site(tmp_path, "0.0.10"))) is None


def test_settings_that_cannot_sleep_and_the_simulator_passes(monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    assert saver_check.problem(target("sim")) is None  # no torch_memory_saver needed there
    wc = saver_check.problem(target("sim", server={"weight-cache-mode": "client"}))
    assert wc and "weight-cache-mode" in wc
    conf = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128, expandable_segments:True"}
    found = saver_check.problem(target("sim", env=conf))
    assert found and "expandable_segments" in found
    assert saver_check.problem(target("sim", server={"weight-cache-mode": "off"})) is None
