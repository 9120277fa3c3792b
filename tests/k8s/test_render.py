"""`sgltui k8s render` and `sgltui profiles export --ome`: the manifests as a pure function of
host.toml, the profiles and the options, every object validated offline against Kubernetes'
schemas (kubernetes-validate) and, for the CRDs it does not know (LeaderWorkerSet, OME), the
minimal schemas vendored in tests/k8s/schemas/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sgltui.core import placement
from sgltui.core.profiles import Profile
from sgltui.core.units import GIB
from sgltui.k8s import ome
from sgltui.k8s.render import Options, RenderError, render
from sgltui.k8s.yaml_out import dump_all

kv = pytest.importorskip("kubernetes_validate")
jsonschema = pytest.importorskip("jsonschema")
yaml = pytest.importorskip("yaml")  # kubernetes-validate's own dependency: reads the YAML back

SCHEMAS = Path(__file__).with_name("schemas")
CRDS = {
    "LeaderWorkerSet": "leaderworkerset.json",
    "ClusterServingRuntime": "ome-clusterservingruntime.json",
    "InferenceService": "ome-inferenceservice.json",
}
MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # the simulator knows its weights: 16 GB


def _profile(name: str, **server) -> Profile:
    return Profile(name=name, launcher="sim", server={"model-path": MODEL, **server})


PROFILES = {
    "fast": _profile("fast"),
    "warm": _profile("warm", **{"enable-hierarchical-cache": True, "hicache-size": 40}),
}


def _pod(spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": spec}


def _valid(docs: list[tuple[list[str], dict]]) -> list[dict]:
    """Each document through YAML and back (the emitter's text is what is checked), then
    validated strictly; the CRDs' pod templates and runners as core/v1 Pods."""
    text = dump_all(docs)
    objs = list(yaml.safe_load_all(text))
    assert objs == [d for _, d in docs]
    version = kv.latest_version()
    for obj in objs:
        kind = obj["kind"]
        if kind in CRDS:
            schema = json.loads((SCHEMAS / CRDS[kind]).read_text())
            jsonschema.validate(obj, schema)
            if kind == "LeaderWorkerSet":
                t = obj["spec"]["leaderWorkerTemplate"]
                for tmpl in (t["leaderTemplate"], t["workerTemplate"]):
                    kv.validate(_pod(tmpl["spec"]), version, strict=True)
            if kind == "ClusterServingRuntime":
                eng = obj["spec"]["engineConfig"]
                spec = {"containers": [eng["runner"]], "volumes": eng["volumes"]}
                kv.validate(_pod(spec), version, strict=True)
        else:
            kv.validate(obj, version, strict=True)
    return objs


def _kinds(objs: list[dict]) -> dict[str, dict]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objs}


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_manifests_valid_for_1_2_8_gpus_per_node(gpus):
    place = placement.layout(gpus)
    opts = Options(
        gpus_per_node=gpus,
        nodes=2,
        serving=(("a", "fast"),),
        standbys=(("a", "warm"),),
        storage_class="fast-ssd",
    )
    docs = render(place, PROFILES, opts)
    assert docs == render(place, PROFILES, opts)  # a pure function: same inputs, same text
    objs = _kinds(_valid(docs))
    sts = objs["StatefulSet/sgltui"]
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == gpus and sts["spec"]["replicas"] == 2
    # the limit covers the standby's pinned weights (16 GB) and its HiCache pool (40 GB)
    limit = int(c["resources"]["limits"]["memory"].removesuffix("Gi")) * GIB
    assert limit >= 16e9 + 40e9
    comment = "\n".join(docs[2][0])
    assert "standby warm: pinned weights" in comment and "HiCache host pool: 37.3 GiB" in comment
    cm = objs["ConfigMap/sgltui-config"]["data"]
    assert 'host = "0.0.0.0"' in cm["host.toml"] and set(cm) >= {"profile.fast.toml"}
    svc = objs["Service/sgltui"]["spec"]
    # one slot: its own front; several: the pool "all" behind its gateway
    assert [p["port"] for p in svc["ports"]] == [30080]
    assert "LeaderWorkerSet" not in {o["kind"] for o in objs.values()}


