"""--sim-accept-decay: the draft's acceptance falls with the running batch (calibrated to the
seed's Qwen3.6-27B MTP: 234 tok/s at 4 running, 62-77 tok/s per request alone); 0, the default,
keeps SGLang's behaviour (acceptance does not depend on the batch)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from sgltui.sim.cli import parse_args
from sgltui.sim.hardware import get_gpu
from sgltui.sim.memory import plan_memory
from sgltui.sim.models import resolve_draft, resolve_model
from sgltui.sim.request import accept_length
from sgltui.sim.speed import SpeedModel

MTP = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"]
MTP += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
MTP += ["--max-running-requests", "4", "--context-length", "32768"]


def _mean_accept(spec, chain, batch: int, decay: float, n: int = 20_000) -> float:
    req = SimpleNamespace(words=random.Random(7))
    return sum(accept_length(req, spec, chain, False, batch, decay) for _ in range(n)) / n  # type: ignore[arg-type]


def _plan():
    model = resolve_model("Qwen/Qwen3.6-27B")
    args = parse_args(["--model-path", "Qwen/Qwen3.6-27B", *MTP])
    plan = plan_memory(
        args, get_gpu("rtx-pro-6000-96gb"), model, resolve_draft("NEXTN", model, None), 700e9
    )
    return model, plan


def test_acceptance_falls_with_the_batch_only_when_asked():
    model, plan = _plan()
    one = _mean_accept(plan.spec, model.accept_chain, 1, 0.08)
    eight = _mean_accept(plan.spec, model.accept_chain, 8, 0.08)
    assert eight < 0.85 * one  # under core/advice.py FALLING: the advice sees it fall
    # the default: the batch changes nothing
    assert _mean_accept(plan.spec, model.accept_chain, 8, 0.0) == pytest.approx(one, rel=0.03)


def test_the_decay_gives_the_seeds_figures():
    model, plan = _plan()
    speed = SpeedModel(get_gpu("rtx-pro-6000-96gb"), model, plan)
    per_req_1 = _mean_accept(plan.spec, model.accept_chain, 1, 0.08) / speed.decode_step(1, 1500)
    total_4 = 4 * _mean_accept(plan.spec, model.accept_chain, 4, 0.08) / speed.decode_step(4, 6000)
    assert 62 <= per_req_1 <= 77  # the seed: 62-77 tok/s per request at concurrency 1
    assert total_4 == pytest.approx(234, rel=0.05)  # ... and 234 tok/s at 4
