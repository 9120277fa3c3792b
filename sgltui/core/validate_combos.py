"""Checks of a profile's flags against each other, as SGLang's ServerArgs checks them at start-up:
the hierarchical cache, speculative decoding, the hybrid models' state cache and the ports. Each
takes the Findings of core/validate.py's per-flag pass (the flags by canonical name) and adds to
them."""

from __future__ import annotations

from typing import Any

from sgltui.core.validate_findings import Findings

_SPEC_TRIO = ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens")


def check_combinations(c: Findings) -> None:
    """Every cross-flag check, in the order its findings are listed."""
    algo = c.get("speculative-algorithm")
    algo_up = str(algo).upper() if algo else None
    _hicache(c, algo_up)
    _speculative(c, algo, algo_up)
    _hybrid_state(c)
    _grpc_port(c)


def _hicache(c: Findings, algo_up: str | None) -> None:
    """HiCache (ServerArgs' start-up checks)."""
    get, key = c.get, c.key
    hicache = get("enable-hierarchical-cache")
    if hicache and get("disable-radix-cache"):
        c.error(
            key("disable-radix-cache"),
            "cannot be combined with enable-hierarchical-cache (SGLang: the two are mutually exclusive)",
            "remove disable-radix-cache, or turn the hierarchical cache off",
        )
    if hicache and get("enable-lmcache"):
        c.error(
            key("enable-lmcache"),
            "cannot be combined with enable-hierarchical-cache (mutually exclusive)",
            "keep only one of them",
        )
    if hicache and get("enable-int8-mamba-checkpoint"):
        c.error(
            key("enable-int8-mamba-checkpoint"),
            "not supported with enable-hierarchical-cache (the host-offload path is not int8-aware)",
            "disable one of them",
        )
    if (
        hicache
        and get("hicache-host-memory-mode") == "buffer_only"
        and not get("hicache-storage-backend")
    ):
        c.error(
            key("hicache-host-memory-mode"),
            "buffer_only needs a storage backend",
            'set hicache-storage-backend (e.g. "file"), or use "cache"',
        )
    if not hicache:
        for name, (k, _spec) in c.specs.items():
            if name.startswith("hicache-") and get(name) is not None:
                c.warn(
                    k,
                    "has no effect without enable-hierarchical-cache",
                    "add enable-hierarchical-cache = true, or remove this line",
                )
    if hicache and algo_up in ("EAGLE", "EAGLE3", "NEXTN") and get("enable-unified-memory"):
        c.error(
            key("enable-unified-memory"),
            "with EAGLE-family speculative decoding this does not support enable-hierarchical-cache",
            "remove one of them",
        )


def _speculative(c: Findings, algo: Any, algo_up: str | None) -> None:
    """Speculative decoding."""
    get, key = c.get, c.key
    trio = [n for n in _SPEC_TRIO if get(n) is not None]
    if trio and algo is None:
        c.warn(
            key(trio[0]),
            "has no effect without speculative-algorithm",
            'set speculative-algorithm (e.g. "NEXTN") or remove it',
        )
    elif 0 < len(trio) < 3:
        missing = [n for n in _SPEC_TRIO if n not in trio]
        c.error(
            key(trio[0]),
            f"{', '.join(_SPEC_TRIO)} must be set all three or none (SGLang fails with a bare AssertionError)",
            f"also set {' and '.join(missing)}, or remove {' and '.join(trio)}",
        )
    elif len(trio) == 3:
        steps, topk, draft = (as_int(get(n)) for n in _SPEC_TRIO)
        if topk == 1 and steps is not None and draft is not None and draft != steps + 1:
            c.warn(
                key("speculative-num-draft-tokens"),
                f"SGLang changes it to speculative-num-steps + 1 = {steps + 1} when speculative-eagle-topk is 1",
                f"write speculative-num-draft-tokens = {steps + 1}",
            )
        if topk is not None and topk > 1 and get("attention-backend") == "trtllm_mha":
            c.error(
                key("speculative-eagle-topk"),
                "trtllm_mha supports only speculative-eagle-topk = 1",
                "set it to 1 or pick another attention-backend",
            )
    if algo is not None:
        if get("max-running-requests") is None:
            c.warn(
                key("speculative-algorithm"),
                "without max-running-requests SGLang silently caps running requests at 48 for speculative decoding "
                "(and on a hybrid model the draft state for 48 may not fit)",
                "set max-running-requests explicitly (4 is SGLang's own recipe on one GPU)",
            )
        draft_path = get("speculative-draft-model-path")
        if algo_up == "DFLASH" and not draft_path:
            c.error(
                key("speculative-algorithm"),
                "DFLASH requires a draft model",
                "set speculative-draft-model-path",
            )
        if algo_up == "UNO" and draft_path:
            c.error(
                key("speculative-draft-model-path"),
                "UNO reuses the target model and does not accept a draft model path",
                "remove this line",
            )
        if algo_up in ("EAGLE", "EAGLE3", "STANDALONE") and not draft_path:
            c.warn(
                key("speculative-algorithm"),
                f"{algo_up} needs a draft model (only some models ship one inside the checkpoint)",
                'set speculative-draft-model-path, or use "NEXTN" for MTP layers inside the checkpoint',
            )
        if get("enable-mixed-chunk"):
            c.warn(
                key("enable-mixed-chunk"),
                "ignored: SGLang turns mixed chunked prefill off with speculative decoding",
                "remove this line",
            )
        if get("enable-lmcache"):
            c.error(
                key("enable-lmcache"),
                "LMCache does not support speculative decoding",
                "remove one of them",
            )
        attn_dp = as_int(get("attn-dp-size")) or 1
        if algo_up in ("STANDALONE", "NGRAM") and (attn_dp > 1 or get("enable-dp-attention")):
            c.error(
                key("speculative-algorithm"),
                f"{algo_up} speculative decoding does not support DP attention",
                "remove attn-dp-size or pick another algorithm",
            )


def _hybrid_state(c: Findings) -> None:
    """Hybrid (mamba / linear attention) state cache."""
    get, key = c.get, c.key
    strategy = get("mamba-radix-cache-strategy")
    if strategy == "no_buffer":
        if not get("disable-overlap-schedule"):
            c.error(
                key("mamba-radix-cache-strategy"),
                "no_buffer does not support overlap scheduling (SGLang asserts at start-up)",
                'add disable-overlap-schedule = true, or use "auto"',
            )
        page = as_int(get("page-size"))
        if page is not None and page > 1:
            c.error(
                key("page-size"),
                "no_buffer supports only page-size 1",
                'set page-size = 1 or use mamba-radix-cache-strategy = "extra_buffer"',
            )
        if get("attention-backend") == "trtllm_mha":
            c.error(
                key("attention-backend"),
                "no_buffer does not support trtllm_mha",
                "pick another attention-backend",
            )
    if strategy in ("extra_buffer", "extra_buffer_lazy"):
        interval = as_int(get("mamba-track-interval"))
        draft = as_int(get("speculative-num-draft-tokens"))
        if interval is not None and draft is not None and interval < draft:
            c.error(
                key("mamba-track-interval"),
                f"must be at least speculative-num-draft-tokens ({draft})",
                f"write mamba-track-interval = {max(draft, 256)}",
            )


def _grpc_port(c: Findings) -> None:
    get, key = c.get, c.key
    port, grpc = as_int(get("port")), as_int(get("grpc-port"))
    if grpc is not None and grpc == (port or 30000):
        c.error(
            key("grpc-port"),
            f"--grpc-port ({grpc}) must differ from --port",
            "pick another port",
        )


def as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        return None