def test_a_slot_spanning_two_nodes_is_a_leader_worker_set():
    place = placement.layout(8, tp=8)
    big = _profile("big", **{"tp-size": 16, "nnodes": 2})
    docs = render(place, {"big": big}, Options(serving=(("a", "big"),)))
    objs = _kinds(_valid(docs))
    lws = objs["LeaderWorkerSet/sgltui-a"]["spec"]["leaderWorkerTemplate"]
    assert lws["size"] == 2 and "StatefulSet/sgltui" not in objs
    (worker,) = lws["workerTemplate"]["spec"]["containers"]
    assert worker["command"][-2:] == ["--node-rank", "$(LWS_WORKER_INDEX)"]
    assert "sgltui-a-0.sgltui-a.sgltui.svc:20000" in worker["command"]
    leader_profile = objs["ConfigMap/sgltui-config"]["data"]["profile.big.toml"]
    assert 'dist-init-addr = "sgltui-a-0.sgltui-a.sgltui.svc:20000"' in leader_profile
    with pytest.raises(RenderError, match="spans 2 nodes and needs 8 GPUs"):
        render(place, {"big": _profile("big", nnodes=2, **{"tp-size": 8})}, Options(serving=(("a", "big"),)))  # fmt: skip


def test_refusals_are_one_line():
    place = placement.layout(2)
    with pytest.raises(RenderError, match="under what the pod holds"):
        render(place, PROFILES, Options(standbys=(("a", "warm"),), memory_limit_gib=8))
    with pytest.raises(RenderError, match="places 2 GPUs but --gpus-per-node is 8"):
        render(place, PROFILES, Options(gpus_per_node=8))
    with pytest.raises(RenderError, match="name its slot"):
        render(place, PROFILES, Options(serving=(("", "fast"),)))
    unknown = Profile(name="x", launcher="sglang", server={"model-path": "/nowhere/model"})
    with pytest.raises(RenderError, match="pass --weights-gb x=GB"):
        render(place, {"x": unknown}, Options(standbys=(("a", "x"),)))
    ok = render(place, {"x": unknown}, Options(standbys=(("a", "x"),), weights_gb=(("x", 30),)))
    assert any("pinned weights (and draft): 27.9 GiB" in c for c in ok[2][0])


def test_ome_export_valid_with_provenance_annotation(tmp_path):
    prof = Profile(
        name="mtp",
        server={"model-path": "Qwen/Qwen3-8B", "tp-size": 2, "speculative-algorithm": "NEXTN"},
        env={"CUDA_VISIBLE_DEVICES": "0,1", "SGLANG_X": "1"},
    )
    bench = tmp_path / "sessions" / "s1" / "bench"
    bench.mkdir(parents=True)
    result = {"profile": "mtp", "server_info_hash": "abc123def456"}
    (bench / "r.json").write_text(json.dumps({"results": [result]}))
    assert ome.measured_hash(tmp_path, "mtp") == "abc123def456"
    objs = _kinds(_valid(ome.export(prof, ome.measured_hash(tmp_path, "mtp"))))
    csr, isvc = objs["ClusterServingRuntime/sgltui-mtp"], objs["InferenceService/mtp"]
    for o in (csr, isvc):
        assert o["metadata"]["annotations"]["sgltui.io/provenance"] == "abc123def456"
        assert o["metadata"]["annotations"]["sgltui.io/command-hash"] == prof.command_hash()
    runner = csr["spec"]["engineConfig"]["runner"]
    assert runner["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert (
        "--speculative-algorithm" in runner["command"] and "Qwen/Qwen3-8B" not in runner["command"]
    )
    assert runner["env"] == [{"name": "SGLANG_X", "value": "1"}]
    assert isvc["spec"]["runtime"]["name"] == "sgltui-mtp"
    unmeasured = ome.export(prof, ome.measured_hash(tmp_path, "other"))
    assert unmeasured[0][1]["metadata"]["annotations"]["sgltui.io/provenance"] == "unmeasured"


@pytest.mark.slow  # two CLI runs: ~4 s
def test_cli_render_and_export_print_yaml(tmp_path):
    host = tmp_path / "host.toml"
    host.write_text(placement.layout(2).to_toml())
    res = subprocess.run(
        [sys.executable, "-m", "sgltui", "k8s", "render", "--host-file", str(host),
         "--profile", "a=demo-mtp", "--standby", "a=demo-no-mtp", "--image", "me/sgltui:1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    kinds = [o["kind"] for o in yaml.safe_load_all(res.stdout)]
    assert kinds == ["ConfigMap", "Service", "StatefulSet", "Service"]
    res = subprocess.run(
        [sys.executable, "-m", "sgltui", "profiles", "export", "--ome", "demo-mtp"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 1 and "runs the simulator" in res.stderr
    assert res.stderr.count("\n") == 1
